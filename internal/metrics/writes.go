package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/mailsink/mailsink/store"
)

// Writes follows how the store's creates end, so that a store that answers
// reads but refuses writes (a full disk, Redis at maxmemory) shows: in
// mailsink_store_write_failures_total{reason}, in mailsink_store_writable,
// and in GET /readyz/writes. Readiness (/readyz) stays about reads, so that
// a full store's replicas stay in service and mail can be deleted to make
// room.
type Writes struct {
	failures *prometheus.CounterVec
	mu       sync.Mutex
	failing  store.Code // of the last write when it failed for want of the store; else 0
	since    time.Time  // when the current run of failures began
	failed   bool
}

func newWrites(f promauto.Factory) *Writes {
	w := &Writes{
		failures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_store_write_failures_total",
			Help: "Store creates that failed, by reason: full (no room: disk, Redis maxmemory), unavailable (the store does not answer), internal.",
		}, []string{"reason"}),
	}
	for _, reason := range []string{"full", "unavailable", "internal"} {
		w.failures.WithLabelValues(reason)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailsink_store_writable",
		Help: "1 unless the last store create failed because the store is full or unavailable.",
	}, func() float64 {
		if ok, _, _ := w.State(); ok {
			return 1
		}
		return 0
	})
	return w
}

// record notes how one write ended. Client mistakes (not found, conflict,
// invalid) say nothing about the store.
func (w *Writes) record(err error) {
	if w == nil {
		return
	}
	code := store.CodeOf(err)
	reason := ""
	switch {
	case err == nil:
	case code == store.Full:
		reason = "full"
	case code == store.Unavailable:
		reason = "unavailable"
	case code == store.Internal:
		reason = "internal"
	default:
		return
	}
	if reason != "" {
		w.failures.WithLabelValues(reason).Inc()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if reason == "" {
		w.failed = false
		return
	}
	if code == store.Internal {
		return // a bug, not the store's state: the state stays as it was
	}
	if !w.failed || w.failing != code {
		w.since = time.Now()
	}
	w.failed, w.failing = true, code
}

// State reports whether writes succeed, as far as the last one tells; when
// they do not, why and since when.
func (w *Writes) State() (ok bool, reason string, since time.Time) {
	if w == nil {
		return true, "", time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failed {
		return true, "", time.Time{}
	}
	if w.failing == store.Full {
		return false, "the store is full", w.since
	}
	return false, "the store is unavailable", w.since
}
