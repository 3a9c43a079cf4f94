// Package spamdtest starts a real SpamAssassin spamd on loopback for
// tests (Debian's package spamd; .ci/run installs it). Starting one takes
// a few seconds, so a test package starts one and shares it among its
// tests.
package spamdtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// GTUBE is SpamAssassin's test string: a message holding it scores 1000.
const GTUBE = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"

// Daemon is a running spamd.
type Daemon struct {
	addr   string
	cmd    *exec.Cmd
	log    *logBuffer
	exited chan error // receives Wait's error
}

// Path is spamd's path, or "" when it is not installed.
func Path() string {
	for _, p := range []string{"/usr/sbin/spamd", "/usr/bin/spamd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, _ := exec.LookPath("spamd")
	return p
}

// Start starts spamd on a free loopback port with local tests only (-L),
// at most two children, and waits, up to a minute, until it accepts
// connections.
func Start() (*Daemon, error) {
	path := Path()
	if path == "" {
		return nil, errors.New("spamd is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"-L", "-x", "-i", "127.0.0.1", "-p", strconv.Itoa(port), "-A", "127.0.0.1",
		"--max-children=2", "--min-children=1", "--syslog=stderr"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	d := &Daemon{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: &logBuffer{}, exited: make(chan error, 1)}
	d.cmd = exec.Command(path, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	// Its own process group, so that Stop ends its children too.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.exited <- d.cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", d.addr, time.Second)
		if err == nil {
			c.Close()
			return d, nil
		}
		select {
		case err := <-d.exited:
			return nil, fmt.Errorf("spamd exited (%v): %s", err, d.log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("spamd did not listen within a minute: %s", d.log.String())
		}
	}
}

// logBuffer keeps spamd's output for the error of a failed start.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil // enough to say why it failed
	}
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Addr is spamd's host:port.
func (d *Daemon) Addr() string { return d.addr }

// Stop ends spamd and its children.
func (d *Daemon) Stop() {
	if d == nil || d.cmd.Process == nil {
		return
	}
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Shared starts one spamd for a test package, the first time a test asks,
// and returns it; Stop, from TestMain, ends it.
type Shared struct {
	once   sync.Once
	daemon *Daemon
	err    error
}

// Get returns the package's spamd, starting it if needed. Without spamd
// the test is skipped, or fails under CI=true, where .ci/run installs it.
func (s *Shared) Get(t testing.TB) *Daemon {
	t.Helper()
	if Path() == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("spamd is not installed (CI needs it: .ci/run installs Debian's spamd package)")
		}
		t.Skip("spamd is not installed; skipping the spamd test")
	}
	s.once.Do(func() { s.daemon, s.err = Start() })
	if s.err != nil {
		t.Fatalf("starting spamd: %v", s.err)
	}
	return s.daemon
}

// Stop ends the package's spamd, if it was started.
func (s *Shared) Stop() { s.daemon.Stop() }

// Message returns a message whose body is body, from and to example
// addresses, with the headers SpamAssassin expects.
func Message(subject, body string) []byte {
	return []byte("From: Sender <sender@example.com>\r\nTo: rcpt@example.com\r\nSubject: " + subject +
		"\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\nMessage-ID: <" + strconv.FormatInt(time.Now().UnixNano(), 36) +
		"@example.com>\r\n\r\n" + body + "\r\n")
}
