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

// The real reading: the live heap is what the runtime reports, and Run
// sets the process's limit.
func TestRunSetsTheProcessLimit(t *testing.T) {
	keep := make([]byte, 64<<20)
	runtime.GC()
	l := New(Config{Floor: 1 << 20, Held: func() int64 { return 7 << 20 }, Every: time.Millisecond})
	var got int64
	l.set = func(n int64) { got = n }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Run(ctx)
	runtime.KeepAlive(keep)
	if min := int64(64<<20 + 32<<20 + 7<<20); got < min || got > min+64<<20 {
		t.Errorf("limit %d MiB with 64 MiB live and 7 MiB held, want about %d MiB", got>>20, min>>20)
	}
}
