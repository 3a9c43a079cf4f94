package web_test

import (
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv"
)

// Another account's key never shows the first account's mail: not in the
// list, not by its URL, not through the cookie endpoints, not live.
func TestAnotherAccountNeverSeesTheFirstAccountsMail(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Acme secret"))
	p.waitFor("acme's mail", `document.querySelector('#message-list .subject')?.textContent === 'Acme secret'`)
	acmeID := eval[string](p, `document.querySelector('#message-list .row').dataset.id`)

	// Switch accounts: sign in with another key.
	p.choose("#account-switch", "other")
	p.waitFor("the sign-in page", `document.querySelector('#api-key')`)
	p.typeInto("#api-key", testenv.GlobexKey)
	p.click(".signin-form button[type=submit]")
	p.waitUntilLive()
	p.waitFor("globex's empty list", `document.querySelector('#message-count').textContent === '0 messages'`)
	if got := p.text("#account-switch"); !strings.Contains(got, "Globex") {
		t.Errorf("account shown = %q, want Globex", got)
	}

	// Globex's mail shows; acme's mail, sent before it, never does.
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Acme second secret"))
	sendMail(t, env, "noreply@shop.example", "eve@globex.test", welcomeMail("eve@globex.test", "Globex hello"))
	p.waitFor("globex's mail", `document.querySelector('#message-list .subject')?.textContent === 'Globex hello'`)
	if got := p.rows(); len(got) != 1 {
		t.Errorf("globex sees %q, want only Globex hello", got)
	}

	// Acme's message by its URL, and through the cookie endpoints.
	p.visit("/#/emails/" + acmeID)
	p.waitUntilLive()
	p.waitFor("the not-found message", `document.querySelector('#message-view').innerText.includes('does not exist')`)
	globex := uiBase(t, env, testenv.GlobexKey)
	for _, path := range []string{globex + "preview/" + acmeID, globex + "emails/" + acmeID + "/raw", globex + "emails/" + acmeID + "/attachments/0"} {
		if got := fetchWithCookie(t, p, path); got != "status 404" {
			t.Errorf("globex's cookie on %s: %q, want status 404", path, got)
		}
	}

	// Both keys are saved: switch back to acme from the menu.
	p.waitFor("acme among the saved keys", `[...document.querySelectorAll('#account-switch option')].some(o => o.textContent === 'Switch to Acme QA (acme)')`)
	p.choose("#account-switch", "saved:0")
	p.waitFor("acme's mail again", `document.querySelectorAll('#message-list .row').length === 2`)
}

// A wrong or revoked key gets the sign-in page with a clear message, and
// signing out ends the session.
func TestWrongKeyAndSignOut(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)

	p.visit("/#key=not-a-key")
	p.waitFor("the refusal", `document.querySelector('#signin-message')?.textContent.includes('not accepted')`)
	if href := eval[string](p, "location.href"); strings.Contains(href, "not-a-key") {
		t.Errorf("the address bar still holds the key: %s", href)
	}
	p.typeInto("#api-key", "still-wrong")
	p.click(".signin-form button[type=submit]")
	p.waitFor("the refusal again", `document.querySelector('#signin-message')?.textContent.includes('not accepted') && document.activeElement.id === 'api-key'`)
	p.do(clear("#api-key"))
	p.typeInto("#api-key", testenv.AcmeKey)
	p.click(".signin-form button[type=submit]")
	p.waitUntilLive()

	// A key revoked while the page is open: the next load sends the person
	// to the sign-in page with the same clear message.
	eval[bool](p, `(sessionStorage.setItem('mailsink.key', 'revoked-key'), true)`)
	p.visit("/")
	p.waitFor("the refusal of a revoked key", `document.querySelector('#signin-message')?.textContent.includes('not accepted')`)

	// Sign in from the saved keys, then sign out: the cookie stops working.
	p.click(".saved-key")
	p.waitUntilLive()
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Hello"))
	p.waitFor("the mail", `document.querySelectorAll('#message-list .row').length === 1`)
	id := eval[string](p, `document.querySelector('#message-list .row').dataset.id`)
	raw := uiBase(t, env, testenv.AcmeKey) + "emails/" + id + "/raw"
	if got := fetchWithCookie(t, p, raw); !strings.Contains(got, "Hello Ada") {
		t.Fatalf("raw while signed in: %q", got)
	}
	p.click("#sign-out")
	p.waitFor("the signed-out page", `document.querySelector('#signin-message')?.textContent === 'You are signed out.'`)
	if got := fetchWithCookie(t, p, raw); got != "status 401" {
		t.Errorf("raw after signing out: %q, want status 401", got)
	}
}
