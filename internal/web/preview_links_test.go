package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// linksMail has four links, each a 60 px band at the top of its HTML: a
// web page, a mail address, a link whose text shows another host than it
// leads to, and a script.
const linksMail = `From: Shop <news@shop.example>
To: ada@acme.test
Subject: Four links
MIME-Version: 1.0
Content-Type: text/html; charset=utf-8

<html><body style="margin:0;font:16px sans-serif">
<a href="http://links.example/welcome" style="display:block;height:60px">The welcome page</a>
<a href="mailto:support@shop.example?subject=Help" style="display:block;height:60px">Write to support</a>
<a href="http://evil.example/login" style="display:block;height:60px">https://bank.example/login</a>
<a href="javascript:top.document.title='pwned'" style="display:block;height:60px">Run me</a>
</body></html>
`

// tabs returns the pages open in the tab's browser context, by id.
func (p *page) tabs() map[target.ID]string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	infos, err := chromedp.Targets(ctx)
	if err != nil {
		p.t.Fatal(err)
	}
	own := chromedp.FromContext(p.ctx).BrowserContextID
	out := map[target.ID]string{}
	for _, i := range infos {
		if i.Type == "page" && i.BrowserContextID == own {
			out[i.TargetID] = i.URL
		}
	}
	return out
}

// newTab waits for a tab that was not in before, with a URL that has
// prefix, and returns it.
func (p *page) newTab(before map[target.ID]string, prefix string) *page {
	p.t.Helper()
	var id target.ID
	testenv.WaitFor(p.t, 20*time.Second, "a new tab on "+prefix, func() bool {
		for tid, u := range p.tabs() {
			if _, old := before[tid]; !old && strings.HasPrefix(u, prefix) {
				id = tid
				return true
			}
		}
		return false
	})
	ctx, cancel := chromedp.NewContext(p.ctx, chromedp.WithTargetID(id))
	p.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		p.t.Fatalf("attach to the new tab: %v", err)
	}
	return &page{t: p.t, ctx: ctx, env: p.env}
}

// Click the links of a message's preview: a web link opens in a new tab;
// a mail link, and a link whose text shows another address, open
// mailsink's page that says where they lead; a script link does nothing.
// The preview itself never navigates.
func TestOpenALinkFromThePreview(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	title := eval[string](p, "document.title")
	sendMail(t, env, "news@shop.example", "ada@acme.test", linksMail)
	p.waitFor("the mail", `document.querySelector('#message-list .row-link')`)
	watchPreviewLoads(p)
	p.click("#message-list .row-link")
	p.waitFor("the preview", `window.frameLoads === 1`)

	before := p.tabs()
	p.clickInPreview(30, 30)
	p.newTab(before, "http://links.example/welcome")

	before = p.tabs()
	p.clickInPreview(30, 90)
	mail := p.newTab(before, env.BaseURL+"/ui/away?")
	mail.waitFor("the page that asks", `document.querySelector('#away-open')`)
	if got := mail.text("#away-target"); got != "support@shop.example" {
		t.Errorf("the mail link's page names %q, want support@shop.example", got)
	}
	if got := eval[string](mail, `document.querySelector('#away-open').getAttribute('href')`); got != "mailto:support@shop.example?subject=Help" {
		t.Errorf("the mail link's page offers %q", got)
	}

	before = p.tabs()
	p.clickInPreview(30, 150)
	fake := p.newTab(before, env.BaseURL+"/ui/away?")
	fake.waitFor("the page that asks", `document.querySelector('#away-open')`)
	if got := fake.text("#away-target"); got != "http://evil.example/login" {
		t.Errorf("the disguised link's page says it leads to %q", got)
	}
	if got := fake.text("#away-text"); !strings.Contains(got, "https://bank.example/login") || !strings.Contains(got, "another address") {
		t.Errorf("the disguised link's page says %q, want that its text shows another address", got)
	}
	fake.checkAccessibility(axeSource(t), "the page that asks before a link opens")

	// The script link: nothing opens, nothing runs. A web link clicked
	// after it opens, so the browser has handled the first click.
	before = p.tabs()
	p.clickInPreview(30, 210)
	p.clickInPreview(30, 30)
	p.newTab(before, "http://links.example/welcome")
	if n := len(p.tabs()) - len(before); n != 1 {
		t.Errorf("%d tabs opened after the script link and the web link, want 1", n)
	}
	if got := eval[string](p, "document.title"); got != title {
		t.Errorf("the page title changed to %q: a script ran", got)
	}
	if n := eval[int](p, "window.frameLoads"); n != 1 {
		t.Errorf("the preview frame loaded %d pages, want 1 (it navigated)", n)
	}
	// Back on the list, the keys are the page's.
	p.mouseOver("#message-list")
	p.waitFor("the keyboard back on the page", `document.activeElement.id !== 'preview-frame'`)
	p.shortcut("j")
	p.waitFor("the cursor on the message", `document.activeElement.closest('.row')?.querySelector('.subject').textContent === 'Four links'`)
}
