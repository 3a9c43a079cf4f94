package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// Open a captured message, release it to a real inbox (a second mailsink
// here), see the mail server's answer; then select two messages and
// release them together.
func TestReleaseAMessageToARealInbox(t *testing.T) {
	up := testenv.StartUpstream(t)
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded},
		testenv.WithRelay(t, "acme", up.Relay(config.RelayStartTLS, `.*@acme\.test`)))
	traffic.allow(strings.TrimPrefix(env.BaseURL, "http://"))
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)

	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Welcome to the shop"))
	p.waitFor("the new mail in the list", `document.querySelector('#message-list .row-link')`)
	p.click("#message-list .row-link")
	p.waitFor("the message view", `document.querySelector('#message-subject')?.textContent === 'Welcome to the shop'`)
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")

	// A recipient the relay does not allow: the server says so.
	p.click("#release-message")
	p.waitFor("the release dialog", `document.querySelector('#release-dialog')?.open`)
	p.typeInto("#release-to", "someone@example.com")
	p.click("#release-send")
	p.waitFor("the refusal", `document.querySelector('#view-notice').textContent.startsWith('Not released:')`)
	if got := p.text("#view-notice"); !strings.Contains(got, "someone@example.com is not allowed") {
		t.Errorf("the notice says %q, want that someone@example.com is not allowed", got)
	}

	p.click("#release-message")
	p.waitFor("the release dialog", `document.querySelector('#release-dialog')?.open`)
	p.typeInto("#release-to", "stakeholder@acme.test")
	p.checkAccessibility(axeSource(t), "the release dialog")
	p.click("#release-send")
	p.waitFor("the mail server's answer", `document.querySelector('#view-notice').textContent.startsWith('Released to stakeholder@acme.test')`)
	if got := p.text("#view-notice"); !strings.Contains(got, "250 2.0.0") {
		t.Errorf("the notice says %q, want the mail server's 250", got)
	}
	raw := env.Do(t, http.MethodGet, "/v1/emails/"+id+"/raw", testenv.AcmeKey, nil).Body
	if got := up.Raws(t, "stakeholder@acme.test"); len(got) != 1 || got[0] != string(raw) {
		t.Errorf("the real inbox got %q, want the message as received", got)
	}

	// Two messages at once, from the list.
	sendMail(t, env, "noreply@shop.example", "bob@acme.test", welcomeMail("bob@acme.test", "Your receipt"))
	p.waitFor("the second mail in the list", `document.querySelectorAll('#message-list .row').length === 2`)
	p.click("#select-all")
	p.waitFor("the selection's actions", `!document.querySelector('.bulk').hidden`)
	p.click("#release-selected")
	p.waitFor("the release dialog", `document.querySelector('#release-dialog')?.open`)
	if got := p.text("#release-title"); got != "Release the 2 messages selected" {
		t.Errorf("the dialog asks %q", got)
	}
	p.typeInto("#release-to", "team@acme.test, lead@acme.test")
	p.click("#release-send")
	p.waitFor("the announcement", `document.querySelector('#announce').textContent === '2 messages released to team@acme.test, lead@acme.test.'`)
	for _, rcpt := range []string{"team@acme.test", "lead@acme.test"} {
		if got := up.Raws(t, rcpt); len(got) != 2 {
			t.Errorf("%s got %d messages, want 2", rcpt, len(got))
		}
	}
}
