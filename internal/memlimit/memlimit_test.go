package memlimit

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestLimitFollowsTheLiveHeapAndWhatIsHeld(t *testing.T) {
	t.Parallel()
	var live, held int64
	var set []int64
	large := false
	l := New(Config{Floor: 100, Headroom: 40, Held: func() int64 { return held }, Max: 1000, Large: func() bool { return large }})
	l.live = func() int64 { return live }
	l.set = func(n int64) { set = append(set, n) }
	l.allocs = func() int64 { return 0 }
	l.free = func() {}
	l.now = time.Now
	steps := []struct {
		live, held, want int64
	}{
		{0, 0, 100},      // the floor
		{40, 0, 100},     // the live heap and the headroom are under it
		{72, 0, 112},     // the live heap and the headroom
		{80, 0, 120},     // the headroom is more than half the live heap
		{120, 0, 180},    // half the live heap is more than the headroom
		{120, 500, 680},  // a burst of large messages gets room
		{120, 0, 180},    // and gives it back
		{124, 0, 180},    // a move under a sixteenth is not set
		{30, -5, 100},    // nothing held is never less than nothing
		{450, 20, 695},   // a large index
		{450, 600, 1000}, // never past the worst case
		{900, 0, 1350},   // a live heap near it: half of it more, by either rule
	}
	for _, s := range steps {
		live, held = s.live, s.held
		l.update()
		if got := set[len(set)-1]; got != s.want {
			t.Errorf("live %d, held %d: limit %d, want %d", s.live, s.held, got, s.want)
		}
	}
	// The same limit and a small move are not set again.
	if len(set) != len(steps)-2 {
		t.Errorf("set %d times (%v), want %d", len(set), set, len(steps)-2)
	}
	// Large messages being received get the worst case at once.
	live, held, large = 10, 0, true
	l.update()
	if got := set[len(set)-1]; got != 1000 {
		t.Errorf("limit %d while large messages arrive, want the most, 1000", got)
	}
	live = 900
	l.update()
	if got := set[len(set)-1]; got != 1400 {
		t.Errorf("limit %d while large messages arrive with 900 live, want 1400", got)
	}
}

// TestIdleGivesMemoryBack: once the process allocates less than IdleBytes
// over IdleAfter, unused memory is given back, once until it is busy
// again.
func TestIdleGivesMemoryBack(t *testing.T) {
	t.Parallel()
	var allocs int64
	frees := 0
	l := New(Config{Every: 100 * time.Millisecond, IdleAfter: 300 * time.Millisecond, IdleBytes: 1000})
	l.live = func() int64 { return 0 }
	l.set = func(int64) {}
	l.allocs = func() int64 { return allocs }
	l.free = func() { frees++ }
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return at } // a free takes no time
	steps := []struct {
		alloc int64
		frees int
	}{
		{5000, 0}, {5000, 0}, {5000, 0}, {5000, 0}, // busy
		{100, 0}, {100, 0}, // quieter, but the window still holds the burst
		{100, 1},                     // 300 bytes over the last 300 ms: idle, memory given back
		{100, 1}, {100, 1}, {100, 1}, // still idle: not again
		{2000, 1}, {100, 1}, {100, 1}, // busy once, then quiet while the window holds it
		{100, 2}, // idle again
	}
	for i, st := range steps {
		allocs += st.alloc
		at = at.Add(100 * time.Millisecond)
		l.update()
		if frees != st.frees {
			t.Fatalf("step %d: memory given back %d times, want %d", i, frees, st.frees)
		}
	}
}

// TestGivingBackIsAtMostOnePercent: after memory was given back, it is not
// again until a hundred times as long as that took has passed.
func TestGivingBackIsAtMostOnePercent(t *testing.T) {
	t.Parallel()
	var allocs int64
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	frees := 0
	l := New(Config{Every: 100 * time.Millisecond, IdleAfter: 100 * time.Millisecond, IdleBytes: 1000})
	l.live = func() int64 { return 0 }
	l.set = func(int64) {}
	l.allocs = func() int64 { return allocs }
	l.now = func() time.Time { return at }
	l.free = func() { frees++; at = at.Add(20 * time.Millisecond) } // a collection of 20 ms
	// Busy and idle in turn, 100 ms each: given back at the first idle
	// update, then not for the next 2 s.
	for i := range 60 {
		if i%2 == 0 {
			allocs += 5000
		}
		l.update()
		at = at.Add(100 * time.Millisecond)
	}
	// 6 s and 30 idle turns: once at the start, then every 2.02 s at most.
	if frees < 2 || frees > 3 {
		t.Errorf("given back %d times in 6 s of 20 ms collections, want 2 or 3 (at most 1%% of the time)", frees)
	}
}

// The real reading: the live heap is what the runtime reports, and Run
// sets the process's limit.
func TestRunSetsTheProcessLimit(t *testing.T) {
	keep := make([]byte, 64<<20)
	runtime.GC()
	l := New(Config{Floor: 1 << 20, Held: func() int64 { return 7 << 20 }, Every: time.Millisecond})
	var got int64
	l.set = func(n int64) { got = n }
	l.free = func() {}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Run(ctx)
	runtime.KeepAlive(keep)
	if min := int64(64<<20 + 32<<20 + 7<<20); got < min || got > min+64<<20 {
		t.Errorf("limit %d MiB with 64 MiB live and 7 MiB held, want about %d MiB", got>>20, min>>20)
	}
}
