package web_test

import (
	"net/http"
	"strings"
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
		if got := get(t, env, "/ui/emails/"+id+"/raw", withCookie(c)); got.Status != http.StatusOK {
			t.Errorf("raw on replica %s with a session made on a: %d %s", name, got.Status, got.Body)
		}
	}
	// Another account's session reads nothing of acme's on either.
	g := session(t, b, testenv.GlobexKey)
	if got := get(t, a, "/ui/emails/"+id+"/raw", withCookie(g)); got.Status != http.StatusNotFound {
		t.Errorf("raw of acme's email with globex's session: %d, want 404", got.Status)
	}

	req, _ := http.NewRequest(http.MethodDelete, b.BaseURL+"/ui/session", nil)
	req.Header.Set("Cookie", c.Name+"="+c.Value)
	if res := b.Send(t, req); res.Status != http.StatusNoContent {
		t.Fatalf("DELETE /ui/session on b: %d %s", res.Status, res.Body)
	}
	for name, env := range map[string]*testenv.Env{"a": a, "b": b} {
		if got := get(t, env, "/ui/emails/"+id+"/raw", withCookie(c)); got.Status != http.StatusUnauthorized {
			t.Errorf("raw on replica %s after signing out on b: %d, want 401", name, got.Status)
		}
	}
	// A cookie that names an account and an id in the wrong shape is no
	// session, and does not reach the store.
	for _, v := range []string{"forged", "." + strings.Repeat("A", 43), strings.Repeat("A", 400) + "." + strings.Repeat("A", 43), c.Value + "x"} {
		if got := get(t, b, "/ui/emails/"+id+"/raw", http.Header{"Cookie": {"mailsink_session=" + v}}); got.Status != http.StatusUnauthorized {
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
	cookie := http.Header{"Cookie": {"mailsink_session=" + "YWNtZQ." + strings.Repeat("A", 43)}}
	if res := get(t, e, "/ui/preview/00000000-0000-4000-8000-000000000000", cookie); res.Status != http.StatusServiceUnavailable {
		t.Errorf("preview with the store down: %d, want 503", res.Status)
	}
}
