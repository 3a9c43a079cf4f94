package testenv

import (
	"context"
	"os"
	"os/exec"
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
	out, err := exec.CommandContext(ctx, Program(t, name), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
