package authlimit

import (
	"testing"
	"time"
)

func TestFailureLimiterWindow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := New(2, time.Minute, false, func() time.Time { return now })
	for i := range 2 {
		if _, limited := l.Limited("a"); limited {
			t.Fatalf("limited after %d failures", i)
		}
		l.Fail("a")
	}
	wait, limited := l.Limited("a")
	if !limited || wait != time.Minute {
		t.Fatalf("after 2 failures: limited %v, wait %v; want true, 1m", limited, wait)
	}
	if _, limited := l.Limited("b"); limited {
		t.Error("another address is limited")
	}
	now = now.Add(time.Minute)
	if _, limited := l.Limited("a"); limited {
		t.Error("still limited after the window")
	}
	if off := New(0, time.Minute, false, time.Now); func() bool { off.Fail("a"); _, l := off.Limited("a"); return l }() {
		t.Error("a limit of 0 limits")
	}
	loop := New(1, time.Minute, true, time.Now)
	loop.Fail("127.0.0.1")
	loop.Fail("::1")
	if _, limited := loop.Limited("127.0.0.1"); limited {
		t.Error("a loopback client is limited although exempt")
	}
	loop.Fail("192.0.2.1")
	if _, limited := loop.Limited("192.0.2.1"); !limited {
		t.Error("another client is not limited")
	}
	var none *Limiter
	none.Fail("192.0.2.1")
	if _, limited := none.Limited("192.0.2.1"); limited {
		t.Error("a nil Limiter limits")
	}
}
