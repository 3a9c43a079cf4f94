package httpapi

import (
	"testing"
	"time"
)

func TestFailureLimiterWindow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newFailureLimiter(2, time.Minute, func() time.Time { return now })
	for i := range 2 {
		if _, limited := l.limited("a"); limited {
			t.Fatalf("limited after %d failures", i)
		}
		l.fail("a")
	}
	wait, limited := l.limited("a")
	if !limited || wait != time.Minute {
		t.Fatalf("after 2 failures: limited %v, wait %v; want true, 1m", limited, wait)
	}
	if _, limited := l.limited("b"); limited {
		t.Error("another address is limited")
	}
	now = now.Add(time.Minute)
	if _, limited := l.limited("a"); limited {
		t.Error("still limited after the window")
	}
	if off := newFailureLimiter(0, time.Minute, time.Now); func() bool { off.fail("a"); _, l := off.limited("a"); return l }() {
		t.Error("a limit of 0 limits")
	}
}
