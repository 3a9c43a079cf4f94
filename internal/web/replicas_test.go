package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// On Redis a dashboard session works on every replica: a browser behind a
// load balancer that is not sticky signs in on one and downloads from
// another, and signing out on any ends it everywhere.
func TestSessionWorksOnEveryReplica(t *testing.T) {
	shared := testenv.SharedRedis(t)
	a := testenv.Start(t, shared, nil)
	b := testenv.Start(t, shared, nil)
	res := a.Do(t, "POST", "/v1/emails", testenv.AcmeKey, map[string]any{"recipient": "ada@acme.test", "sender": "a@shop.example", "text": "hi"})
	if res.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	id := res.JSON(t)["item"].(map[string]any)["id"].(string)

	c := session(t, a, testenv.AcmeKey)
	for name, env := range map[string]*testenv.Env{"a": a, "b": b} {
		if got := get(t, env, c.base+"emails/"+id+"/raw", withCookie(c)); got.Status != http.StatusOK {
			t.Errorf("raw on replica %s with a session made on a: %d %s", name, got.Status, got.Body)
		}
	}
	// Another account's session reads nothing of acme's on either.
	g := session(t, b, testenv.GlobexKey)
	if got := get(t, a, g.base+"emails/"+id+"/raw", withCookie(g)); got.Status != http.StatusNotFound {
		t.Errorf("raw of acme's email with globex's session: %d, want 404", got.Status)
	}

	req, _ := http.NewRequest(http.MethodDelete, b.BaseURL+c.base+"session", nil)
	req.Header["Cookie"] = withCookie(c)["Cookie"]
	if res := b.Send(t, req); res.Status != http.StatusNoContent {
		t.Fatalf("DELETE %ssession on b: %d %s", c.base, res.Status, res.Body)
	}
	for name, env := range map[string]*testenv.Env{"a": a, "b": b} {
		if got := get(t, env, c.base+"emails/"+id+"/raw", withCookie(c)); got.Status != http.StatusUnauthorized {
			t.Errorf("raw on replica %s after signing out on b: %d, want 401", name, got.Status)
		}
	}
	// A cookie that names an account and an id in the wrong shape is no
	// session, and does not reach the store.
	for _, v := range []string{"forged", "." + strings.Repeat("A", 43), strings.Repeat("A", 400) + "." + strings.Repeat("A", 43), c.cookie.Value + "x"} {
		if got := get(t, b, c.base+"emails/"+id+"/raw", http.Header{"Cookie": {c.cookie.Name + "=" + v}}); got.Status != http.StatusUnauthorized {
			t.Errorf("raw with cookie %.40q: %d, want 401", v, got.Status)
		}
	}
}

// With the store down, signing in and reading with a session answer 503,
// which the page shows as a store outage, not as a signed-out session.
func TestSessionStoreOutage(t *testing.T) {
	e := testenv.Start(t, testenv.DownRedis(t), func(c *config.Config) { c.Store.Timeout = 2 * time.Second })
	req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/ui/session", nil)
	req.Header.Set("Authorization", "Bearer "+testenv.AcmeKey)
	if res := e.Send(t, req); res.Status != http.StatusServiceUnavailable || res.Header.Get("Set-Cookie") != "" {
		t.Errorf("POST /ui/session with the store down: %d, cookie %q; want 503 and no cookie", res.Status, res.Header.Get("Set-Cookie"))
	}
	cookie := http.Header{"Cookie": {"mailsink_session_YWNtZQ=" + "YWNtZQ." + strings.Repeat("A", 43)}}
	if res := get(t, e, "/ui/a/YWNtZQ/preview/00000000-0000-4000-8000-000000000000", cookie); res.Status != http.StatusServiceUnavailable {
		t.Errorf("preview with the store down: %d, want 503", res.Status)
	}
}

// A person's dashboard behind a load balancer that sends each request to the
// next of two replicas on one Redis: signing in, the live list, the HTML
// preview and the downloads all work, whichever replica a request reaches.
func TestDashboardBehindRoundRobin(t *testing.T) {
	shared := testenv.SharedRedis(t)
	a := testenv.Start(t, shared, nil)
	b := testenv.Start(t, shared, nil)
	var next atomic.Int64
	var mu sync.Mutex
	previews := map[string]int{} // preview and download requests per replica
	lb := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			target := []string{a.BaseURL, b.BaseURL}[next.Add(1)%2]
			u, _ := url.Parse(target)
			r.SetURL(u)
			r.Out.Host = r.In.Host
			if strings.Contains(r.In.URL.Path, "/emails/") || strings.Contains(r.In.URL.Path, "/preview/") {
				mu.Lock()
				previews[target]++
				mu.Unlock()
			}
		},
		FlushInterval: -1,
	})
	t.Cleanup(lb.Close)
	traffic.allow(strings.TrimPrefix(lb.URL, "http://"))
	env := &testenv.Env{App: a.App, BaseURL: lb.URL, SMTP: a.SMTP}

	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	sendMail(t, b, "noreply@shop.example", "ada@acme.test", welcomeMail("ada@acme.test", "Welcome to the shop"))
	p.waitFor("the new mail in the list", `[...document.querySelectorAll('#message-list .subject')].some(e => e.textContent === 'Welcome to the shop')`)
	p.click("#message-list .row-link")
	p.waitFor("the message view", `document.querySelector('#message-subject')?.textContent === 'Welcome to the shop'`)
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")
	base := uiBase(t, env, testenv.AcmeKey)
	for i := 0; i < 4; i++ {
		if got := fetchWithCookie(t, p, base+"preview/"+id); !strings.Contains(got, `<h1 id="greeting">Hello Ada</h1>`) {
			t.Errorf("preview %d through the balancer: %.200s", i, got)
		}
		if got := fetchWithCookie(t, p, base+"emails/"+id+"/attachments/1"); !strings.HasPrefix(got, "%PDF-1.4") {
			t.Errorf("attachment download %d through the balancer: %.200s", i, got)
		}
	}
	seeInlineImage(t, env, id)
	p.screenshot("behind-round-robin")
	mu.Lock()
	defer mu.Unlock()
	if previews[a.BaseURL] == 0 || previews[b.BaseURL] == 0 {
		t.Errorf("previews and downloads per replica: %v; want both replicas to serve some", previews)
	}
}
