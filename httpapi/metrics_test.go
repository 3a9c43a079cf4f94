package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/testenv"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		m := e.App.Metrics()
		raw := "From: app@example.com\r\nTo: m1@acme.test, m2@acme.test\r\n\r\nhello\r\n"
		c := dialSMTP(t, e.SMTP)
		if err := c.SendMail("app@example.com", []string{"m1@acme.test", "m2@acme.test"}, strings.NewReader(raw)); err != nil {
			t.Fatal(err)
		}
		if err := c.SendMail("app@example.com", []string{"nobody@nowhere.example"}, strings.NewReader(raw)); err == nil {
			t.Fatal("a recipient of no account was accepted")
		}
		c.Quit()
		list(t, e, acme, "recipient=m1%40acme.test")
		e.Do(t, http.MethodGet, "/v1/emails?limit=0", acme, nil)
		e.Do(t, http.MethodGet, "/v1/emails/0190b6d2-7c3e-7a1b-8c2d-1234567890ab", acme, nil)

		for _, tt := range []struct {
			name      string
			got, want float64
		}{
			{"smtp connections", testutil.ToFloat64(m.SMTPConnections), 1},
			{"smtp accepted", testutil.ToFloat64(m.SMTPMessages.WithLabelValues("accepted")), 1},
			{"smtp bytes", testutil.ToFloat64(m.SMTPBytes), float64(len(raw))},
			{"list 200", testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/v1/emails", "GET", "200")), 1},
			{"list 400", testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/v1/emails", "GET", "400")), 1},
			{"get 404", testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/v1/emails/{emailId}", "GET", "404")), 1},
		} {
			if tt.got != tt.want {
				t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
			}
		}
		if n := testutil.CollectAndCount(m.StoreDuration); n == 0 {
			t.Error("no store operation was timed")
		}

		resp := get(t, e, "/metrics", "")
		if resp.Status != http.StatusOK {
			t.Fatalf("/metrics: %d", resp.Status)
		}
		body := string(resp.Body)
		for _, family := range []string{
			"mailsink_smtp_connections_total", "mailsink_smtp_messages_total", "mailsink_smtp_received_bytes_total",
			"mailsink_smtp_recipients_per_message", "mailsink_http_requests_total", "mailsink_http_request_duration_seconds",
			"mailsink_store_operation_duration_seconds", "mailsink_http_waiting_requests", "mailsink_sse_subscribers",
			"mailsink_build_info", "mailsink_smtp_rejections_total", "mailsink_smtp_connections_refused_total",
			"process_resident_memory_bytes", "go_goroutines",
		} {
			if !strings.Contains(body, "\n# TYPE "+family+" ") {
				t.Errorf("/metrics lacks %s", family)
			}
		}
		if !strings.Contains(body, `mailsink_smtp_recipients_per_message_sum 2`) {
			t.Errorf("recipients per message: want one message of 2 recipients in:\n%s", grepLines(body, "recipients_per_message"))
		}
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
