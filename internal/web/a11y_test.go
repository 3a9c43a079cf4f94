package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv"
)

// axeSource is axe-core's axe.min.js: MAILSINK_AXE_JS, else where .ci/run
// installs it.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MAILSINK_AXE_JS")
	if path == "" {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, ".cache", "mailsink-axe", "node_modules", "axe-core", "axe.min.js")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		missing(t, "axe-core is not installed at %s (npm install --prefix ~/.cache/mailsink-axe axe-core@4)", path)
	}
	return string(src)
}

// violation is one axe-core finding.
type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkAccessibility runs axe-core on the page as it is now and fails on
// serious and critical violations.
func (p *page) checkAccessibility(axe, where string) {
	p.t.Helper()
	// DevTools evaluation is not bound by the page's CSP, so axe needs no
	// script-src exception.
	if !eval[bool](p, "typeof axe !== 'undefined'") {
		eval[bool](p, axe+"\n;true")
	}
	found := eval[[]violation](p, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({
		id: v.id, impact: v.impact || '', help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ')) })))`)
	for _, v := range found {
		msg := fmt.Sprintf("%s: axe %s (%s): %s at %s", where, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, ", "))
		if v.Impact == "serious" || v.Impact == "critical" {
			p.t.Error(msg)
		} else {
			p.t.Log(msg)
		}
	}
}

// axe-core finds no serious or critical violation on the sign-in page, the
// list with a message open on each tab, the help and the confirmation, in
// light and dark colours.
func TestAccessibility(t *testing.T) {
	axe := axeSource(t)
	env := startMailsink(t)
	for _, scheme := range []string{"light", "dark"} {
		t.Run(scheme, func(t *testing.T) {
			p := openTab(t, env)
			p.do(emulateColorScheme(scheme))
			p.visit("/#key=wrong")
			p.waitFor("the refusal", `document.querySelector('#signin-message')?.textContent`)
			p.checkAccessibility(axe, "sign-in page with an error")

			p.signIn(testenv.AcmeKey)
			sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Welcome to the shop "+scheme))
			p.waitFor("the mail", `document.querySelectorAll('#message-list .row').length > 0`)
			p.click("#message-list .row input")
			p.click("#message-list .row-link")
			p.waitFor("the message", `document.querySelector('#message-subject')`)
			p.checkAccessibility(axe, "list and message, HTML tab")
			for _, tab := range []string{"text", "headers", "raw", "attachments", "links", "check-html", "check-spam", "check-links"} {
				p.click("#tab-" + tab)
				p.waitFor(tab, `!document.querySelector('#panel-`+tab+`').hidden && !/Loading|Running/.test(document.querySelector('#panel-`+tab+`').innerText)`)
				p.checkAccessibility(axe, tab+" tab")
			}
			p.shortcut("?")
			p.waitFor("the help", `document.querySelector('#help').open`)
			p.checkAccessibility(axe, "help")
		})
	}
}
