package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// WebhookOutcomes are the values of the outcome label of
// mailsink_webhook_attempts_total: a closed set, whatever receivers answer.
var WebhookOutcomes = []string{"success", "http_error", "redirect", "refused_address", "timeout", "network_error"}

// Webhooks holds the metrics of outbound webhook deliveries. A nil
// *Webhooks records nothing.
type Webhooks struct {
	Attempts *prometheus.CounterVec // by outcome, one of WebhookOutcomes
	Duration prometheus.Histogram
	// GaveUp counts deliveries given up after the retry period; Disabled
	// the webhooks disabled for it.
	GaveUp   prometheus.Counter
	Disabled prometheus.Counter
	// MissedEvents counts events that left the store's bounded event
	// history before they were turned into deliveries.
	MissedEvents prometheus.Counter
}

// NewWebhooks registers the webhook metrics on reg.
func NewWebhooks(reg prometheus.Registerer) *Webhooks {
	f := promauto.With(reg)
	w := &Webhooks{
		Attempts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_webhook_attempts_total",
			Help: "Webhook delivery attempts by outcome: success (2xx), http_error (another status), redirect (3xx, not followed), refused_address, timeout, network_error.",
		}, []string{"outcome"}),
		Duration: f.NewHistogram(prometheus.HistogramOpts{
			Name: "mailsink_webhook_attempt_duration_seconds", Help: "Duration of webhook delivery attempts.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		GaveUp: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_webhook_deliveries_failed_total", Help: "Webhook deliveries given up after failing for the whole retry period.",
		}),
		Disabled: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_webhooks_disabled_total", Help: "Webhooks disabled because their deliveries kept failing.",
		}),
		MissedEvents: f.NewCounter(prometheus.CounterOpts{
			Name: "mailsink_webhook_missed_event_gaps_total", Help: "Times the store's event history no longer reached back to the last event turned into webhook deliveries (events may have been missed).",
		}),
	}
	for _, o := range WebhookOutcomes {
		w.Attempts.WithLabelValues(o)
	}
	return w
}
