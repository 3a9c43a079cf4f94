package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// TestInboundRecipientLimit: /v1/inbound makes one email per To and Cc
// address, so a message with many addresses is refused whole beyond
// MAILSINK_SMTP_MAX_RECIPIENTS, as SMTP would refuse the extra RCPTs.
func TestInboundRecipientLimit(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.SMTP.MaxRecipients = 5 }, func(t *testing.T, e *testenv.Env) {
		post := func(n int, envelopeTo string) *testenv.Response {
			var to []string
			for i := range n {
				to = append(to, fmt.Sprintf("r%d@acme.test", i))
			}
			raw := "From: app@example.com\r\nTo: " + strings.Join(to, ", ") + "\r\nSubject: many\r\n\r\nx\r\n"
			req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", strings.NewReader(raw))
			req.Header.Set("X-Api-Key", acme)
			if envelopeTo != "" {
				req.Header.Set("X-Envelope-To", envelopeTo)
			}
			return e.Send(t, req)
		}
		if resp := post(5, ""); resp.Status != http.StatusCreated {
			t.Fatalf("5 recipients: %d %s", resp.Status, resp.Body)
		}
		wantValidation(t, post(6, ""), "")
		wantValidation(t, post(1, "a@acme.test, b@acme.test, c@acme.test, d@acme.test, e@acme.test, f@acme.test"), "")
		if n := len(list(t, e, acme, "")); n != 5 {
			t.Errorf("stored %d emails, want the 5 within the limit", n)
		}
	})
}
