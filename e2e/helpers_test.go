package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

func sha256hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// execMailsink returns a `mailsink serve` command on loopback ports with env.
func execMailsink(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "MAILSINK_HTTP_ADDR=127.0.0.1:0", "MAILSINK_SMTP_ADDR=127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// figuresMu serialises writes to the figures file.
var figuresMu sync.Mutex

// figures prints one line of figures of a fault test to stdout, and appends
// it to the file MAILSINK_E2E_FIGURES names when set: go test shows the
// stdout of passing tests only with -v, and CI prints that file after the
// suite instead of running the fault tests twice.
func figures(format string, args ...any) {
	line := fmt.Sprintf(format, args...) + "\n"
	fmt.Print(line)
	path := os.Getenv("MAILSINK_E2E_FIGURES")
	if path == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "MAILSINK_E2E_FIGURES:", err)
		return
	}
	defer f.Close()
	f.WriteString(line)
}
