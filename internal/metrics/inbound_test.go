package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestInboundMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	in := NewInbound(reg)
	// Every label value is there from the start, at 0: a closed set.
	if n := testutil.CollectAndCount(in.deliveries); n != len(Providers)*len(InboundResults) {
		t.Errorf("deliveries series = %d, want %d", n, len(Providers)*len(InboundResults))
	}
	in.Delivery("mailgun", "stored")
	in.Delivery("mailgun", "duplicate")
	in.SignatureFailure("ses")
	want := `
# HELP mailsink_inbound_webhook_duplicates_total Provider retries of an already stored delivery, answered with success and stored no more, by provider.
# TYPE mailsink_inbound_webhook_duplicates_total counter
mailsink_inbound_webhook_duplicates_total{provider="mailgun"} 1
mailsink_inbound_webhook_duplicates_total{provider="postmark"} 0
mailsink_inbound_webhook_duplicates_total{provider="sendgrid"} 0
mailsink_inbound_webhook_duplicates_total{provider="ses"} 0
# HELP mailsink_inbound_webhook_signature_failures_total Provider webhook requests refused for a missing or wrong signature or an untrusted SNS certificate, by provider.
# TYPE mailsink_inbound_webhook_signature_failures_total counter
mailsink_inbound_webhook_signature_failures_total{provider="mailgun"} 0
mailsink_inbound_webhook_signature_failures_total{provider="postmark"} 0
mailsink_inbound_webhook_signature_failures_total{provider="sendgrid"} 0
mailsink_inbound_webhook_signature_failures_total{provider="ses"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"mailsink_inbound_webhook_duplicates_total", "mailsink_inbound_webhook_signature_failures_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(in.deliveries.WithLabelValues("mailgun", "stored")); got != 1 {
		t.Errorf("stored = %v, want 1", got)
	}
	var none *Metrics
	none.Inbound().Delivery("mailgun", "stored") // a nil *Metrics records nothing
}
