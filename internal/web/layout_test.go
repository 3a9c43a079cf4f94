package web_test

import (
	"net/http"
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

// The dashboard reads well at phone width: the list, then the message in
// its place with a way back; at desktop width side by side. With
// MAILSINK_SCREENSHOTS set it writes the screenshots of docs/dashboard.md.
func TestLayoutAndScreenshots(t *testing.T) {
	env := startMailsink(t)
	mails := []struct {
		from, to, subject, status string
		labels                    []string
	}{
		{"billing@shop.example", "ada@acme.test", "Your invoice for November", "processed", []string{"billing"}},
		{"digest@news.example", "bob@acme.test", "Your weekly digest: 5 new posts", "archived", nil},
		{"security@shop.example", "ada@acme.test", "Password reset requested", "received", []string{"security"}},
		{"orders@shop.example", "carol@acme.test", "Your order #1042 has shipped", "received", []string{"orders", "checked"}},
	}
	for _, m := range mails {
		sendMail(t, env, m.from, m.to, "From: "+m.from+"\nTo: "+m.to+"\nSubject: "+m.subject+"\n\nHello from mailsink's screenshots.\n")
	}
	sendMail(t, env, "hello@shop.example", "ada@acme.test", signupMail)
	res := env.Do(t, "GET", "/v1/emails", testenv.AcmeKey, nil)
	for _, it := range res.JSON(t)["items"].([]any) {
		e := it.(map[string]any)
		for _, m := range mails {
			if e["subject"] == m.subject {
				patch := map[string]any{"status": m.status}
				if m.labels != nil {
					patch["labels"] = m.labels
				}
				if r := env.Do(t, "PATCH", "/v1/emails/"+e["id"].(string), testenv.AcmeKey, patch); r.Status != http.StatusOK {
					t.Fatalf("PATCH: %d %s", r.Status, r.Body)
				}
			}
		}
	}

	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("the list", `document.querySelectorAll('#message-list .row').length === 5`)
	p.waitFor("the labels", `document.querySelectorAll('#message-list .badge').length === 6`)
	p.screenshot("desktop-list")
	watchPreviewLoads(p)
	p.click("#message-list .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent === 'Confirm your account'`)
	p.waitFor("the preview", "window.frameLoads === 1")
	p.waitFor("side by side", `getComputedStyle(document.querySelector('.list-pane')).display !== 'none' && getComputedStyle(document.querySelector('#message-view')).display !== 'none'`)
	p.screenshot("desktop-message")

	for _, width := range []int64{375, 360} {
		p.do(chromedp.EmulateViewport(width, 812))
		p.click("#message-view .back")
		p.waitFor("the list alone", `getComputedStyle(document.querySelector('#message-view')).display === 'none' && location.hash === '#/'`)
		if w := eval[int](p, "document.documentElement.scrollWidth"); w > int(width) {
			t.Errorf("at %d px the list is %d px wide: it scrolls sideways", width, w)
		}
		if width == 375 {
			p.screenshot("phone-list")
		}
		p.click("#message-list .row-link")
		p.waitFor("the message alone", `getComputedStyle(document.querySelector('.list-pane')).display === 'none' && document.querySelector('#message-subject')`)
		p.click("#tab-html")
		if w := eval[int](p, "document.documentElement.scrollWidth"); w > int(width) {
			t.Errorf("at %d px the message is %d px wide: it scrolls sideways", width, w)
		}
		if width == 375 {
			p.click(`.widths [data-width="phone"]`)
			p.waitFor("the preview", "window.frameLoads >= 2")
			p.screenshot("phone-message")
		}
	}
}
