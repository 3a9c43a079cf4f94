package e2e

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// TestReleaseBinary builds the linux/amd64 binary the way `make release`
// does (scripts/release.sh) and checks what a user who downloads it gets:
// SHA256SUMS names it with its digest, it is static, `version` prints the
// stamped version, and `serve` answers /healthz, then stops cleanly on
// SIGTERM.
func TestReleaseBinary(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the smoke test runs the linux/amd64 binary; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	t.Parallel()
	out := t.TempDir()
	build := exec.Command("../scripts/release.sh")
	build.Env = append(os.Environ(), "OUT="+out, "PLATFORMS=linux/amd64", "VERSION=v0.0.0-smoke")
	if log, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, log)
	}
	const name = "mailsink-v0.0.0-smoke-linux-amd64"
	bin := filepath.Join(out, name)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]) + "  " + name + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a program interpreter: it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	f.Close()

	if v, err := exec.Command(bin, "version").Output(); err != nil || string(v) != "mailsink v0.0.0-smoke\n" {
		t.Errorf("version: %q, %v; want mailsink v0.0.0-smoke", v, err)
	}

	serve := exec.Command(bin, "serve")
	serve.Env = append(os.Environ(), "MAILSINK_HTTP_ADDR=127.0.0.1:0", "MAILSINK_SMTP_ADDR=127.0.0.1:0",
		"MAILSINK_DATA_DIR="+t.TempDir(), "MAILSINK_API_KEY=smoke")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	serve.Stderr = &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill() })
	base := make(chan string, 1)
	go func() {
		httpLine := regexp.MustCompile(`^\s*HTTP\s+(http://\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := httpLine.FindStringSubmatch(sc.Text()); m != nil {
				base <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-base:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve printed no HTTP address in 30s:\n%s", logs.String())
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz answered %d", resp.StatusCode)
	}
	serve.Process.Signal(syscall.SIGTERM)
	if err := serve.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}
