package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv"
)

// hostileMail attacks the viewer every way it can. Whatever would run a
// script asks for a URL containing "pwned"; whatever loads a remote image
// asks evil.example for a path starting "remote-" (allowed only after
// "Load remote images"); every other remote load asks for "pwned-...".
const hostileMail = `From: "Mallory \xff\xfe" <mallory@evil.example>
To: ada@acme.test
Subject: <img src=x onerror="top.document.title='pwned'"> \xff\xfe\xc3 invalid
X-Broken: \xc3\x28 \xa0\xa1 \xf0\x28\x8c\xbc
Message-ID: <hostile@evil.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b1"

--b1
Content-Type: multipart/alternative; boundary="b2"

--b2
Content-Type: text/plain; charset=utf-8

<script>top.document.title='pwned'</script> plain text javascript:alert(1)

--b2
Content-Type: text/html; charset=utf-8

<!doctype html><html><head>
<meta http-equiv="refresh" content="0;url=http://evil.example/pwned-refresh">
<base href="http://evil.example/">
<link rel="stylesheet" href="http://evil.example/pwned-link.css">
<link rel="prefetch" href="http://evil.example/pwned-prefetch">
<style>@import url("http://evil.example/pwned-import.css"); body { background: url("http://evil.example/remote-bg.png"); }
@font-face { font-family: x; src: url("http://evil.example/pwned-font.woff"); } h1 { font-family: x; }</style>
<script>top.document.title='pwned'; new Image().src='/ui/pwned-script';</script>
</head><body>
<h1>Hostile</h1>
<img src="x" onerror="top.document.title='pwned'; new Image().src='/ui/pwned-onerror'">
<img src="http://evil.example/remote-pixel.gif" alt="pixel">
<img src="cid:pic@hostile" alt="inline">
<a href="javascript:top.document.title='pwned'">click me</a>
<a href="data:text/html,<script>alert(1)</script>">data link</a>
<iframe src="http://evil.example/pwned-frame"></iframe>
<iframe srcdoc="<script>new Image().src='/ui/pwned-srcdoc'</script>"></iframe>
<object data="http://evil.example/pwned-object"></object>
<embed src="http://evil.example/pwned-embed">
<form action="http://evil.example/pwned-form" method="post"><input name="q" autofocus onfocus="new Image().src='/ui/pwned-onfocus'"><button>Send</button></form>
<svg><script>new Image().src='/ui/pwned-svg'</script><image href="http://evil.example/remote-svgimage.png"/></svg>
<div style="background-image:url(http://evil.example/remote-div.png)">styled</div>
<img src="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' onload='new Image().src=%22/ui/pwned-datasvg%22'/%3E" alt="data svg">
</body></html>

--b2--

--b1
Content-Type: image/png
Content-ID: <pic@hostile>
Content-Transfer-Encoding: base64

` + pixelPNG + `
--b1
Content-Type: image/svg+xml; name="chart.svg"
Content-Disposition: attachment; filename="chart.svg"

<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="new Image().src='/ui/pwned-svgonload'"><script>new Image().src='/ui/pwned-svgattachment'</script><rect width="10" height="10"/></svg>
--b1--
`

// chromiumServices are hosts Chromium itself calls (updates, time, sign-in)
// whatever page it shows; they are not requests of the dashboard.
var chromiumServices = []string{".google.com", ".googleapis.com", ".gvt1.com"}

// outsideRequests are the requests among urls that left the mailsink at
// origin, leaving out Chromium's own services.
func outsideRequests(urls []string, origin string) []string {
	var out []string
	for _, u := range urls {
		host := strings.TrimPrefix(u, "CONNECT ")
		if pu, err := url.Parse(u); err == nil && pu.Host != "" {
			host = pu.Host
		}
		if "http://"+host == origin {
			continue
		}
		name, _, _ := strings.Cut(host, ":")
		own := false
		for _, s := range chromiumServices {
			own = own || strings.HasSuffix(name, s)
		}
		if !own {
			out = append(out, u)
		}
	}
	return out
}

// A message built to attack the viewer runs no script, and the browser
// requests nothing outside the mailsink until the person allows remote
// images for that message; then only images.
func TestHostileMessageRunsNoScriptAndLeaksNothing(t *testing.T) {
	env := startMailsink(t)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	title := eval[string](p, "document.title")
	watchPreviewLoads(p)
	mark := traffic.mark()

	sendMail(t, env, "mallory@evil.example", "ada@acme.test", hostileMail)
	p.waitFor("the hostile mail", `document.querySelectorAll('#message-list .row').length === 1`)
	if n := eval[int](p, `document.querySelectorAll('#message-list img, #message-list script').length`); n != 0 {
		t.Errorf("the list row holds %d elements from the subject; it must be text", n)
	}
	p.click("#message-list .row-link")
	p.waitFor("the message", `document.querySelector('#message-subject')?.textContent.startsWith('<img src=x onerror=')`)
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")
	base := uiBase(t, env, testenv.AcmeKey)
	traffic.waitForRequest(t, mark, base+"preview/"+id)
	p.waitFor("the preview loaded", `window.frameLoads >= 1`)
	preview := fetchWithCookie(t, p, base+"preview/"+id)
	for _, bad := range []string{` href="javascript`, ` href="data:`} {
		if strings.Contains(preview, bad) {
			t.Errorf("the preview keeps a link %s...:\n%s", bad, preview)
		}
	}

	p.click("#tab-text")
	p.waitFor("the text, as text", `document.querySelector('#panel-text pre').textContent.includes("<script>top.document.title='pwned'</script>")`)
	p.click("#tab-headers")
	p.waitFor("the broken header", `[...document.querySelectorAll('#panel-headers th')].some(th => th.textContent === 'X-Broken')`)
	p.click("#tab-raw")
	p.waitFor("the raw source", `document.querySelector('#panel-raw pre').textContent.includes('onerror=')`)
	p.click("#tab-attachments")
	p.waitFor("the thumbnails", `[...document.querySelectorAll('#panel-attachments img')].length === 2 && [...document.querySelectorAll('#panel-attachments img')].every(i => i.complete)`)
	p.click("#tab-links")
	p.waitFor("the links", `!document.querySelector('#panel-links').innerText.includes('Loading')`)
	if n := eval[int](p, `document.querySelectorAll('#panel-links a[href^="javascript"], #panel-links a[href^="data"]').length`); n != 0 {
		t.Errorf("%d javascript: or data: links are clickable in the links tab", n)
	}
	p.click("#tab-html")

	// Everything has loaded (the preview, its inline image, the
	// thumbnails); no script ran, nothing left, the frame never navigated.
	check := func(when string, remoteAllowed bool) {
		t.Helper()
		if got := eval[string](p, "document.title"); got != title {
			t.Errorf("%s: the page title changed to %q: a script ran", when, got)
		}
		if n := eval[int](p, "window.frameLoads"); n != 1 {
			t.Errorf("%s: the preview frame loaded %d pages, want 1 (it navigated)", when, n)
		}
		for _, u := range traffic.since(mark) {
			if strings.Contains(u, "pwned") {
				t.Errorf("%s: the browser requested %s", when, u)
			}
		}
		for _, u := range outsideRequests(traffic.since(mark), env.BaseURL) {
			if !remoteAllowed || !strings.HasPrefix(u, "http://evil.example/remote-") {
				t.Errorf("%s: the browser requested %s, outside the mailsink", when, u)
			}
		}
	}
	check("before remote images", false)

	// The person allows remote images for this message: images load, and
	// still nothing else.
	p.click("#load-remote")
	traffic.waitForRequest(t, mark, "http://evil.example/remote-pixel.gif")
	traffic.waitForRequest(t, mark, "http://evil.example/remote-div.png")
	p.waitFor("the preview reloaded", `window.frameLoads === 2`)
	eval[bool](p, "(window.frameLoads = 1, true)")
	check("with remote images", true)
}
