package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
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
