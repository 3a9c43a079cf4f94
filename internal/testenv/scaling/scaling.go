// Package scaling checks in tests that an operation's cost grows linearly
// with its input: it runs the operation on an input of size n and of size
// 8n and compares the process's CPU time, best of three runs each. A
// quadratic operation takes about 64 times as long on the larger input; a
// linear one about 8 times, n log n about 10, so the check fails above 16.
// It was 12: a linear scan measured 7.2-8.4 alone and 12.8 three times in
// a row in CI, beside other packages' tests and under the race detector.
package scaling

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// MaxRatio is the largest CPU-time ratio between the 8n and the n run that
// passes.
const MaxRatio = 16

// CPU returns the CPU time, user and system, that the process has used.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Linear fails t when run(build(8n)) costs more than MaxRatio times
// run(build(n)) in CPU time, each the best of three runs. build is not
// timed. A run on the small input that takes under minRun is repeated, and
// the large one as many times, so that the clock's granularity does not
// count. Tests that call it should not run in parallel with others of
// their package, whose work would count.
func Linear[T any](t testing.TB, n int, build func(n int) T, run func(T)) {
	t.Helper()
	small, large := build(n), build(8*n)
	reps := 1
	for best(small, run, reps) < minRun && reps < 1<<16 {
		reps *= 4
	}
	// Other processes on the machine (a test run of several packages at
	// once) evict the larger input from the caches more than the smaller:
	// a ratio over the bound is measured again, and the best of three
	// measurements counts.
	var a, b time.Duration
	ratio := 0.0
	for range 3 {
		a, b = best(small, run, reps), best(large, run, reps)
		ratio = float64(b) / float64(max(a, time.Microsecond))
		if ratio <= MaxRatio {
			break
		}
	}
	t.Logf("n=%d: %v; 8n: %v (%d runs each); ratio %.1f (at most %d)", n, a, b, reps, ratio, MaxRatio)
	if ratio > MaxRatio {
		t.Errorf("8 times the input cost %.1f times the CPU time (%v against %v): not linear", ratio, b, a)
	}
}

// minRun is the least CPU time a measured run on the small input takes.
const minRun = 20 * time.Millisecond

// best returns the least CPU time of three runs of reps calls of run(in).
func best[T any](in T, run func(T), reps int) time.Duration {
	var least time.Duration
	for i := 0; i < 3; i++ {
		runtime.GC() // so that a run does not pay for the garbage of the one before
		start := CPU()
		for range reps {
			run(in)
		}
		if d := CPU() - start; i == 0 || d < least {
			least = d
		}
	}
	return least
}
