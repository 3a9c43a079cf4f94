package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Program returns the path of a program a test runs (a real client such
// as python3 or fetchmail, or a server such as redis-server). A missing one
// skips the test, or fails it under CI=true, where .ci/run installs it.
func Program(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (CI needs it: .ci/run installs it)", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// Run runs a program (see Program) with args for at most 30 s and returns
// its combined output; a failure fails the test with that output.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Program(t, name), args...)
	cmd.WaitDelay = 5 * time.Second // a child that keeps the output open does not hold the test
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Fetchmail fetches every message of a mailbox door at addr ("host:port",
// protocol "IMAP" or "POP3", STARTTLS/STLS without a certificate check)
// with a real fetchmail in batch mode, logging in as user with password,
// and returns what it delivered, as one mbox-like text. fetchmail deletes
// what it fetched, as it does by default.
func Fetchmail(t testing.TB, protocol, addr, user, password string) string {
	t.Helper()
	bin := Program(t, "fetchmail")
	dir := t.TempDir()
	out := filepath.Join(dir, "mbox")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	rc := fmt.Sprintf("poll %s service %s protocol %s auth password user %q password %q sslproto tls1.2+ no sslcertck mda \"/bin/sh -c 'cat >> %s'\"\n",
		host, port, protocol, user, password, out)
	rcFile := filepath.Join(dir, "fetchmailrc")
	if err := os.WriteFile(rcFile, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-f", rcFile, "--nosyslog", "--nodetach", "--pidfile", filepath.Join(dir, "pid"))
	cmd.Env = append(os.Environ(), "HOME="+dir, "FETCHMAILHOME="+dir)
	cmd.WaitDelay = 5 * time.Second // its delivery command may outlive it holding the output open
	if got, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fetchmail: %v\n%s", err, got)
	}
	mbox, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(mbox)
}
