package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// webhookConfig lets acme's webhooks reach loopback receivers and makes
// retries quick.
func webhookConfig(c *config.Config) {
	for i := range c.Accounts {
		if c.Accounts[i].Slug == "acme" {
			c.Accounts[i].Webhooks.AllowPrivateTargets = true
		}
	}
	c.Webhooks.PollInterval = 20 * time.Millisecond
	c.Webhooks.RetryBase = 50 * time.Millisecond
	c.Webhooks.MaxPerAccount = 3
}

type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func newHookReceiver(t *testing.T, answer http.HandlerFunc) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, r)
		rc.body = append(rc.body, b.String())
		rc.mu.Unlock()
		if answer != nil {
			answer(w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

func TestWebhooksLifecycle(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, webhookConfig, func(t *testing.T, e *testenv.Env) {
		rc := newHookReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"ok":true}`)) })
		resp := e.Do(t, http.MethodPost, "/v1/webhooks", acme, map[string]any{
			"url": rc.srv.URL + "/hook", "events": []string{"email.created"},
			"filters": map[string]any{"recipient": "signup@acme.test"},
		})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		o := loadOpenAPI(t, e)
		o.check(t, "POST", "/v1/webhooks", resp)
		item := resp.JSON(t)["item"].(map[string]any)
		id, secret := item["id"].(string), item["secret"].(string)
		if !strings.HasPrefix(secret, "whsec_") || item["status"] != "active" || item["url"] != rc.srv.URL+"/hook" {
			t.Fatalf("created webhook %v", item)
		}
		if f := item["filters"].(map[string]any); f["recipient"] != "signup@acme.test" || f["subject"] != nil {
			t.Fatalf("filters %v", f)
		}

		listed := e.Do(t, http.MethodGet, "/v1/webhooks", acme, nil)
		items := listed.JSON(t)["items"].([]any)
		if listed.Status != 200 || len(items) != 1 || strings.Contains(string(listed.Body), secret) {
			t.Fatalf("list: %d %s (the secret is shown only at creation)", listed.Status, listed.Body)
		}
		if got := e.Do(t, http.MethodGet, "/v1/webhooks/"+id, acme, nil); got.Status != 200 || strings.Contains(string(got.Body), secret) {
			t.Fatalf("get: %d %s", got.Status, got.Body)
		}
		// Another account's webhook does not exist for it.
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			wantError(t, e.Do(t, method, "/v1/webhooks/"+id, globex, nil), http.StatusNotFound)
		}
		wantError(t, e.Do(t, http.MethodGet, "/v1/webhooks/"+id+"/deliveries", globex, nil), http.StatusNotFound)
		if got := e.Do(t, http.MethodGet, "/v1/webhooks", globex, nil); !strings.Contains(string(got.Body), `"items":[]`) {
			t.Fatalf("globex lists %s", got.Body)
		}

		create(t, e, acme, map[string]any{"sender": "app@example.com", "recipient": "other@acme.test", "subject": "no"})
		email := create(t, e, acme, map[string]any{"sender": "app@example.com", "recipient": "signup@acme.test", "subject": "Welcome"})
		testenv.WaitFor(t, 10*time.Second, "the delivery", func() bool { return rc.count() == 1 })
		rc.mu.Lock()
		r, body := rc.reqs[0], rc.body[0]
		rc.mu.Unlock()
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "." + body))
		if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); r.Header.Get("webhook-signature") != want {
			t.Fatalf("signature %q, want %q", r.Header.Get("webhook-signature"), want)
		}
		if !strings.Contains(body, `"type":"email.created"`) || !strings.Contains(body, email["id"].(string)) {
			t.Fatalf("body %s", body)
		}

		var d map[string]any
		testenv.WaitFor(t, 10*time.Second, "the log to show success", func() bool {
			got := e.Do(t, http.MethodGet, "/v1/webhooks/"+id+"/deliveries", acme, nil)
			ds := got.JSON(t)["items"].([]any)
			if len(ds) != 1 {
				return false
			}
			d = ds[0].(map[string]any)
			if d["status"] == "succeeded" {
				o.check(t, "GET", "/v1/webhooks/{webhookId}/deliveries", got)
				return true
			}
			return false
		})
		if d["id"] != r.Header.Get("webhook-id") || d["attempts"] != 1.0 || d["statusCode"] != 200.0 ||
			d["response"] != `{"ok":true}` || d["emailId"] != email["id"] || d["lastAttemptAt"] == nil {
			t.Fatalf("delivery log entry %v", d)
		}
		wantValidation(t, e.Do(t, http.MethodGet, "/v1/webhooks/"+id+"/deliveries?limit=0", acme, nil), "limit")

		if got := e.Do(t, http.MethodDelete, "/v1/webhooks/"+id, acme, nil); got.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", got.Status, got.Body)
		}
		wantError(t, e.Do(t, http.MethodGet, "/v1/webhooks/"+id, acme, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodDelete, "/v1/webhooks/"+id, acme, nil), http.StatusNotFound)
	})
}

func TestWebhookValidation(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], webhookConfig)
	ok := func(url string) map[string]any {
		return map[string]any{"url": url, "events": []string{"email.created"}}
	}
	tests := []struct {
		name, key string
		body      any
		field     string
	}{
		{"no body", acme, "", ""},
		{"not JSON", acme, "{", ""},
		{"an array", acme, "[]", ""},
		{"no url", acme, map[string]any{"events": []string{"email.created"}}, "url"},
		{"url not a string", acme, map[string]any{"url": 5, "events": []string{"email.created"}}, "url"},
		{"ftp url", acme, ok("ftp://hooks.example.com/x"), "url"},
		{"relative url", acme, ok("/hook"), "url"},
		{"url too long", acme, ok("https://hooks.example.com/" + strings.Repeat("a", 2048)), "url"},
		{"metadata address", acme, ok("http://169.254.169.254/latest/meta-data"), "url"},
		{"metadata over IPv6", acme, ok("http://[fd00:ec2::254]/"), "url"},
		{"loopback without the opt-in", globex, ok("http://127.0.0.1:9/hook"), "url"},
		{"private without the opt-in", globex, ok("http://10.0.0.8/hook"), "url"},
		{"no events", acme, map[string]any{"url": "https://hooks.example.com/"}, "events"},
		{"empty events", acme, map[string]any{"url": "https://hooks.example.com/", "events": []string{}}, "events"},
		{"unknown event", acme, map[string]any{"url": "https://hooks.example.com/", "events": []string{"email.read"}}, "events"},
		{"events not a list", acme, map[string]any{"url": "https://hooks.example.com/", "events": "email.created"}, "events"},
		{"filters not an object", acme, map[string]any{"url": "https://hooks.example.com/", "events": []string{"email.created"}, "filters": "x"}, "filters"},
		{"bad recipient filter", acme, map[string]any{"url": "https://hooks.example.com/", "events": []string{"email.created"}, "filters": map[string]any{"recipient": "nope"}}, "filters.recipient"},
		{"long subject filter", acme, map[string]any{"url": "https://hooks.example.com/", "events": []string{"email.created"}, "filters": map[string]any{"subject": strings.Repeat("s", 201)}}, "filters.subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValidation(t, e.Do(t, http.MethodPost, "/v1/webhooks", tt.key, tt.body), tt.field)
		})
	}
	wantValidation(t, e.Do(t, http.MethodGet, "/v1/webhooks/not-a-uuid", acme, nil), "webhookId")
	wantValidation(t, e.Do(t, http.MethodDelete, "/v1/webhooks/not-a-uuid", acme, nil), "webhookId")
	wantError(t, e.Do(t, http.MethodGet, "/v1/webhooks", "", nil), http.StatusUnauthorized)
	wantError(t, e.Do(t, http.MethodPut, "/v1/webhooks", acme, nil), http.StatusMethodNotAllowed)

	// Opted in, acme may use loopback; the cap of 3 then answers 409.
	for i := range 3 {
		if got := e.Do(t, http.MethodPost, "/v1/webhooks", acme, ok("http://127.0.0.1:9/hook")); got.Status != http.StatusCreated {
			t.Fatalf("webhook %d: %d %s", i, got.Status, got.Body)
		}
	}
	wantError(t, e.Do(t, http.MethodPost, "/v1/webhooks", acme, ok("https://hooks.example.com/")), http.StatusConflict)
}

// TestHangingReceiverDoesNotSlowAPI: while every attempt hangs on a
// receiver that never answers, creating and listing emails stays fast.
func TestHangingReceiverDoesNotSlowAPI(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	rc := newHookReceiver(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	e := testenv.Start(t, testenv.Backends(t)[0], func(c *config.Config) {
		webhookConfig(c)
		c.Webhooks.AttemptTimeout = time.Minute
		c.Webhooks.Concurrency = 4
	})
	for range 3 {
		if got := e.Do(t, http.MethodPost, "/v1/webhooks", acme, map[string]any{"url": rc.srv.URL, "events": []string{"email.created"}}); got.Status != http.StatusCreated {
			t.Fatalf("create webhook: %d %s", got.Status, got.Body)
		}
	}
	create(t, e, acme, map[string]any{"sender": "a@example.com", "recipient": "x@acme.test", "subject": "first"})
	// One account gets half the slots: two attempts hang.
	testenv.WaitFor(t, 10*time.Second, "attempts to hang", func() bool { return rc.count() >= 2 })
	var slowest time.Duration
	for range 30 {
		start := time.Now()
		create(t, e, acme, map[string]any{"sender": "a@example.com", "recipient": "x@acme.test", "subject": "more"})
		list(t, e, acme, "limit=10")
		if d := time.Since(start); d > slowest {
			slowest = d
		}
	}
	t.Logf("slowest create+list while every webhook attempt hangs: %s", slowest)
	if slowest > 2*time.Second {
		t.Fatalf("create+list took %s while receivers hang", slowest)
	}
}

// exerciseWebhooks checks the webhook operations' answers against the
// OpenAPI document.
func exerciseWebhooks(t *testing.T, e *testenv.Env, o *openAPI) {
	t.Helper()
	do := func(method, path, key string, body any) *testenv.Response { return e.Do(t, method, path, key, body) }
	const hooks, one = "/v1/webhooks", "/v1/webhooks/{webhookId}"
	missing := "/v1/webhooks/0190b6d2-7c3e-7a1b-8c2d-1234567890ab"
	created := do(http.MethodPost, hooks, acme, map[string]any{"url": "https://192.0.2.1/hook", "events": []string{"email.created", "email.deleted"},
		"filters": map[string]any{"subject": "code"}})
	o.check(t, "POST", hooks, created)
	id := created.JSON(t)["item"].(map[string]any)["id"].(string)
	o.check(t, "POST", hooks, do(http.MethodPost, hooks, acme, map[string]any{"url": "ftp://x"}))
	o.check(t, "POST", hooks, do(http.MethodPost, hooks, "", nil))
	o.check(t, "GET", hooks, do(http.MethodGet, hooks, acme, nil))
	o.check(t, "GET", hooks, do(http.MethodGet, hooks, "", nil))
	o.check(t, "GET", one, do(http.MethodGet, hooks+"/"+id, acme, nil))
	o.check(t, "GET", one, do(http.MethodGet, hooks+"/x", acme, nil))
	o.check(t, "GET", one, do(http.MethodGet, missing, acme, nil))
	o.check(t, "GET", one+"/deliveries", do(http.MethodGet, hooks+"/"+id+"/deliveries?limit=5", acme, nil))
	o.check(t, "GET", one+"/deliveries", do(http.MethodGet, hooks+"/"+id+"/deliveries?limit=x", acme, nil))
	o.check(t, "GET", one+"/deliveries", do(http.MethodGet, missing+"/deliveries", acme, nil))
	o.check(t, "DELETE", one, do(http.MethodDelete, hooks+"/"+id, acme, nil))
	o.check(t, "DELETE", one, do(http.MethodDelete, hooks+"/"+id, acme, nil))
	o.check(t, "DELETE", one, do(http.MethodDelete, hooks+"/x", acme, nil))
}

// TestWebhookTwoReplicas: two mailsinks on one Redis, mail arriving over
// SMTP at both; the receiver answers at once and gets each event once.
func TestWebhookTwoReplicas(t *testing.T) {
	t.Parallel()
	shared := testenv.SharedRedis(t)
	a := testenv.Start(t, shared, webhookConfig)
	b := testenv.Start(t, shared, webhookConfig)
	rc := newHookReceiver(t, nil)
	resp := a.Do(t, http.MethodPost, "/v1/webhooks", acme, map[string]any{"url": rc.srv.URL, "events": []string{"email.created"}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	id := resp.JSON(t)["item"].(map[string]any)["id"].(string)
	const n = 20
	for i := range n {
		addr := a.SMTP
		if i%2 == 1 {
			addr = b.SMTP
		}
		sendSMTP(t, addr, "app@example.com", "replicas@acme.test", "Subject: hi\r\n\r\nhello\r\n")
	}
	// Once the log shows every delivery succeeded none can be attempted
	// again, so the receiver's count is final.
	testenv.WaitFor(t, 20*time.Second, "every delivery to succeed", func() bool {
		got := b.Do(t, http.MethodGet, "/v1/webhooks/"+id+"/deliveries?limit=100", acme, nil)
		items, _ := got.JSON(t)["items"].([]any)
		if len(items) != n {
			return false
		}
		for _, it := range items {
			if it.(map[string]any)["status"] != "succeeded" {
				return false
			}
		}
		return true
	})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]int{}
	for _, r := range rc.reqs {
		seen[r.Header.Get("webhook-id")]++
	}
	if len(seen) != n || len(rc.reqs) != n {
		t.Fatalf("receiver got %d requests for %d deliveries, want %d once each", len(rc.reqs), len(seen), n)
	}
}
