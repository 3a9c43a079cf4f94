package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/mailsink/mailsink/internal/testenv"
)

// A 1x1 PNG, for the inline (cid:) image and the attachment thumbnail.
const pixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// welcomeMail is an ordinary signup mail: HTML with an inline image and a
// link, a text part, and a PDF attachment.
func welcomeMail(to, subject string) string {
	return `From: Shop <noreply@shop.example>
To: ` + to + `
Subject: ` + subject + `
Message-ID: <welcome-1@shop.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: multipart/related; boundary="rel"

--rel
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

Hello Ada, confirm your account: https://shop.example/confirm?t=123

--alt
Content-Type: text/html; charset=utf-8

<html><body><h1 id="greeting">Hello Ada</h1><img src="cid:logo@shop" alt="logo">
<p><a href="https://shop.example/confirm?t=123">Confirm your account</a></p></body></html>
--alt--

--rel
Content-Type: image/png
Content-ID: <logo@shop>
Content-Transfer-Encoding: base64

` + pixelPNG + `
--rel--

--outer
Content-Type: application/pdf; name="invoice.pdf"
Content-Disposition: attachment; filename="invoice.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQKJcfsj6IK
--outer--
`
}

// Sign in with the link mailsink prints, see mail sent over SMTP appear
// live, open it and look at every tab.
func TestSignInSeeNewMailLiveAndReadIt(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)

	p.signIn(testenv.AcmeKey)
	if href := eval[string](p, "location.href"); strings.Contains(href, "key") || strings.Contains(href, testenv.AcmeKey) {
		t.Errorf("the address bar still holds the key: %s", href)
	}
	if got := p.text("#account-switch option"); !strings.Contains(got, "Acme QA") {
		t.Errorf("account shown = %q, want Acme QA", got)
	}
	if src := eval[string](p, "document.documentElement.outerHTML"); strings.Contains(src, testenv.AcmeKey) {
		t.Error("the page source holds the key")
	}

	// The page notes when the row appears, so the figure is the page's and
	// not the polling's.
	eval[bool](p, `(window.rowAt = 0, new MutationObserver(() => { if (!window.rowAt && document.querySelector('#message-list .row')) window.rowAt = Date.now() }).observe(document.body, {childList: true, subtree: true}), true)`)
	sent := time.Now()
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Welcome to the shop"))
	p.waitFor("the new mail in the list", `[...document.querySelectorAll('#message-list .subject')].some(e => e.textContent === 'Welcome to the shop')`)
	d := time.UnixMilli(int64(eval[float64](p, "window.rowAt"))).Sub(sent)
	t.Logf("from sending over SMTP to the row in the list: %s", d)
	if d > time.Second {
		t.Errorf("the new mail took %s to appear, want under 1s", d)
	}
	p.waitFor("the count", `document.querySelector('#message-count').textContent.startsWith('1 message')`)

	mark := traffic.mark()
	p.click("#message-list .row-link")
	p.waitFor("the message view", `document.querySelector('#message-subject')?.textContent === 'Welcome to the shop'`)
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")
	if got, want := p.text(".message-view .sender"), "noreply@shop.example"; got != want {
		t.Errorf("sender shown = %q, want %q", got, want)
	}

	// HTML: the sandboxed frame shows the message, with its inline image.
	// Its links may open a new tab; its scripts may not run.
	p.waitFor("the preview frame", `document.querySelector('#preview-frame')`)
	if got := eval[string](p, "document.querySelector('#preview-frame').getAttribute('sandbox')"); got != "allow-popups allow-popups-to-escape-sandbox" {
		t.Errorf("preview sandbox = %q, want only popups (no allow-scripts, no allow-same-origin)", got)
	}
	// The frame loaded the message, its cid: image inline: the frame's own
	// requests carry no session cookie.
	base := uiBase(t, env, testenv.AcmeKey)
	traffic.waitForRequest(t, mark, base+"preview/"+id)
	preview := fetchWithCookie(t, p, base+"preview/"+id)
	if !strings.Contains(preview, `<h1 id="greeting">Hello Ada</h1>`) || !strings.Contains(preview, `src="data:image/png;base64,`+pixelPNG+`"`) {
		t.Errorf("preview HTML does not show the message with its cid: image inline:\n%s", preview)
	}
	seeInlineImage(t, env, id)

	p.click("#tab-source")
	p.waitFor("the HTML source, as text", `document.querySelector('#panel-source pre')?.textContent.includes('<h1 id="greeting">Hello Ada</h1>')`)
	p.click("#tab-text")
	p.waitFor("the text", `document.querySelector('#panel-text').innerText.includes('Hello Ada, confirm your account')`)
	p.click("#tab-headers")
	p.waitFor("the headers as sent", `[...document.querySelectorAll('#panel-headers th')].map(th => th.textContent).join() === 'From,To,Subject,Message-ID,MIME-Version,Content-Type'`)
	p.click("#tab-raw")
	p.waitFor("the raw source", `document.querySelector('#panel-raw pre').textContent.includes('Content-ID: <logo@shop>')`)
	if got := eval[string](p, "document.querySelector('#download-raw').getAttribute('href')"); got != base+"emails/"+id+"/raw" {
		t.Errorf("raw download link = %q", got)
	}
	p.click("#tab-attachments")
	p.waitFor("the attachments", `document.querySelector('#panel-attachments').innerText.includes('invoice.pdf')`)
	p.waitFor("the image thumbnail to load", `[...document.querySelectorAll('#panel-attachments img')].some(i => i.complete && i.naturalWidth === 1)`)
	if got := fetchWithCookie(t, p, base+"emails/"+id+"/attachments/1"); !strings.HasPrefix(got, "%PDF-1.4") {
		t.Errorf("attachment download = %q, want the PDF", got)
	}
	p.click("#tab-links")
	p.waitFor("the links", `[...document.querySelectorAll('#panel-links a')].some(a => a.href === 'https://shop.example/confirm?t=123')`)

	p.click("#copy-link")
	p.waitFor("the link", `document.querySelector('#view-notice').textContent.includes('/#/emails/`+id+`') || document.querySelector('#view-notice').textContent === 'Link copied.'`)

	// A URL per message: a new tab opened on it shows the same message.
	q := openTab(t, env)
	q.signIn(testenv.AcmeKey)
	q.visit("/#/emails/" + id)
	q.waitFor("the message from its URL", `document.querySelector('#message-subject')?.textContent === 'Welcome to the shop'`)
}

// seeInlineImage opens the email's preview in a tab of its own, sandboxed as
// in the frame, and waits until its cid: image (the 1x1 logo) has loaded.
func seeInlineImage(t *testing.T, env *testenv.Env, id string) {
	t.Helper()
	q := openTab(t, env)
	q.signIn(testenv.AcmeKey)
	q.visit(uiBase(t, env, testenv.AcmeKey) + "preview/" + id)
	q.waitFor("the inline image", `(i => i && i.complete && i.naturalWidth === 1)(document.querySelector('img[alt=logo]'))`)
}

// fetchWithCookie fetches a dashboard URL from the page, with its session
// cookie, and returns the body.
func fetchWithCookie(t *testing.T, p *page, path string) string {
	t.Helper()
	return eval[string](p, fmt.Sprintf(`fetch(%s).then(r => r.ok ? r.text() : 'status ' + r.status)`, js(path)))
}

// Edit labels, status and notes in the message view and see them through
// the API; delete the message; a message deleted elsewhere disappears.
func TestEditAndDeleteMessages(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Your order shipped"))
	sendMail(t, env, "noreply@shop.example", "bob@acme.test", welcomeMail("bob@acme.test", "Password reset"))
	p.waitFor("two messages", `document.querySelectorAll('#message-list .row').length === 2`)

	p.click(`#message-list .row:nth-child(2) .row-link`)
	p.waitFor("the message view", `document.querySelector('#message-subject')?.textContent === 'Your order shipped' && document.querySelector('#older-message').disabled`)
	p.click("#newer-message")
	p.waitFor("the newer message", `document.querySelector('#message-subject')?.textContent === 'Password reset' && document.querySelector('#newer-message').disabled`)
	p.click("#older-message")
	p.waitFor("the older one again", `document.querySelector('#message-subject')?.textContent === 'Your order shipped'`)
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")

	p.typeInto("#label-input", "checked"+kb.Enter)
	p.waitFor("the label", `[...document.querySelectorAll('.labels .badge')].some(b => b.textContent.startsWith('checked'))`)
	p.choose("#message-status", "processed")
	p.waitFor("saved", `document.querySelector('#view-notice').textContent === 'Saved.' && document.querySelector('#message-status').value === 'processed'`)
	p.click(".notes summary")
	p.typeInto("#message-notes", "looks right on mobile")
	p.click("#save-notes")
	testenv.WaitFor(t, 10*time.Second, "the notes through the API", func() bool {
		e := apiEmail(t, env, testenv.AcmeKey, id)
		return e["notes"] == "looks right on mobile"
	})
	e := apiEmail(t, env, testenv.AcmeKey, id)
	if e["status"] != "processed" || fmt.Sprint(e["labels"]) != "[checked]" {
		t.Errorf("through the API: status %v, labels %v; want processed, [checked]", e["status"], e["labels"])
	}
	p.waitFor("the list to show the label", `document.querySelector('#message-list .row[aria-current] .badges').textContent.includes('checked')`)

	p.click("#delete-message")
	p.waitFor("the message gone from the list", `document.querySelectorAll('#message-list .row').length === 1`)
	p.click("#undo-dismiss") // delete now, rather than in a few seconds
	p.waitFor("the undo bar gone", `document.querySelector('#undo-bar').hidden`)
	testenv.WaitFor(t, 10*time.Second, "the DELETE", func() bool {
		return env.Do(t, "GET", "/v1/emails/"+id, testenv.AcmeKey, nil).Status == http.StatusNotFound
	})
	if res := env.Do(t, "GET", "/v1/emails/"+id, testenv.AcmeKey, nil); res.Status != http.StatusNotFound {
		t.Errorf("deleted message: GET answers %d, want 404", res.Status)
	}

	// Deleted by a test suite through the API: it disappears at once.
	other := eval[string](p, `document.querySelector('#message-list .row').dataset.id`)
	if res := env.Do(t, "DELETE", "/v1/emails/"+other, testenv.AcmeKey, nil); res.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", res.Status)
	}
	p.waitFor("the list to empty", `document.querySelectorAll('#message-list .row').length === 0`)
	p.waitFor("the empty list's hint", `!document.querySelector('.message-list .empty').hidden`)
}

// The live list survives a dropped connection: the stream reconnects with
// Last-Event-ID and replays what happened meanwhile.
func TestLiveListCatchesUpAfterADrop(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Before the drop"))
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Deleted during the drop"))
	p.waitFor("two messages", `document.querySelectorAll('#message-list .row').length === 2`)
	gone := eval[string](p, `document.querySelector('#message-list .row').dataset.id`)

	traffic.dropStreams(true)
	t.Cleanup(traffic.allowStreams)
	p.waitFor("the drop to show", `document.querySelector('#live').dataset.live === 'false'`)
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Sent during the drop"))
	if res := env.Do(t, "DELETE", "/v1/emails/"+gone, testenv.AcmeKey, nil); res.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", res.Status)
	}
	traffic.allowStreams()
	p.waitUntilLive()
	if traffic.lastResume() == "" {
		t.Error("the stream reconnected without Last-Event-ID")
	}
	p.waitFor("the list to catch up", `[...document.querySelectorAll('#message-list .subject')].map(e => e.textContent).join() === 'Sent during the drop,Before the drop'`)
}
