package smtpd

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// reviewedGoSMTP is the go-smtp release whose internals this package
// leans on: fastdata.go follows its DATA reader byte for byte, conn.go
// holds back and times its replies, and the session wrappers rely on
// which errors it recognises by type. A new release may change any of
// them, so a bump must be read against those files (and
// TestFastDataMatchesGoSMTP run) before this constant is moved.
const reviewedGoSMTP = "v0.25.1"

// TestGoSMTPVersionWasReviewed reads go.mod, which decides the version the
// binary is built with (test binaries carry no dependency versions).
func TestGoSMTPVersionWasReviewed(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "replace" {
			t.Errorf("go.mod has a replace directive: %s", strings.TrimSpace(line))
		}
		if i := slices.Index(f, "github.com/emersion/go-smtp"); i >= 0 && i+1 < len(f) && f[0] != "replace" {
			if got := f[i+1]; got != reviewedGoSMTP {
				t.Fatalf("go-smtp is %s, but this package was reviewed against %s: read fastdata.go, conn.go and the "+
					"session wrappers against the new release's data.go and conn.go, then update reviewedGoSMTP", got, reviewedGoSMTP)
			}
			return
		}
	}
	t.Fatal("go.mod does not require go-smtp")
}
