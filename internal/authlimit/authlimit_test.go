package authlimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAttempt(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := New(2, time.Minute, false, func() time.Time { return now })
	if ok, _ := l.Attempt("192.0.2.1", "right", true); !ok {
		t.Fatal("a right key was refused")
	}
	for i := range 2 {
		if ok, _ := l.Attempt("192.0.2.1", "guess", false); !ok {
			t.Fatalf("wrong key %d refused before the limit", i+1)
		}
	}
	ok, wait := l.Attempt("192.0.2.1", "guess", false)
	if ok || wait != time.Minute {
		t.Fatalf("over the limit: ok %v, wait %v; want refused for 1m", ok, wait)
	}
	// Over the limit, a key that worked from here goes on; any other key,
	// right or wrong, is refused alike, so a guess learns nothing.
	if ok, _ := l.Attempt("192.0.2.1", "right", true); !ok {
		t.Error("a key that worked from this address was refused")
	}
	if ok, _ := l.Attempt("192.0.2.1", "other-right", true); ok {
		t.Error("a right key new to a limited address was accepted")
	}
	if ok, _ := l.Attempt("192.0.2.2", "guess", false); !ok {
		t.Error("another address is limited")
	}
	now = now.Add(time.Minute)
	if ok, _ := l.Attempt("192.0.2.1", "other-right", true); !ok {
		t.Error("still limited after the window")
	}
}

func TestAttemptGroupsIPv6By64AndExemptsLoopback(t *testing.T) {
	l := New(1, time.Minute, true, time.Now)
	l.Attempt("2001:db8:1:2::1", "guess", false)
	if ok, _ := l.Attempt("2001:db8:1:2:ffff::9", "guess", false); ok {
		t.Error("another address of the same /64 is not limited")
	}
	if ok, _ := l.Attempt("2001:db8:1:3::1", "guess", false); !ok {
		t.Error("another /64 is limited")
	}
	for _, addr := range []string{"127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"} {
		for range 3 {
			if ok, _ := l.Attempt(addr, "guess", false); !ok {
				t.Errorf("loopback %s is limited although exempt", addr)
			}
		}
	}
	var none *Limiter
	if ok, _ := none.Attempt("192.0.2.1", "guess", false); !ok {
		t.Error("a nil Limiter limits")
	}
	if ok, _ := New(0, time.Minute, false, time.Now).Attempt("192.0.2.1", "guess", false); !ok {
		t.Error("a limit of 0 limits")
	}
}

// TestAttemptCountsExactlyUnderConcurrency sends many wrong keys at once:
// exactly the limit get through.
func TestAttemptCountsExactlyUnderConcurrency(t *testing.T) {
	l := New(3, time.Minute, false, time.Now)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := l.Attempt("192.0.2.1", "guess", false); ok {
				passed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := passed.Load(); n != 3 {
		t.Errorf("%d wrong keys got through, want 3", n)
	}
}
