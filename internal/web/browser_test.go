package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/smtp"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/web"
)

// The browser tests drive one shared headless Chromium. All its traffic
// goes through a recording proxy (loopback included), so a test can see
// every request the browser made, from every frame and process: the proxy
// forwards only to the mailsinks the tests started and refuses and records
// everything else.

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel context.CancelFunc
	browserErr    error
	traffic       = &proxy{allowed: map[string]bool{}, streams: map[*http.Request]context.CancelFunc{}}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if browserCancel != nil {
		browserCancel()
	}
	spamd.Stop()
	os.Exit(code)
}

// chromiumPath is the browser the tests drive: MAILSINK_CHROMIUM, else
// Debian's chromium.
func chromiumPath() string {
	if p := os.Getenv("MAILSINK_CHROMIUM"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// missing skips the test, or fails it under CI=true, where the browser
// tests must run.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI needs it: .ci/run installs it)", args...)
	}
	t.Skipf(format+"; skipping the browser test", args...)
}

// startBrowser starts the shared browser once.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		missing(t, "chromium is not installed")
	}
	browserOnce.Do(func() {
		addr, err := traffic.start()
		if err != nil {
			browserErr = err
			return
		}
		dir, err := os.MkdirTemp("", "mailsink-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path),
			chromedp.Flag("headless", true),
			chromedp.Flag("no-sandbox", true),
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("no-first-run", true),
			chromedp.Flag("no-default-browser-check", true),
			chromedp.Flag("hide-scrollbars", true),
			chromedp.Flag("proxy-server", "http://"+addr),
			// Without this Chromium sends loopback requests past the proxy.
			chromedp.Flag("proxy-bypass-list", "<-loopback>"),

			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 800),
		)
		ctx, cancelBrowser := chromedp.NewContext(allocCtx)
		if err := chromedp.Do(ctx); err != nil {
			browserErr = fmt.Errorf("start %s: %w", path, err)
		}
		browserCtx = ctx
		browserCancel = func() {
			cancelBrowser()
			cancelAlloc()
			os.RemoveAll(dir)
		}
	})
	if browserErr != nil {
		t.Fatalf("browser: %v", browserErr)
	}
	return browserCtx
}

// proxy is the browser's HTTP proxy: it forwards to allowed hosts and
// records every request.
type proxy struct {
	mu      sync.Mutex
	allowed map[string]bool
	seen    []string
	// streams cancels the event streams in flight; with holdStreams set,
	// new ones are refused with 503. resumedFrom records the Last-Event-ID
	// of each stream request.
	streams     map[*http.Request]context.CancelFunc
	holdStreams bool
	resumedFrom []string
}

func (p *proxy) start() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	forward := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = r.In.URL.Host
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1,
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.String()
		if r.Method == http.MethodConnect {
			target = "CONNECT " + r.Host
		}
		p.mu.Lock()
		p.seen = append(p.seen, target)
		ok := r.Method != http.MethodConnect && p.allowed[r.URL.Host]
		p.mu.Unlock()
		if !ok {
			http.Error(w, "refused by the test proxy", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/v1/events" {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			p.mu.Lock()
			hold := p.holdStreams
			if !hold {
				p.resumedFrom = append(p.resumedFrom, r.Header.Get("Last-Event-ID"))
				p.streams[r] = cancel
			}
			p.mu.Unlock()
			if hold {
				http.Error(w, "the test holds event streams", http.StatusServiceUnavailable)
				return
			}
			defer func() {
				p.mu.Lock()
				delete(p.streams, r)
				p.mu.Unlock()
			}()
			r = r.WithContext(ctx)
		}
		forward.ServeHTTP(w, r)
	}))
	return ln.Addr().String(), nil
}

func (p *proxy) allow(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed[host] = true
}

// dropStreams cuts the event streams in flight, as a network drop would,
// and refuses new ones while hold is true.
func (p *proxy) dropStreams(hold bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdStreams = hold
	for _, cancel := range p.streams {
		cancel()
	}
}

// allowStreams lets event streams through again.
func (p *proxy) allowStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdStreams = false
}

// lastResume returns the Last-Event-ID of the latest event stream request.
func (p *proxy) lastResume() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.resumedFrom) == 0 {
		return ""
	}
	return p.resumedFrom[len(p.resumedFrom)-1]
}

// mark returns a position in the record, for since.
func (p *proxy) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// since returns the URLs requested after mark.
func (p *proxy) since(mark int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen[mark:]...)
}

// waitForRequest waits until the browser has requested a URL containing
// part since mark.
func (p *proxy) waitForRequest(t *testing.T, mark int, part string) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, "a request for "+part, func() bool {
		for _, u := range p.since(mark) {
			if strings.Contains(u, part) {
				return true
			}
		}
		return false
	})
}

// page is one browser tab on a mailsink, with the steps a person takes.
type page struct {
	t   *testing.T
	ctx context.Context
	env *testenv.Env
}

// startMailsink starts a mailsink with the two test accounts (acme and
// globex) on the embedded store.
func startMailsink(t *testing.T) *testenv.Env {
	t.Helper()
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	traffic.allow(strings.TrimPrefix(env.BaseURL, "http://"))
	return env
}

// openTab opens a new browser tab (with its own cookies and storage) on
// env, not yet on any page.
func openTab(t *testing.T, env *testenv.Env) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(startBrowser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run opens the tab; it must not get a context with a
	// deadline, whose end would close the tab.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	p := &page{t: t, ctx: ctx, env: env}
	p.do(chromedp.EmulateViewport(1280, 800))
	return p
}

// do runs browser actions, failing the test on an error.
func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval runs a JavaScript expression in the page and returns its value.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls the JavaScript condition until it is true.
func (p *page) waitFor(what, cond string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !eval[bool](p, "!!("+cond+")") {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s (%s); the page says:\n%s", what, cond, eval[string](p, "document.body.innerText.slice(0, 2000)"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// visit opens path on the mailsink.
func (p *page) visit(path string) {
	p.t.Helper()
	p.do(chromedp.Navigate(p.env.BaseURL + path))
}

// signIn follows the sign-in link mailsink prints and waits until the
// dashboard is live.
func (p *page) signIn(key string) {
	p.t.Helper()
	p.do(chromedp.Navigate(web.SignInURL(p.env.BaseURL, key)))
	p.waitUntilLive()
}

func (p *page) waitUntilLive() {
	p.t.Helper()
	p.waitFor("the dashboard to be live", `document.querySelector('#live[data-live="true"]')`)
}

// click clicks the element with the mouse.
func (p *page) click(sel string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(sel)))
}

// typeInto types text into the field.
func (p *page) typeInto(sel, text string) {
	p.t.Helper()
	p.do(chromedp.SendKeys(chromedp.CSS(sel), text))
}

// press presses keys on whatever has the focus.
func (p *page) press(keys string) {
	p.t.Helper()
	p.do(chromedp.KeyEvent(keys))
}

// choose picks an option of a select, as a person would with the mouse.
func (p *page) choose(sel, value string) {
	p.t.Helper()
	p.do(chromedp.Focus(chromedp.CSS(sel)))
	eval[bool](p, fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, sel, value))
}

// shortcut presses one printable key the way a real keyboard does: the
// key-down event carries the text, so a page that handles the key (and
// cancels it) gets no character typed. chromedp's KeyEvent sends the
// character in a separate event that no handler can cancel.
func (p *page) shortcut(key string) {
	p.t.Helper()
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, k := range kb.Encode([]rune(key)[0]) {
			switch k.Type {
			case kb.KeyChar:
				continue
			case kb.KeyDown:
				k.Text, k.UnmodifiedText = key, key
			}
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, *k); err != nil {
				return err
			}
		}
		return nil
	}))
}

// text is the visible text of the first element matching sel ("" when none).
func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ''}).innerText`, sel))
}

// rows are the subjects in the message list, top first.
func (p *page) rows() []string {
	p.t.Helper()
	return eval[[]string](p, `[...document.querySelectorAll('#message-list .subject')].map(e => e.textContent)`)
}

// js quotes s as a JavaScript string.
func js(s string) string { return fmt.Sprintf("%q", s) }

// screenshot writes the viewport to $MAILSINK_SCREENSHOTS/name.png when
// that variable is set.
func (p *page) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv("MAILSINK_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// sendMail sends a raw message over SMTP.
func sendMail(t *testing.T, env *testenv.Env, from, to, raw string) {
	t.Helper()
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	if err := smtp.SendMail(env.SMTP, nil, from, []string{to}, []byte(raw)); err != nil {
		t.Fatalf("send mail over SMTP: %v", err)
	}
}

// apiEmail returns an email as the API shows it to key.
func apiEmail(t *testing.T, env *testenv.Env, key, id string) map[string]any {
	t.Helper()
	res := env.Do(t, "GET", "/v1/emails/"+url.PathEscape(id), key, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("GET /v1/emails/%s: %d %s", id, res.Status, res.Body)
	}
	return res.JSON(t)["item"].(map[string]any)
}

// clear empties a field and tells the page, as a person selecting its text
// and deleting it would.
func clear(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const f = document.querySelector(%q); f.value = ''; f.dispatchEvent(new Event('input', {bubbles: true})); })()`, sel))
}

// emulateColorScheme makes the page see prefers-color-scheme: scheme.
func emulateColorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// watchPreviewLoads counts, in window.frameLoads, the pages the preview
// frame loads: load events reach the dashboard's document even from a
// sandboxed frame whose content it cannot see.
func watchPreviewLoads(p *page) {
	p.t.Helper()
	eval[bool](p, `(window.frameLoads = 0, document.addEventListener('load', e => { if (e.target.id === 'preview-frame') window.frameLoads++ }, true), true)`)
}
