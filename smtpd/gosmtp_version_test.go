package smtpd

import (
	"runtime/debug"
	"testing"
)

// reviewedGoSMTP is the go-smtp release whose internals this package
// leans on: fastdata.go follows its DATA reader byte for byte, conn.go
// holds back and times its replies, and the session wrappers rely on
// which errors it recognises by type. A new release may change any of
// them, so a bump must be read against those files (and
// TestFastDataMatchesGoSMTP run) before this constant is moved.
const reviewedGoSMTP = "v0.25.1"

func TestGoSMTPVersionWasReviewed(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	for _, dep := range info.Deps {
		if dep.Path != "github.com/emersion/go-smtp" {
			continue
		}
		if dep.Replace != nil {
			t.Fatalf("go-smtp is replaced by %s %s: mailsink uses no replace directives", dep.Replace.Path, dep.Replace.Version)
		}
		if dep.Version != reviewedGoSMTP {
			t.Fatalf("go-smtp is %s, but this package was reviewed against %s: read fastdata.go, conn.go and the "+
				"session wrappers against the new release's data.go and conn.go, then update reviewedGoSMTP", dep.Version, reviewedGoSMTP)
		}
		return
	}
	t.Fatal("go-smtp is not among the build's dependencies")
}
