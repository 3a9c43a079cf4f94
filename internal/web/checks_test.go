package web_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/testenv/dnstest"
	"github.com/mailsink/mailsink/internal/testenv/spamdtest"
)

// One spamd for the package's tests: it takes seconds to start.
var spamd spamdtest.Shared

// Open a newsletter and look at each check: its HTML's compatibility, its
// spam score, its authentication, and, on request, what its links answer.
func TestChecksTabs(t *testing.T) {
	daemon := spamd.Get(t)
	dns := dnstest.Start(t)
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dns.TXT("news._domainkey.shop.example", "v=DKIM1; k=ed25519; p="+base64.StdEncoding.EncodeToString(pub))
	dns.TXT("shop.example", "v=spf1 ip4:127.0.0.1 -all")
	dns.TXT("_dmarc.shop.example", "v=DMARC1; p=reject")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/sale" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.Checks.SpamdAddr = daemon.Addr()
		c.Checks.DNSResolver = dns.Addr()
		c.Accounts[0].Webhooks.AllowPrivateTargets = true
	})
	traffic.allow(strings.TrimPrefix(env.BaseURL, "http://"))

	msg := "From: Shop <news@shop.example>\r\nTo: ada@acme.test\r\nSubject: Spring sale\r\n" +
		"Date: Mon, 02 Mar 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		`<div style="display:flex"><video src="movie.mp4"></video><a href="` + site.URL + `/sale">Sale</a> ` +
		`<a href="` + site.URL + `/gone">Old</a></div>` + "\r\n"
	var signed bytes.Buffer
	if err := dkim.Sign(&signed, strings.NewReader(msg), &dkim.SignOptions{Domain: "shop.example", Selector: "news", Signer: key}); err != nil {
		t.Fatal(err)
	}
	sendMail(t, env, "news@shop.example", "ada@acme.test", signed.String())

	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("the mail", `document.querySelectorAll('#message-list .row').length > 0`)
	p.click("#message-list .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent === 'Spring sale'`)

	p.click("#tab-check-html")
	p.waitFor("the compatibility summary", `document.querySelector('#check-summary-html')?.textContent.includes('supported')`)
	p.click("#panel-check-html details summary")
	p.screenshot("check-html")
	html := p.text("#panel-check-html")
	for _, want := range []string{"display:flex", "css-display-flex", "html-video"} {
		if !strings.Contains(html, want) {
			t.Errorf("the compatibility tab does not show %s:\n%s", want, html)
		}
	}

	p.click("#tab-check-spam")
	p.waitFor("the spam score", `document.querySelector('#check-summary-spam')?.textContent.startsWith('Score ')`)
	p.screenshot("check-spam")
	if got := p.text("#check-summary-spam"); !strings.Contains(got, "of 5") {
		t.Errorf("spam summary = %q", got)
	}

	p.click("#tab-check-auth")
	p.waitFor("the authentication", `document.querySelector('#check-summary-auth')?.textContent.includes('DMARC')`)
	p.screenshot("check-auth")
	if got, want := p.text("#check-summary-auth"), "DKIM pass · SPF pass · DMARC pass"; got != want {
		t.Errorf("authentication summary = %q, want %q", got, want)
	}

	p.click("#tab-check-links")
	p.waitFor("the button that fetches the links", `document.querySelector('#run-check-links')`)
	if n := eval[int](p, `document.querySelectorAll('#check-summary-links').length`); n != 0 {
		t.Error("the links were checked before the person asked")
	}
	p.click("#run-check-links")
	p.waitFor("the link check", `document.querySelector('#check-summary-links')?.textContent.includes('broken')`)
	p.screenshot("check-links")
	if got, want := p.text("#check-summary-links"), "1 of 2 links and images answer; 1 broken or unreachable"; got != want {
		t.Errorf("link check summary = %q, want %q", got, want)
	}
	if n := eval[int](p, `document.querySelectorAll('#panel-check-links a').length`); n != 0 {
		t.Errorf("the link check made %d of the message's URLs clickable", n)
	}
}
