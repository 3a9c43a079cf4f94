package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// Choose the theme in the settings, whatever the system's; it is kept for
// the next visit.
func TestThemeSwitch(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.do(emulateColorScheme("light"))
	p.signIn(testenv.AcmeKey)
	const dark, light = `'rgb(22, 24, 29)'`, `'rgb(255, 255, 255)'`
	bg := `getComputedStyle(document.body).backgroundColor`
	p.waitFor("the system's light colours", bg+` === `+light)

	p.click("#settings-button")
	p.choose("#theme", "dark")
	p.waitFor("dark colours on a light system", bg+` === `+dark)
	p.visit("/")
	p.waitUntilLive()
	p.waitFor("dark colours after a reload", bg+` === `+dark)
	p.do(emulateColorScheme("dark"))
	p.click("#settings-button")
	p.choose("#theme", "light")
	p.waitFor("light colours on a dark system", bg+` === `+light)
	p.choose("#theme", "")
	p.waitFor("the system's dark colours", bg+` === `+dark)
}

// Ask for notifications in the settings: new mail that arrives while the
// tab is in the background shows one; a click on it opens the message.
func TestNotificationsOfNewMail(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	c := chromedp.FromContext(p.ctx)
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := cdp.Call(ctx, c.Browser, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: env.BaseURL, BrowserContextID: c.BrowserContextID,
	}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	// The page's notifications, as the person would see them.
	eval[bool](p, `(() => {
		const Real = window.Notification;
		window.shown = [];
		window.Notification = function (title, options) { const n = new Real(title, options); window.shown.push({title, body: options.body, n}); return n; };
		Object.defineProperty(window.Notification, 'permission', { get: () => Real.permission });
		window.Notification.requestPermission = () => Real.requestPermission();
		return true;
	})()`)

	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Before asking"))
	p.waitFor("the mail", `document.querySelectorAll('#message-list .row').length === 1`)
	p.click("#settings-button")
	p.click("#notify")
	p.waitFor("asked", `localStorage.getItem('mailsink.notify') === '1'`)

	// The person looks at another window. Headless Chromium keeps every
	// tab focused and visible, so the page is told so.
	eval[bool](p, `(document.hasFocus = () => false, true)`)
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "While away"))
	// The sender's name ("Shop") comes from the message's search digest,
	// made in the background after the 250: the event of the new mail
	// may be sent before it is made, or after.
	p.waitFor("a notification", `window.shown.length === 1 && ['New mail from Shop', 'New mail from noreply@shop.example'].includes(window.shown[0].title) && window.shown[0].body.startsWith('While away')`)
	eval[bool](p, `(window.shown[0].n.onclick(), true)`)
	p.waitFor("the message open", `document.querySelector('#message-subject')?.textContent === 'While away'`)
}
