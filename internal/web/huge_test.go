package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// inbound stores a raw message for acme through POST /v1/inbound.
func inbound(t *testing.T, env *testenv.Env, raw string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/v1/inbound", strings.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+testenv.AcmeKey)
	req.Header.Set("Content-Type", "message/rfc822")
	if res := env.Send(t, req); res.Status != http.StatusCreated {
		t.Fatalf("inbound: %d %s", res.Status, res.Body)
	}
}

// A 10 MB HTML message and a 5,000-part MIME tree open, and every tab
// works.
func TestHugeMessagesDegradeGracefully(t *testing.T) {
	env := startMailsink(t)
	var html strings.Builder
	html.WriteString("From: big@shop.example\r\nTo: ada@acme.test\r\nSubject: Ten megabytes\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<h1>Big</h1>")
	for html.Len() < 10<<20 {
		html.WriteString("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\r\n")
	}
	start := time.Now()
	inbound(t, env, html.String())
	t.Logf("stored 10 MB in %s", time.Since(start))
	start = time.Now()
	var parts strings.Builder
	parts.WriteString("From: parts@shop.example\r\nTo: ada@acme.test\r\nSubject: Five thousand parts\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n")
	for i := range 5000 {
		fmt.Fprintf(&parts, "--b\r\nContent-Type: image/png\r\nContent-Disposition: attachment; filename=p%d.png\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n", i, pixelPNG)
	}
	parts.WriteString("--b--\r\n")
	inbound(t, env, parts.String())
	t.Logf("stored 5000 parts in %s", time.Since(start))
	start = time.Now()

	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("both", `document.querySelectorAll('#message-list .row').length === 2`)

	p.click("#message-list .row:nth-child(2) .row-link")
	p.waitFor("the big message", `document.querySelector('#message-subject')?.textContent === 'Ten megabytes'`)
	t.Logf("opened 10 MB in %s", time.Since(start))
	start = time.Now()
	p.click("#tab-raw")
	p.waitFor("the shortened raw source", `document.querySelector('#panel-raw').innerText.includes('Showing the first 512.0 KB of 10.0 MB')`)
	p.click("#tab-links")
	p.waitFor("no links", `document.querySelector('#panel-links').innerText.includes('No links')`)

	t.Logf("raw and links of 10 MB in %s", time.Since(start))
	start = time.Now()
	p.click("#message-list .row:nth-child(1) .row-link")
	// The parser looks at the first 1,000 MIME entities; the view lists 200.
	p.waitFor("the many parts", `Number((document.querySelector('#tab-attachments')?.textContent.match(/^Attachments \(([\d,]+)\)$/) || [])[1]?.replaceAll(',', '')) > 200`)
	p.waitFor("the note on what was not read", `document.querySelector('#message-truncated')?.textContent.includes('it has more than 1,000 parts')`)
	p.click("#tab-attachments")
	p.waitFor("the first 200 attachments", `document.querySelectorAll('#panel-attachments li').length === 200 && document.querySelector('#panel-attachments').innerText.includes('Showing the first 200 of')`)
	p.click("#tab-headers")
	p.waitFor("the headers", `document.querySelectorAll('#panel-headers tr').length > 2`)

	// The big message was read whole: no note.
	p.click("#message-list .row:nth-child(2) .row-link")
	p.waitFor("the big message again", `document.querySelector('#message-subject')?.textContent === 'Ten megabytes'`)
	if eval[bool](p, `document.querySelector('#message-truncated') !== null`) {
		t.Error("a message read whole shows a note that parts were not read")
	}
}
