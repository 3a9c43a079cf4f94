package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Providers are the values of the provider label of the inbound webhook
// metrics: a closed set.
var Providers = []string{"mailgun", "sendgrid", "postmark", "ses"}

// InboundResults are the values of the result label of
// mailsink_inbound_webhook_deliveries_total: stored (new emails),
// duplicate (a retry of a stored delivery: nothing new), ignored (a message
// with nothing to store: an SNS subscription or set-up notification),
// refused (for good: 4xx), unavailable (the store: 503, the provider
// retries), failed (anything else).
var InboundResults = []string{"stored", "duplicate", "ignored", "refused", "unavailable", "failed"}

// Inbound counts provider webhook requests.
type Inbound struct {
	deliveries *prometheus.CounterVec
	signatures *prometheus.CounterVec
	duplicates *prometheus.CounterVec
}

// NewInbound registers the provider webhook metrics on reg, every label
// value at 0.
func NewInbound(reg prometheus.Registerer) *Inbound {
	f := promauto.With(reg)
	in := &Inbound{
		deliveries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_inbound_webhook_deliveries_total",
			Help: "Provider webhook requests (/v1/inbound/<provider>) by provider and result: stored, duplicate, ignored, refused, unavailable, failed.",
		}, []string{"provider", "result"}),
		signatures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_inbound_webhook_signature_failures_total",
			Help: "Provider webhook requests refused for a missing or wrong signature or an untrusted SNS certificate, by provider.",
		}, []string{"provider"}),
		duplicates: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_inbound_webhook_duplicates_total",
			Help: "Provider retries of an already stored delivery, answered with success and stored no more, by provider.",
		}, []string{"provider"}),
	}
	for _, p := range Providers {
		for _, r := range InboundResults {
			in.deliveries.WithLabelValues(p, r)
		}
		in.signatures.WithLabelValues(p)
		in.duplicates.WithLabelValues(p)
	}
	return in
}

// Delivery counts one request of provider with result (InboundResults).
// A duplicate is counted in mailsink_inbound_webhook_duplicates_total too.
func (in *Inbound) Delivery(provider, result string) {
	if in == nil {
		return
	}
	in.deliveries.WithLabelValues(provider, result).Inc()
	if result == "duplicate" {
		in.duplicates.WithLabelValues(provider).Inc()
	}
}

// SignatureFailure counts one request of provider refused for its
// signature.
func (in *Inbound) SignatureFailure(provider string) {
	if in == nil {
		return
	}
	in.signatures.WithLabelValues(provider).Inc()
}

// Inbound returns the provider webhook metrics; nil (which records
// nothing) when m is nil.
func (m *Metrics) Inbound() *Inbound {
	if m == nil {
		return nil
	}
	return m.InboundWebhooks
}
