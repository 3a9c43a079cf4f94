package smtpd_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// fill stores n emails in the account of key through the API.
func fill(t *testing.T, e *testenv.Env, key, domain string, n int) {
	t.Helper()
	for i := range n {
		resp := e.Do(t, http.MethodPost, "/v1/emails", key, map[string]any{"recipient": fmt.Sprintf("fill%d@%s", i, domain), "sender": "s@example.com"})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, resp.Status, resp.Body)
		}
	}
}

// An account with room for two more emails takes two recipients of a
// message and refuses the others at their own RCPT with 452 4.2.2; the
// message goes to them and to another account's recipient (issue 29: all
// twenty RCPTs were taken and the whole message got 452 at DATA, the other
// account's recipient losing it too).
func TestQuotaCountsTheMessagesRecipientsAtRCPT(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(c *config.Config) { c.Quota.MaxEmails = 5 }, func(t *testing.T, e *testenv.Env) {
		fill(t, e, testenv.AcmeKey, "acme.test", 3)
		c, err := smtp.Dial(e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Mail("app@example.com", nil); err != nil {
			t.Fatal(err)
		}
		var accepted []string
		for i := range 20 {
			to := fmt.Sprintf("r%02d@acme.test", i)
			err := c.Rcpt(to, nil)
			if i < 2 {
				if err != nil {
					t.Fatalf("RCPT %d, within the quota: %v", i+1, err)
				}
				accepted = append(accepted, to)
				continue
			}
			wantCode(t, err, 452, smtp.EnhancedCode{4, 2, 2})
			if msg := err.(*smtp.SMTPError).Message; strings.ContainsAny(msg, "0123456789") {
				t.Errorf("an unauthenticated sender learns acme's figures: %q", msg)
			}
		}
		// A recipient again adds no email: it is not refused.
		if err := c.Rcpt("r00@acme.test", nil); err != nil {
			t.Errorf("RCPT of a recipient already accepted: %v", err)
		}
		if err := c.Rcpt("ops@globex.test", nil); err != nil {
			t.Fatalf("RCPT to another account: %v", err)
		}
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("From: app@example.com\r\nSubject: many\r\n\r\nhi\r\n"))
		if err := w.Close(); err != nil {
			t.Fatalf("end of DATA: %v, want 250 (the refused recipients were refused at RCPT)", err)
		}
		if got := recipients(items(t, e, testenv.AcmeKey, "subject=many")); !reflect.DeepEqual(got, accepted) {
			t.Errorf("acme stored %v, want %v", got, accepted)
		}
		if got := recipients(items(t, e, testenv.GlobexKey, "subject=many")); !reflect.DeepEqual(got, []string{"ops@globex.test"}) {
			t.Errorf("globex stored %v, want the message", got)
		}
		if n := len(items(t, e, testenv.AcmeKey, "")); n != 5 {
			t.Errorf("acme stores %d emails, want its quota of 5", n)
		}
	})
}

// The account's own key (SMTP AUTH) is told why, with its figures.
func TestQuotaRefusalAtRCPTTellsTheAccount(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(c *config.Config) { c.Quota.MaxEmails = 5 }, func(t *testing.T, e *testenv.Env) {
		fill(t, e, testenv.AcmeKey, "acme.test", 4)
		c, err := smtp.Dial(e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Auth(sasl.NewPlainClient("", "ci", testenv.AcmeKey)); err != nil {
			t.Fatal(err)
		}
		if err := c.Mail("app@example.com", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt("one@any.example", nil); err != nil {
			t.Fatalf("RCPT within the quota: %v", err)
		}
		err = c.Rcpt("two@any.example", nil)
		wantCode(t, err, 452, smtp.EnhancedCode{4, 2, 2})
		if msg := err.(*smtp.SMTPError).Message; !strings.Contains(msg, "room for 1 more (it stores 4)") {
			t.Errorf("the account's own refusal: %q, want its figures", msg)
		}
	})
}
