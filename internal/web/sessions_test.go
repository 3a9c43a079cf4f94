package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// sameBrowser opens another tab next to p, sharing its cookies and
// storage, as a person's second tab does.
func (p *page) sameBrowser() *page {
	p.t.Helper()
	ctx, cancel := chromedp.NewContext(startBrowser(p.t), chromedp.WithExistingBrowserContext(chromedp.FromContext(p.ctx).BrowserContextID))
	p.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		p.t.Fatalf("open a tab: %v", err)
	}
	q := &page{t: p.t, ctx: ctx, env: p.env}
	q.do(chromedp.EmulateViewport(1280, 800))
	return q
}

// seeAttachmentThumbnail opens the first message's attachments and waits
// until its image (the 1x1 logo) shows: a request made with the session
// cookie.
func (p *page) seeAttachmentThumbnail(subject string) {
	p.t.Helper()
	p.click("#message-list .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent === `+js(subject))
	p.click("#tab-attachments")
	p.waitFor("the thumbnail", `[...document.querySelectorAll('#panel-attachments img')].some(i => i.complete && i.naturalWidth === 1)`)
}

// Two tabs of one browser, signed in to two accounts: each shows its own
// mail, previews and downloads, whichever signed in last, and signing out
// of one leaves the other working.
func TestTwoTabsOnTwoAccountsInOneBrowser(t *testing.T) {
	env := startMailsink(t)
	sendMail(t, env, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "For Acme"))
	sendMail(t, env, "noreply@shop.example", "eve@globex.test", welcomeMail("eve@globex.test", "For Globex"))
	acme := openTab(t, env)
	acme.signIn(testenv.AcmeKey)
	acme.waitFor("acme's mail", `document.querySelector('#message-list .subject')?.textContent === 'For Acme'`)
	globex := acme.sameBrowser()
	globex.signIn(testenv.GlobexKey)
	globex.waitFor("globex's mail", `document.querySelector('#message-list .subject')?.textContent === 'For Globex'`)

	// Acme's tab after globex signed in, then globex's.
	acme.seeAttachmentThumbnail("For Acme")
	globex.seeAttachmentThumbnail("For Globex")
	acmeID := eval[string](acme, "location.hash.slice('#/emails/'.length)")
	acmeRaw := uiBase(t, env, testenv.AcmeKey) + "emails/" + acmeID + "/raw"
	if got := fetchWithCookie(t, acme, acmeRaw); !strings.Contains(got, "Subject: For Acme") {
		t.Errorf("acme's download in acme's tab: %.100q", got)
	}
	// Globex's tab holds acme's cookie too (one browser), but a page of
	// globex's reads only globex's mail.
	if got := fetchWithCookie(t, globex, uiBase(t, env, testenv.GlobexKey)+"emails/"+acmeID+"/raw"); got != "status 404" {
		t.Errorf("acme's email under globex's path: %q, want status 404", got)
	}

	globex.click("#sign-out")
	globex.waitFor("the signed-out page", `document.querySelector('#signin-message')?.textContent === 'You are signed out.'`)
	if got := fetchWithCookie(t, acme, acmeRaw); !strings.Contains(got, "Subject: For Acme") {
		t.Errorf("acme's download after globex signed out: %.100q", got)
	}
	acme.click("#tab-html")
	acme.click("#load-remote") // loads the preview again
	acme.click("#tab-attachments")
	acme.waitFor("the thumbnail", `[...document.querySelectorAll('#panel-attachments img')].some(i => i.complete && i.naturalWidth === 1)`)
}

// front is a fixed address in front of a mailsink that can be replaced,
// as a restart on the same port looks to a browser. It records the
// status of each preview answer.
type front struct {
	mu       sync.Mutex
	target   *url.URL
	previews map[string]int // path -> status of the last answer
}

func (f *front) set(env *testenv.Env) {
	u, _ := url.Parse(env.BaseURL)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = u
}

func (f *front) preview(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.previews[path]
}

func (f *front) start(t *testing.T) string {
	f.previews = map[string]int{}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			f.mu.Lock()
			defer f.mu.Unlock()
			r.SetURL(f.target)
			r.Out.Host = r.In.Host
		},
		ModifyResponse: func(res *http.Response) error {
			if strings.Contains(res.Request.URL.Path, "/preview/") {
				f.mu.Lock()
				f.previews[res.Request.URL.Path] = res.StatusCode
				f.mu.Unlock()
			}
			return nil
		},
		FlushInterval: -1,
	})
	t.Cleanup(srv.Close)
	return srv.URL
}

// Restart mailsink while a tab is open: the page reconnects by itself,
// keeps the mail that was stored, shows new mail live, and its preview
// works. When the session is lost (here another tab of the account signs
// out), the page mints a new one by itself.
func TestRestartWhileATabIsOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	backend := testenv.Backend{Name: "embedded", Open: func(t *testing.T) store.Store {
		st, err := pebblestore.Open(dir)
		if err != nil {
			t.Fatalf("open the embedded store: %v", err)
		}
		return st
	}}
	first := testenv.Start(t, backend, nil)
	var fr front
	fr.set(first)
	addr := fr.start(t)
	traffic.allow(strings.TrimPrefix(addr, "http://"))
	env := &testenv.Env{App: first.App, BaseURL: addr, SMTP: first.SMTP}

	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	sendMail(t, first, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Before the restart"))
	p.seeAttachmentThumbnail("Before the restart")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.App.Shutdown(ctx); err != nil {
		t.Fatalf("stop mailsink: %v", err)
	}
	p.waitFor("the page to see mailsink gone", `document.querySelector('#live').dataset.live === 'false'`)
	second := testenv.Start(t, backend, nil)
	fr.set(second)
	p.waitUntilLive()

	sendMail(t, second, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "After the restart"))
	p.waitFor("the new mail, live", `[...document.querySelectorAll('#message-list .subject')].map(e => e.textContent).join() === 'After the restart,Before the restart'`)
	p.click("#message-list .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent === 'After the restart'`)
	p.click("#tab-html")
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")
	path := uiBase(t, second, testenv.AcmeKey) + "preview/" + id
	testenv.WaitFor(t, 20*time.Second, "the preview's answer", func() bool { return fr.preview(path) != 0 })
	if got := fr.preview(path); got != http.StatusOK {
		t.Errorf("the preview after the restart answered %d, want 200", got)
	}
	p.click("#tab-attachments")
	p.waitFor("the thumbnail", `[...document.querySelectorAll('#panel-attachments img')].some(i => i.complete && i.naturalWidth === 1)`)

	other := p.sameBrowser()
	other.signIn(testenv.AcmeKey)
	other.click("#sign-out")
	other.waitFor("the signed-out page", `document.querySelector('#signin-message')?.textContent === 'You are signed out.'`)
	p.click("#message-list .row:nth-child(2) .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent === 'Before the restart'`)
	p.click("#tab-html")
	before := strings.Replace(path, id, eval[string](p, "location.hash.slice('#/emails/'.length)"), 1)
	testenv.WaitFor(t, 20*time.Second, "the preview's answer", func() bool { return fr.preview(before) != 0 })
	if got := fr.preview(before); got != http.StatusOK {
		t.Errorf("the preview after the session was lost answered %d, want 200", got)
	}
}
