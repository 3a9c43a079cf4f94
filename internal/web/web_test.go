package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/web"
)

func get(t *testing.T, env *testenv.Env, path string, header http.Header) *testenv.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.BaseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return env.Send(t, req)
}

// The page has a strict CSP and no inline script; assets come gzipped,
// revalidated by ETag, and all of them weigh under 100 KB.
func TestPageAndAssets(t *testing.T) {
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	res := get(t, env, "/", nil)
	if res.Status != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", res.Status, res.Header.Get("Content-Type"))
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self';", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("page CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("page CSP %q allows unsafe sources", csp)
	}
	if regexp.MustCompile(`<script(\s[^>]*)?>[^<]`).Match(res.Body) || bytes.Contains(res.Body, []byte(" on")) && regexp.MustCompile(`\son\w+=`).Match(res.Body) {
		t.Errorf("the page has inline script:\n%s", res.Body)
	}

	gz := get(t, env, "/ui/app.js", http.Header{"Accept-Encoding": {"gzip"}})
	if gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("Vary") != "Accept-Encoding" {
		t.Errorf("app.js with Accept-Encoding gzip: encoding %q, vary %q", gz.Header.Get("Content-Encoding"), gz.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.Body))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	plain := get(t, env, "/ui/app.js", nil)
	if !bytes.Equal(unzipped, plain.Body) || plain.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Errorf("gzipped app.js differs from the plain one, or type %q", plain.Header.Get("Content-Type"))
	}
	if res := get(t, env, "/ui/app.js", http.Header{"If-None-Match": {plain.Header.Get("ETag")}}); res.Status != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", res.Status)
	}
	for _, path := range []string{"/ui/nope.js", "/ui/index.html", "/ui/", "/ui/../go.mod"} {
		if res := get(t, env, path, nil); res.Status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, res.Status)
		}
	}
	// The API keeps its own paths and headers.
	if res := get(t, env, "/v1/emails", nil); res.Status != http.StatusUnauthorized || res.Header.Get("Content-Security-Policy") != "default-src 'none'; frame-ancestors 'none'" {
		t.Errorf("/v1/emails without a key: %d, CSP %q", res.Status, res.Header.Get("Content-Security-Policy"))
	}

	size := web.New(web.Config{}).CompressedSize()
	t.Logf("the dashboard weighs %d bytes gzipped", size)
	if size > 100<<10 {
		t.Errorf("the dashboard weighs %d bytes gzipped, want under 100 KB", size)
	}
}

func TestSignInURL(t *testing.T) {
	for _, key := range []string{"msk_abc", "a b+c&d=e#f/é"} {
		u := web.SignInURL("http://127.0.0.1:8025/", key)
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := url.ParseQuery(parsed.EscapedFragment())
		if parsed.Path != "/" || parsed.RawQuery != "" || got.Get("key") != key {
			t.Errorf("SignInURL(%q) = %s: the key must be in the fragment only", key, u)
		}
	}
}

// session signs in with key and returns the session cookie.
func session(t *testing.T, env *testenv.Env, key string) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/ui/session", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res := env.Send(t, req)
	if res.Status != http.StatusOK {
		t.Fatalf("POST /ui/session: %d %s", res.Status, res.Body)
	}
	cookies := (&http.Response{Header: res.Header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("POST /ui/session set %d cookies", len(cookies))
	}
	return cookies[0]
}

func withCookie(c *http.Cookie) http.Header { return http.Header{"Cookie": {c.Name + "=" + c.Value}} }

// The session cookie: minted only with a key in the header, HttpOnly,
// SameSite=Strict, scoped to /ui/; it reads previews and downloads of its
// own account and changes nothing.
func TestSessionCookie(t *testing.T) {
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	for _, key := range []string{"", "wrong"} {
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/ui/session", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if res := env.Send(t, req); res.Status != http.StatusUnauthorized || res.Header.Get("Set-Cookie") != "" {
			t.Errorf("POST /ui/session with key %q: %d, cookie %q", key, res.Status, res.Header.Get("Set-Cookie"))
		}
	}
	if res := get(t, env, "/ui/session", nil); res.Status != http.StatusNotFound || res.Header.Get("Set-Cookie") != "" {
		t.Errorf("GET /ui/session: %d, want 404 and no cookie", res.Status)
	}
	c := session(t, env, testenv.AcmeKey)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.Secure || strings.Contains(c.Value, testenv.AcmeKey) || len(c.Value) < 40 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP, a random id", c)
	}

	raw := strings.ReplaceAll(welcomeMail("ada@acme.test", "Hi <b>there</b>"), "\n", "\r\n")
	res := env.Do(t, "POST", "/v1/emails", testenv.AcmeKey, map[string]any{"recipient": "ada@acme.test", "sender": "a@shop.example", "raw": raw})
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	id := res.JSON(t)["item"].(map[string]any)["id"].(string)

	preview := get(t, env, "/ui/preview/"+id, withCookie(c))
	wantCSP := "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; form-action 'none'; frame-src 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox"
	if preview.Status != http.StatusOK || preview.Header.Get("Content-Security-Policy") != wantCSP || preview.Header.Get("X-Frame-Options") != "SAMEORIGIN" {
		t.Errorf("preview: %d, CSP %q, X-Frame-Options %q", preview.Status, preview.Header.Get("Content-Security-Policy"), preview.Header.Get("X-Frame-Options"))
	}
	if !bytes.Contains(preview.Body, []byte(`<img src="data:image/png;base64,`+pixelPNG+`" alt="logo">`)) {
		t.Errorf("preview does not carry the cid: image inline:\n%s", preview.Body)
	}
	if got := get(t, env, "/ui/preview/"+id+"?remote=1", withCookie(c)).Header.Get("Content-Security-Policy"); !strings.Contains(got, "img-src 'self' data: https: http:;") {
		t.Errorf("preview with remote images: CSP %q", got)
	}
	rawRes := get(t, env, "/ui/emails/"+id+"/raw", withCookie(c))
	if rawRes.Status != http.StatusOK || string(rawRes.Body) != raw || !strings.HasPrefix(rawRes.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("raw: %d, disposition %q", rawRes.Status, rawRes.Header.Get("Content-Disposition"))
	}
	att := get(t, env, "/ui/emails/"+id+"/attachments/1", withCookie(c))
	if att.Status != http.StatusOK || att.Header.Get("Content-Type") != "application/pdf" || att.Header.Get("Content-Disposition") != `attachment; filename=invoice.pdf` {
		t.Errorf("attachment: %d, %q, %q", att.Status, att.Header.Get("Content-Type"), att.Header.Get("Content-Disposition"))
	}

	for _, tc := range []struct {
		path   string
		header http.Header
		want   int
	}{
		{"/ui/preview/" + id, nil, http.StatusUnauthorized},
		{"/ui/preview/" + id, http.Header{"Cookie": {"mailsink_session=forged"}}, http.StatusUnauthorized},
		{"/ui/preview/" + id, withCookie(session(t, env, testenv.GlobexKey)), http.StatusNotFound},
		{"/ui/preview/not-an-id", withCookie(c), http.StatusBadRequest},
		{"/ui/emails/" + id + "/attachments/9", withCookie(c), http.StatusNotFound},
		{"/ui/emails/" + id + "/attachments/-1", withCookie(c), http.StatusBadRequest},
		{"/ui/emails/" + id + "/attachments/x", withCookie(c), http.StatusBadRequest},
	} {
		if res := get(t, env, tc.path, tc.header); res.Status != tc.want {
			t.Errorf("GET %s with %v: %d, want %d", tc.path, tc.header, res.Status, tc.want)
		}
	}

	// The cookie alone changes nothing through the API.
	for _, method := range []string{"PATCH", "DELETE"} {
		req, _ := http.NewRequest(method, env.BaseURL+"/v1/emails/"+id, strings.NewReader(`{"status":"archived"}`))
		req.Header.Set("Cookie", c.Name+"="+c.Value)
		if res := env.Send(t, req); res.Status != http.StatusUnauthorized {
			t.Errorf("%s /v1/emails/{id} with only the cookie: %d, want 401", method, res.Status)
		}
	}

	// Signing out ends the session.
	req, _ := http.NewRequest(http.MethodDelete, env.BaseURL+"/ui/session", nil)
	req.Header.Set("Cookie", c.Name+"="+c.Value)
	if res := env.Send(t, req); res.Status != http.StatusNoContent || !strings.Contains(res.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("DELETE /ui/session: %d, %q", res.Status, res.Header.Get("Set-Cookie"))
	}
	if res := get(t, env, "/ui/preview/"+id, withCookie(c)); res.Status != http.StatusUnauthorized {
		t.Errorf("preview after signing out: %d, want 401", res.Status)
	}
}

// A message without HTML previews as escaped text.
func TestPreviewOfTextOnlyMail(t *testing.T) {
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	res := env.Do(t, "POST", "/v1/emails", testenv.AcmeKey, map[string]any{"recipient": "ada@acme.test", "sender": "a@shop.example", "text": "<script>alert(1)</script>"})
	id := res.JSON(t)["item"].(map[string]any)["id"].(string)
	got := get(t, env, "/ui/preview/"+id, withCookie(session(t, env, testenv.AcmeKey)))
	if !bytes.Contains(got.Body, []byte("&lt;script&gt;alert(1)&lt;/script&gt;")) || bytes.Contains(got.Body, []byte("<script>")) {
		t.Errorf("text-only preview:\n%s", got.Body)
	}
}

// A dashboard session ends with its key: after the accounts file stops
// listing the key, its cookie reads nothing, rather than reading mail for
// the rest of its 12 hours.
func TestSessionEndsWithItsKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(file, []byte(testenv.AccountsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) { c.AccountsFile = file })
	res := env.Do(t, "POST", "/v1/emails", testenv.AcmeKey, map[string]any{"recipient": "ada@acme.test", "sender": "a@shop.example", "text": "hi"})
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	id := res.JSON(t)["item"].(map[string]any)["id"].(string)
	c := session(t, env, testenv.AcmeKey)
	if got := get(t, env, "/ui/emails/"+id+"/raw", withCookie(c)); got.Status != http.StatusOK {
		t.Fatalf("raw with a fresh session: %d", got.Status)
	}
	rotated := strings.Replace(testenv.AccountsYAML, "apiKeys: ["+testenv.AcmeKey+"]", "apiKeys: [a-new-acme-key]", 1)
	if err := os.WriteFile(file, []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := env.App.ReloadAccounts(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, env, "/ui/emails/"+id+"/raw", withCookie(c)); got.Status != http.StatusUnauthorized {
		t.Errorf("raw with the session of a revoked key: %d, want 401", got.Status)
	}
}

// The preview image bomb of the hardening review: one 120 KB image shown a
// thousand times carries at most 8 MiB of images inline in all (it made a
// 175 MB answer before), and the other references point at the attachment.
// The same on both stores.
func TestPreviewImageBomb(t *testing.T) {
	const image = 120 << 10
	var raw strings.Builder
	raw.WriteString("From: a@shop.example\r\nTo: ada@acme.test\r\nSubject: bomb\r\nContent-Type: multipart/related; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/html\r\n\r\n")
	raw.WriteString(strings.Repeat(`<img src="cid:i@b">`, 1000))
	raw.WriteString("\r\n--b\r\nContent-Type: image/png\r\nContent-ID: <i@b>\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x89}, image))
	for ; len(enc) > 76; enc = enc[76:] {
		raw.WriteString(enc[:76] + "\r\n")
	}
	raw.WriteString(enc + "\r\n--b--\r\n")
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, b, nil)
			inbound(t, env, raw.String())
			res := env.Do(t, "GET", "/v1/emails?recipient=ada@acme.test", testenv.AcmeKey, nil)
			id := res.JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
			got := get(t, env, "/ui/preview/"+id, withCookie(session(t, env, testenv.AcmeKey)))
			inline := bytes.Count(got.Body, []byte("data:image/png;base64,"))
			if got.Status != http.StatusOK || inline != (8<<20)/image || bytes.Count(got.Body, []byte("/ui/emails/"+id+"/attachments/0")) != 1000-inline {
				t.Errorf("preview: status %d, %d bytes, %d images inline; want 200 and %d inline", got.Status, len(got.Body), inline, (8<<20)/image)
			}
			if max := 8<<20*4/3 + 100000; len(got.Body) > max {
				t.Errorf("preview of %d bytes, want at most %d", len(got.Body), max)
			}
		})
	}
}
