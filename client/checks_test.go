package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/client"
	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/testenv/dnstest"
)

// The client reads each check of an email: the HTML's warnings, the links'
// answers (a loopback link refused for an account without private
// targets), the spam check's 409 without spamd, and the authentication of
// an unsigned message that came over HTTP.
func TestChecks(t *testing.T) {
	t.Parallel()
	dns := dnstest.Start(t)
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.Checks.DNSResolver = dns.Addr()
	})
	c := newClient(t, e.BaseURL, testenv.AcmeKey)
	ctx := context.Background()
	email, err := c.Create(ctx, client.NewEmail{Recipient: "checks@acme.test", Sender: "news@shop.example",
		HTML: ptr(`<div style="display:flex"><a href="http://127.0.0.1:9/offer">offer</a></div>`)})
	if err != nil {
		t.Fatal(err)
	}
	html, err := c.HTMLCheck(ctx, email.ID, false)
	if err != nil || !slices.ContainsFunc(html.Warnings, func(w client.HTMLWarning) bool { return w.Feature == "css-display-flex" }) {
		t.Errorf("HTMLCheck = %+v, %v", html, err)
	}
	if again, err := c.HTMLCheck(ctx, email.ID, true); err != nil || again.CheckedAt.Before(html.CheckedAt) {
		t.Errorf("HTMLCheck(refresh) = checked at %v, %v; first at %v", again.CheckedAt, err, html.CheckedAt)
	}
	links, err := c.LinkCheck(ctx, email.ID, false)
	if err != nil || len(links.Items) != 1 || links.Items[0].Status != nil || links.Items[0].Error == nil || !strings.Contains(*links.Items[0].Error, "refused") {
		t.Errorf("LinkCheck = %+v, %v", links, err)
	}
	var apiErr *client.Error
	if _, err := c.SpamCheck(ctx, email.ID, false); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("SpamCheck without spamd: %v, want a 409", err)
	}
	auth, err := c.AuthCheck(ctx, email.ID, false)
	if err != nil || len(auth.DKIM) != 0 || auth.SPF.Result != "none" || auth.DMARC.Result != "none" || auth.DMARC.Domain != "shop.example" {
		t.Errorf("AuthCheck = %+v, %v", auth, err)
	}
}
