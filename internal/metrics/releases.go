package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// ReleaseResults are the values of the result label of
// mailsink_releases_total: a closed set, whatever upstreams answer.
var ReleaseResults = []string{"released", "refused", "failed", "limited"}

// Releases holds the metrics of emails released to accounts' relays. A
// nil *Releases records nothing.
type Releases struct {
	Results  *prometheus.CounterVec // by result, one of ReleaseResults
	Duration prometheus.Histogram
}

// NewReleases registers the release metrics on reg.
func NewReleases(reg prometheus.Registerer) *Releases {
	f := promauto.With(reg)
	r := &Releases{
		Results: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_releases_total",
			Help: "Emails released to an account's relay, by result: released (the upstream accepted it), refused (the upstream answered 4xx or 5xx), failed (the upstream could not be reached, TLS or the connection failed, or it took too long), limited (not sent: the account's MAILSINK_RELEASE_PER_MINUTE was used up).",
		}, []string{"result"}),
		Duration: f.NewHistogram(prometheus.HistogramOpts{
			Name: "mailsink_release_duration_seconds", Help: "Time to send one released email to the upstream, connecting included when it needed a connection of its own.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	for _, res := range ReleaseResults {
		r.Results.WithLabelValues(res)
	}
	return r
}

// Release records one email's release: its result (one of ReleaseResults)
// and, unless it was limited, how long it took.
func (r *Releases) Release(result string, d time.Duration) {
	if r == nil {
		return
	}
	r.Results.WithLabelValues(result).Inc()
	if result != "limited" {
		r.Duration.Observe(d.Seconds())
	}
}
