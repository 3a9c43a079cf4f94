// Package memlimit keeps Go's soft memory limit near what mailsink needs
// at the moment, so that its resident memory falls back after a burst.
//
// A fixed limit had to make room for the worst case at all times (every
// large-transfer turn taken by a message at the size limit, the whole read
// budget held): 662 MiB at the defaults, and with GOGC 400 the heap grew to
// it after any busy minute and stayed there. The limit is now set, a few
// times a second, to the heap that was live after the last collection and
// room to allocate beyond it (half of it, at least Headroom; the limit at
// least Floor), plus the bytes large messages and reads hold at that
// moment, and never more than the worst case (Config.Max), which is the
// limit while large messages are being received (unless the live heap
// alone nears the worst case: then the live heap and half of it): the
// collector runs about once per half a live heap allocated, and sooner
// than GOGC alone would let it once the heap is large, while a burst of
// large messages gets room as it arrives. The limit is soft: past it the
// collector works harder, nothing fails.
//
// The room was the live heap itself, with a floor of 128 MiB: after the
// ingest rows of make bench on Redis (65,000 emails, 52 MB live), 140 MiB
// resident. With half of it, at least 32 MiB, and a floor of 64 MiB, it is
// under 100 MiB there, for a collection about twice as often
// (docs/benchmarks.md, "Round 3's memory target").
package memlimit

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults of Config's zero fields. DefaultFloor is the least limit: below
// it the collector follows GOGC.
const (
	DefaultFloor    = 64 << 20
	DefaultHeadroom = 32 << 20
)

// liveMetric is the heap that was live after the last collection;
// allocsMetric the bytes allocated on the heap since the start.
const (
	liveMetric   = "/gc/heap/live:bytes"
	allocsMetric = "/gc/heap/allocs:bytes"
)

// Config is what a Limiter watches.
type Config struct {
	// Floor is the least limit; 0 means DefaultFloor.
	Floor int64
	// Headroom is the least room above the live heap (whose half it is
	// once the heap is large); 0 means DefaultHeadroom.
	Headroom int64
	// Held returns the bytes that large messages and reads hold now,
	// beyond the live heap's share; nil holds none.
	Held func() int64
	// Every is how often the limit is set again; 0 means 100 ms.
	Every time.Duration
	// Max, when not 0, is the most the limit is set to: what the process
	// needs at worst, so that a burst whose messages are most of the live
	// heap does not double it. A live heap that nears it by itself raises
	// it (Limit).
	Max int64
	// Large, when not nil, reports whether large messages are being
	// received: the limit is then Max. Their memory comes and goes faster
	// than the live heap is measured (a collection apart), and a limit
	// that lagged it made the collector run without pause: 100 messages
	// of 25 MB at once took 70 s instead of 52 s and 18 of them timed out.
	Large func() bool
	// IdleAfter and IdleBytes say when the process is idle: it allocated
	// less than IdleBytes in the last IdleAfter. Once it becomes idle, the
	// memory the heap does not use is given back to the system at once
	// (debug.FreeOSMemory), so that resident memory falls to what is live
	// when a burst ends rather than over the minutes the runtime's own
	// pacing takes. It is a forced collection: it is done again only once
	// a hundred times as long as the last one took has passed, so that
	// bursts and pauses in turn spend at most 1% of the time on it. 0
	// means 500 ms and 1 MiB.
	IdleAfter time.Duration
	IdleBytes int64
}

// Limiter sets the process's memory limit (debug.SetMemoryLimit). One
// process runs one.
type Limiter struct {
	cfg Config
	// live reads the live heap, allocs the bytes allocated since the
	// start, set sets the limit and free gives unused memory back; tests
	// replace them.
	live   func() int64
	allocs func() int64
	set    func(int64)
	free   func()
	now    func() time.Time
	last   int64
	// nextFree is the earliest time memory is given back again.
	nextFree time.Time
	// recent is allocs at the last updates, the oldest first, as many as
	// IdleAfter covers; idle is whether the process was idle at the last.
	recent []int64
	idle   bool
}

// New returns a Limiter; Run sets the limit.
func New(cfg Config) *Limiter {
	if cfg.Floor <= 0 {
		cfg.Floor = DefaultFloor
	}
	if cfg.Headroom <= 0 {
		cfg.Headroom = DefaultHeadroom
	}
	if cfg.Held == nil {
		cfg.Held = func() int64 { return 0 }
	}
	if cfg.Every <= 0 {
		cfg.Every = 100 * time.Millisecond
	}
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = 500 * time.Millisecond
	}
	if cfg.IdleBytes <= 0 {
		cfg.IdleBytes = 1 << 20
	}
	return &Limiter{cfg: cfg, live: func() int64 { return readMetric(liveMetric) }, allocs: func() int64 { return readMetric(allocsMetric) },
		set: func(n int64) { debug.SetMemoryLimit(n) }, free: debug.FreeOSMemory, now: time.Now}
}

// Limit returns the limit the process needs now.
func (l *Limiter) Limit() int64 {
	live := l.live()
	// The most is the worst case, Config.Max, unless the live heap alone
	// comes near it: the search index of a million emails is 600 MiB and
	// more, and a limit just above the live heap had the collector run
	// without pause (a list took 5 ms of CPU instead of 0.5). Then it is
	// the live heap and half the worst case.
	ceiling := max(l.cfg.Max, live+l.cfg.Max/2)
	if l.cfg.Max > 0 && l.cfg.Large != nil && l.cfg.Large() {
		return ceiling
	}
	n := max(l.cfg.Floor, live+max(live/2, l.cfg.Headroom)) + max(l.cfg.Held(), 0)
	if l.cfg.Max > 0 {
		n = min(n, ceiling)
	}
	return n
}

// Run sets the limit now and every Config.Every until ctx ends. The limit
// is set again only when it moved by more than a sixteenth, since setting
// it makes the runtime work out its pacing anew.
func (l *Limiter) Run(ctx context.Context) {
	tick := time.NewTicker(l.cfg.Every)
	defer tick.Stop()
	for {
		l.update()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (l *Limiter) update() {
	n := l.Limit()
	if d := n - l.last; d > l.last/16 || -d > l.last/16 {
		l.set(n)
		l.last = n
	}
	window := int(l.cfg.IdleAfter/l.cfg.Every) + 1
	l.recent = append(l.recent, l.allocs())
	if len(l.recent) > window {
		l.recent = l.recent[len(l.recent)-window:]
	}
	idle := len(l.recent) == window && l.recent[window-1]-l.recent[0] < l.cfg.IdleBytes
	if idle && !l.idle {
		if start := l.now(); !start.Before(l.nextFree) {
			l.free()
			end := l.now()
			l.nextFree = end.Add(100 * end.Sub(start))
		}
	}
	l.idle = idle
}

func readMetric(name string) int64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
