// Package e2e tests mailsink as a user runs it: the real binary, started the
// way the docs say, driven over real SMTP and HTTP.
package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary is the mailsink built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mailsink-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "mailsink")
	build := exec.Command("go", "build", "-race", "-o", binary, "../cmd/mailsink")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build mailsink:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running mailsink binary.
type process struct {
	cmd      *exec.Cmd
	SMTP     string
	HTTP     string // base URL
	APIKey   string // the generated key, when one was printed
	mu       sync.Mutex
	output   strings.Builder
	exited   chan struct{}
	exitErr  error
	stdoutWG sync.WaitGroup
}

var (
	smtpLine = regexp.MustCompile(`^\s*SMTP\s+(\S+)`)
	httpLine = regexp.MustCompile(`^\s*HTTP\s+(\S+)`)
	keyLine  = regexp.MustCompile(`API key of the default account.*: (\S+)$`)
)

// startProcess runs `mailsink serve` with env on free loopback ports and
// waits until it has printed its addresses.
func startProcess(t *testing.T, env ...string) *process {
	t.Helper()
	return startProcessIn(t, "", env...)
}

// startProcessIn is startProcess in the working directory dir ("": the
// test's).
func startProcessIn(t *testing.T, dir string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, "serve")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MAILSINK_HTTP_ADDR=127.0.0.1:0", "MAILSINK_SMTP_ADDR=127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	p.stdoutWG.Add(2)
	go func() {
		defer p.stdoutWG.Done()
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			if m := smtpLine.FindStringSubmatch(line); m != nil {
				p.SMTP = m[1]
			}
			if m := httpLine.FindStringSubmatch(line); m != nil {
				p.HTTP = m[1]
			}
			if m := keyLine.FindStringSubmatch(line); m != nil {
				p.APIKey = m[1]
			}
			p.mu.Unlock()
			if line == "mailsink is ready" && !signalled {
				signalled = true
				close(ready)
			}
		}
		if !signalled {
			close(ready)
		}
	}()
	go func() {
		defer p.stdoutWG.Done()
		data, _ := io.ReadAll(stderr)
		p.mu.Lock()
		p.output.Write(data)
		p.mu.Unlock()
	}()
	go func() {
		p.stdoutWG.Wait()
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("mailsink did not print its addresses in 30s:\n%s", p.Output())
	}
	if p.SMTP == "" || p.HTTP == "" {
		t.Fatalf("mailsink exited or printed no addresses:\n%s", p.Output())
	}
	return p
}

// Output returns what the process printed so far.
func (p *process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// kill sends SIGKILL and waits for the process to go.
func (p *process) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	<-p.exited
}
