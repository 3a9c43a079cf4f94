package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// signupMail is the kind of message the screenshots show.
const signupMail = `From: Acme Shop <hello@shop.example>
To: ada@acme.test
Subject: Confirm your account
Message-ID: <signup-42@shop.example>
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

Hi Ada, confirm your account: https://shop.example/confirm?token=8f2c

--alt
Content-Type: text/html; charset=utf-8

<html><body style="margin:0;background:#f3f4f6;font-family:Helvetica,Arial,sans-serif">
<table width="100%" cellpadding="0" cellspacing="0"><tr><td align="center" style="padding:32px 12px">
<table width="100%" style="max-width:520px;background:#ffffff;border-radius:8px" cellpadding="0" cellspacing="0">
<tr><td style="background:#111827;color:#ffffff;padding:20px 28px;font-size:20px;font-weight:bold;border-radius:8px 8px 0 0">Acme Shop</td></tr>
<tr><td style="padding:28px;color:#111827;font-size:16px;line-height:1.5">
<h1 style="font-size:22px;margin:0 0 12px">Welcome, Ada!</h1>
<p>Thanks for signing up. Please confirm your email address to finish creating your account.</p>
<p style="text-align:center;margin:28px 0"><a href="https://shop.example/confirm?token=8f2c" style="background:#2563eb;color:#ffffff;padding:12px 24px;border-radius:6px;text-decoration:none;font-weight:bold">Confirm my account</a></p>
<p style="color:#6b7280;font-size:13px">If you did not sign up, you can ignore this email.</p>
</td></tr></table></td></tr></table>
</body></html>
--alt--
`

// screenshotMails fills acme's mailbox with the mail the screenshots show:
// names, labels, statuses, an attachment, some of it read.
func screenshotMails(t *testing.T, env *testenv.Env) {
	t.Helper()
	mails := []struct {
		from, to, subject, status, text string
		labels                          []string
		read, attachment                bool
	}{
		{"Shop Billing <billing@shop.example>", "ada@acme.test", "Your invoice for November", "processed", "Your invoice INV-2041 for 42.00 EUR is attached. Thank you for your order.", []string{"billing"}, true, true},
		{"Weekly Digest <digest@news.example>", "bob@acme.test", "Your weekly digest: 5 new posts", "archived", "This week: release notes, a deep dive into queues, and three tips for faster tests.", nil, true, false},
		{"Security Team <security@shop.example>", "ada@acme.test", "Password reset requested", "received", "Someone asked to reset the password of your account. If it was you, use the link below within an hour.", []string{"security"}, false, false},
		{"Acme Orders <orders@shop.example>", "carol@acme.test", "Your order #1042 has shipped", "received", "Good news: your order is on its way. Track the parcel with the number below.", []string{"orders", "checked"}, false, false},
	}
	for _, m := range mails {
		body := "MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n" + m.text + "\n"
		if m.attachment {
			body = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain; charset=utf-8\n\n" + m.text +
				"\n--b\nContent-Type: application/pdf; name=invoice.pdf\nContent-Disposition: attachment; filename=invoice.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0xLjQKJcfsj6IK\n--b--\n"
		}
		addr := m.from[strings.Index(m.from, "<")+1 : len(m.from)-1]
		sendMail(t, env, addr, m.to, "From: "+m.from+"\nTo: "+m.to+"\nSubject: "+m.subject+"\n"+body)
	}
	sendMail(t, env, "hello@shop.example", "ada@acme.test", signupMail)
	search := hasSearch(t, env)
	res := env.Do(t, "GET", "/v1/emails", testenv.AcmeKey, nil)
	for _, it := range res.JSON(t)["items"].([]any) {
		e := it.(map[string]any)
		for _, m := range mails {
			if e["subject"] != m.subject {
				continue
			}
			patch := map[string]any{"status": m.status}
			if m.labels != nil {
				patch["labels"] = m.labels
			}
			if search {
				patch["read"] = m.read
			}
			if r := env.Do(t, "PATCH", "/v1/emails/"+e["id"].(string), testenv.AcmeKey, patch); r.Status != http.StatusOK {
				t.Fatalf("PATCH: %d %s", r.Status, r.Body)
			}
		}
	}
}

// noSideScroll fails the test when the page is wider than the viewport.
func (p *page) noSideScroll(where string, width int64) {
	p.t.Helper()
	if w := eval[int](p, "document.documentElement.scrollWidth"); w > int(width) {
		p.t.Errorf("%s at %d px: the page is %d px wide, it scrolls sideways", where, width, w)
	}
}

// The dashboard reads well at desktop, tablet and phone widths, light and
// dark: mailboxes, list and message side by side; then the mailboxes in a
// drawer; then the list and the message in turn, with a way back. Rows
// take two lines at most. With MAILSINK_SCREENSHOTS set it writes the
// screenshots of docs/dashboard.md.
func TestLayoutAndScreenshots(t *testing.T) {
	env := startMailsink(t)
	screenshotMails(t, env)

	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("the list", `document.querySelectorAll('#message-list .row').length === 5`)
	p.waitFor("the labels", `document.querySelectorAll('#message-list .badge').length === 6`)
	if hasSearch(t, env) {
		p.waitFor("names, snippets and counts", `document.querySelectorAll('#message-list .snippet').length === 5 && document.querySelector('#folder-unread .folder-count')`)
	}
	visible := func(sel string) bool {
		return eval[bool](p, `(e => !!e && getComputedStyle(e).display !== 'none' && getComputedStyle(e).visibility !== 'hidden' && e.getBoundingClientRect().width > 0)(document.querySelector(`+js(sel)+`))`)
	}
	if h := eval[int](p, `Math.ceil(Math.max(...[...document.querySelectorAll('#message-list .row')].map(r => r.getBoundingClientRect().height)))`); h > 56 {
		t.Errorf("the tallest row is %d px, want two lines (at most 56 px)", h)
	}
	p.screenshot("desktop-list")
	watchPreviewLoads(p)
	p.click("#message-list .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent === 'Confirm your account'`)
	p.waitFor("the preview", "window.frameLoads === 1")
	if !visible("#sidebar") || !visible(".list-pane") || !visible("#message-view") {
		t.Error("at 1280 px the mailboxes, the list and the message are not side by side")
	}
	p.screenshot("desktop-message")
	p.do(emulateColorScheme("dark"))
	p.waitFor("dark colours", `getComputedStyle(document.body).backgroundColor === 'rgb(22, 24, 29)'`)
	p.screenshot("desktop-message-dark")
	p.do(emulateColorScheme("light"))

	// Tablet: the mailboxes are a drawer behind a button.
	p.do(chromedp.EmulateViewport(1024, 768))
	p.waitFor("the drawer closed", `getComputedStyle(document.querySelector('#sidebar')).visibility === 'hidden'`)
	if !visible(".list-pane") || !visible("#message-view") {
		t.Error("at 1024 px the list and the message are not side by side")
	}
	p.noSideScroll("the message", 1024)
	p.screenshot("tablet-message")
	p.click("#sidebar-toggle")
	p.waitFor("the drawer open", `getComputedStyle(document.querySelector('#sidebar')).visibility === 'visible' && document.activeElement.closest('#sidebar')`)
	p.screenshot("tablet-mailboxes")
	p.click("#folder-archived")
	p.waitFor("the drawer closed after a choice", `getComputedStyle(document.querySelector('#sidebar')).visibility === 'hidden' && document.querySelector('#search').value === 'status:archived'`)
	if eval[bool](p, `!!document.activeElement.closest('#sidebar')`) {
		t.Error("the focus stayed in the closed drawer")
	}
	eval[bool](p, `(document.querySelector('#search').focus(), true)`) // by script: the box may be drawn again meanwhile
	p.do(clear("#search"))
	p.press("\r")
	p.waitFor("every message again", `document.querySelectorAll('#message-list .row').length === 5`)

	for _, width := range []int64{375, 360} {
		p.do(chromedp.EmulateViewport(width, 812))
		p.click("#message-view .back")
		p.waitFor("the list alone", `getComputedStyle(document.querySelector('#message-view')).display === 'none' && location.hash === '#/'`)
		p.waitFor("every row", `document.querySelectorAll('#message-list .row').length === 5`)
		p.noSideScroll("the list", width)
		if width == 375 {
			p.screenshot("phone-list")
		}
		p.click("#message-list .row-link")
		p.waitFor("the message alone", `getComputedStyle(document.querySelector('.list-pane')).display === 'none' && document.querySelector('#message-subject')`)
		p.click("#tab-html")
		p.noSideScroll("the message", width)
		if width == 375 {
			p.waitFor("the preview", "window.frameLoads >= 2")
			p.screenshot("phone-message")
			p.do(emulateColorScheme("dark"))
			p.click("#message-view .back")
			p.waitFor("the list alone", `location.hash === '#/' && getComputedStyle(document.body).backgroundColor === 'rgb(22, 24, 29)'`)
			p.screenshot("phone-list-dark")
			p.do(emulateColorScheme("light"))
			p.click("#message-list .row-link")
			p.waitFor("the message alone", `document.querySelector('#message-subject')`)
		}
	}

	// A long subject takes two lines, and the preview stays in view; the
	// whole subject is a click away.
	long := strings.TrimSpace(strings.Repeat("Your account statement for the period ending in November is ready to download ", 6))
	sendMail(t, env, "statements@bank.example", "ada@acme.test", "Subject: "+long+"\n\nHello.\n")
	p.click("#message-view .back")
	p.waitFor("the long subject", `document.querySelector('#message-list .subject')?.textContent === `+js(long))
	p.click("#message-list .row-link")
	p.waitFor("the subject clamped, the button to show it", `document.querySelector('#message-subject')?.textContent === `+js(long)+` && !document.querySelector('#expand-subject').hidden`)
	lines := `(h => Math.round(h.getBoundingClientRect().height / parseFloat(getComputedStyle(h).lineHeight)))(document.querySelector('#message-subject'))`
	if n := eval[int](p, lines); n != 2 {
		t.Errorf("the long subject takes %d lines at 360 px, want 2", n)
	}
	if top := eval[float64](p, `document.querySelector('#panel-html').getBoundingClientRect().top`); top > 500 {
		t.Errorf("the preview starts %.0f px down at 360x812, want it in view", top)
	}
	p.click("#expand-subject")
	if n := eval[int](p, lines); n < 5 {
		t.Errorf("the whole subject takes %d lines, want it all", n)
	}
}
