package httpapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/inbound/inboundtest"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
	"github.com/mailsink/mailsink/store/redisstore"
)

// A client may send any token as its HTTP method: the metrics must not keep a
// series for each (else /metrics would grow by every new method name).
func TestUnknownMethodsShareOneMetricSeries(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], nil)
	m := e.App.Metrics()
	for i := range 50 {
		resp := e.Do(t, fmt.Sprintf("M%dX%s", i, strings.Repeat("Y", 100)), "/x", "", nil)
		if resp.Status < 400 || resp.Status >= 500 {
			t.Fatalf("method %d: status %d, want a 4xx", i, resp.Status)
		}
	}
	if n := testutil.CollectAndCount(m.HTTPRequests); n > 3 {
		t.Errorf("mailsink_http_requests_total has %d series after 50 unknown methods, want at most 3", n)
	}
	if got := testutil.ToFloat64(m.HTTPRequests.WithLabelValues("unmatched", "other", "404")) +
		testutil.ToFloat64(m.HTTPRequests.WithLabelValues("unmatched", "other", "405")); got != 50 {
		t.Errorf("requests counted under method \"other\" = %v, want 50", got)
	}
}

// Header values are strings: null is refused like every other non-string.
func TestCreateRefusesNullHeaderValues(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
			"recipient": "r@acme.test", "sender": "s@example.com", "headers": map[string]any{"x-a": nil},
		})
		if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), `"headers"`) {
			t.Fatalf("status %d, body %s; want 400 with fieldErrors.headers", resp.Status, resp.Body)
		}
		if items := list(t, e, acme, ""); len(items) != 0 {
			t.Errorf("a refused create stored %d emails", len(items))
		}
	})
}

// receivedAt must have an RFC 3339 form in UTC, or lists would print years
// no parser reads (-0001, 10000) and sort them first.
func TestCreateRefusesReceivedAtOutsideRFC3339Years(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for _, at := range []string{"0000-01-01T00:00:00+23:59", "9999-12-31T23:59:59.999-23:59"} {
			resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
				"recipient": "r@acme.test", "sender": "s@example.com", "receivedAt": at,
			})
			if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), `"receivedAt"`) {
				t.Errorf("receivedAt %s: status %d, body %s; want 400 with fieldErrors.receivedAt", at, resp.Status, resp.Body)
			}
		}
		for _, at := range []string{"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2026-11-22T10:00:00+01:00"} {
			resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
				"recipient": "r@acme.test", "sender": "s@example.com", "receivedAt": at,
			})
			if resp.Status != http.StatusCreated {
				t.Errorf("receivedAt %s: status %d, body %s; want 201", at, resp.Status, resp.Body)
			}
		}
	})
}

// A create request's text, html and headers count against the message size
// limit with its raw: before, they were unbounded and the composed raw could
// be many times the limit.
func TestCreateCountsEveryPartAgainstTheSizeLimit(t *testing.T) {
	t.Parallel()
	b := testenv.Backends(t)[0]
	e := testenv.Start(t, b, func(c *config.Config) { c.MaxMessageBytes = 10_000 })
	big := strings.Repeat("x", 4_000)
	for name, body := range map[string]map[string]any{
		"text and html": {"text": big, "html": big, "headers": map[string]any{"x-a": big}},
		"headers":       {"headers": map[string]any{"x-a": big, "x-b": big, "x-c": big}},
	} {
		body["recipient"], body["sender"] = "r@acme.test", "s@example.com"
		resp := e.Do(t, http.MethodPost, "/v1/emails", acme, body)
		if resp.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: status %d, want 413: %s", name, resp.Status, resp.Body)
		}
	}
	if resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{
		"recipient": "r@acme.test", "sender": "s@example.com", "text": big,
	}); resp.Status != http.StatusCreated {
		t.Errorf("a create within the limit: status %d: %s", resp.Status, resp.Body)
	}
	if n := len(list(t, e, acme, "")); n != 1 {
		t.Errorf("%d emails stored, want only the one within the limit", n)
	}
}

// Request bodies past their first MiB take turns, and one client address
// cannot hold every turn: while a client's large upload stalls in its turn,
// its second large request waits although a turn is free (the gate's own
// test shows another address getting it), and small requests go on.
func TestLargeBodiesTakeTurnsPerAddress(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], func(c *config.Config) { c.SMTP.MaxLargeTransfers = 2 })
	raw := func(n int) []byte {
		return []byte("From: s@example.com\r\nTo: big@acme.test\r\n\r\n" + strings.Repeat("a", n) + "\r\n")
	}
	// A client sends 1.5 MiB of a 3 MiB body and stalls: it holds a turn.
	msg := raw(3 << 20)
	pr, pw := io.Pipe()
	stalled := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", pr)
		req.Header.Set("Authorization", "Bearer "+acme)
		req.ContentLength = int64(len(msg))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			stalled <- nil
			return
		}
		stalled <- resp
	}()
	if _, err := pw.Write(msg[:3<<19]); err != nil {
		t.Fatal(err)
	}
	g := e.App.LargeGate()
	testenv.WaitFor(t, 5*time.Second, "the stalled upload to hold a turn", func() bool { a, _ := g.Counts(); return a == 1 })

	// The same address's second large request waits while the first holds
	// its turn, although a turn is free.
	second := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", bytes.NewReader(raw(2<<20)))
		req.Header.Set("Authorization", "Bearer "+acme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			second <- 0
			return
		}
		resp.Body.Close()
		second <- resp.StatusCode
	}()
	testenv.WaitFor(t, 5*time.Second, "the second large request to wait", func() bool { _, w := g.Counts(); return w == 1 })
	if a, _ := g.Counts(); a != 1 {
		t.Fatalf("%d turns held, want 1: one address took a second turn", a)
	}
	// Small requests are never held up.
	if resp := e.Do(t, http.MethodGet, "/v1/emails", acme, nil); resp.Status != http.StatusOK {
		t.Fatalf("list while a large upload stalls: %d", resp.Status)
	}
	// The stalled upload finishes and is stored.
	if _, err := pw.Write(msg[3<<19:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	resp := <-stalled
	if resp == nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("the stalled upload: %v", resp)
	}
	resp.Body.Close()
	if code := <-second; code != http.StatusCreated {
		t.Errorf("the second large request, once the first was done: status %d, want 201", code)
	}
	if a, w := g.Counts(); a != 0 || w != 0 {
		t.Errorf("after every request: %d turns held, %d waiting; want 0, 0", a, w)
	}
}

// Held list requests query again only for an event whose email matches
// them: before, each rescanned the account every second, so one account's
// waits with a subject filter kept the server busy for everyone.
func TestHeldWaitsQueryOnlyForMatchingMail(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		m := e.App.Metrics()
		lists := func() int {
			var n int
			for _, backend := range []string{"embedded", "redis"} {
				h := m.StoreDuration.WithLabelValues("list", backend, "ok")
				n += int(histogramCount(t, h))
			}
			return n
		}
		// A wait answered through the store's events: afterwards the Redis
		// store's listener is subscribed, so no subscription is ended
		// (and its holder made to query again) while the test counts.
		warm := make(chan struct{})
		go func() {
			defer close(warm)
			e.Do(t, http.MethodGet, "/v1/emails?subject=warm-up&wait=30", acme, nil)
		}()
		testenv.WaitFor(t, 5*time.Second, "the warm-up wait to be held", func() bool { return e.App.HeldRequests() == 1 })
		create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "subject": "warm-up"})
		<-warm

		const waiters = 10
		done := make(chan int, waiters)
		base := lists()
		for range waiters {
			go func() {
				resp := e.Do(t, http.MethodGet, "/v1/emails?subject=wanted&wait=30", acme, nil)
				if resp.Status != http.StatusOK {
					done <- -1
					return
				}
				done <- len(resp.JSON(t)["items"].([]any))
			}()
		}
		testenv.WaitFor(t, 5*time.Second, "every wait to be held after its first query", func() bool {
			return e.App.HeldRequests() == waiters && lists() == base+waiters
		})
		before := lists()
		for i := range 30 {
			create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "subject": fmt.Sprint("other ", i)})
		}
		create(t, e, globex, map[string]any{"recipient": "r@globex.test", "sender": "s@example.com", "subject": "wanted"})
		if got := lists() - before; got != 0 {
			t.Errorf("30 emails that match no wait cost %d list queries, want 0", got)
		}
		create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "subject": "the wanted one"})
		for range waiters {
			if n := <-done; n != 1 {
				t.Errorf("a held wait answered %d items, want the 1 matching email", n)
			}
		}
	})
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var pb dto.Metric
	if err := o.(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}

// Behind a load balancer every request comes from the proxy: with the proxy
// trusted, the wrong-key limit counts each forwarded client on its own, so
// one client's guesses cannot lock out the rest of a CI fleet; without it,
// X-Forwarded-For is not believed (a client could name any address).
func TestTrustedProxiesForwardTheClientAddress(t *testing.T) {
	t.Parallel()
	guess := func(t *testing.T, e *testenv.Env, client string) int {
		req, _ := http.NewRequest(http.MethodGet, e.BaseURL+"/v1/emails", nil)
		req.Header.Set("Authorization", "Bearer wrong-key")
		req.Header.Set("X-Forwarded-For", client)
		return e.Send(t, req).Status
	}
	for _, tt := range []struct {
		name    string
		trusted string
		// want is what a second client gets once the first is limited.
		want int
	}{
		{"trusted", "127.0.0.0/8,::1", http.StatusUnauthorized},
		{"not trusted", "", http.StatusTooManyRequests},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := testenv.Start(t, testenv.Backends(t)[0], func(c *config.Config) {
				c.HTTP.AuthFailuresPerMinute = 3
				c.HTTP.AuthLimitLoopback = true
				c.TrustedProxies, _ = clientaddr.Parse(tt.trusted)
			})
			for range 3 {
				if got := guess(t, e, "198.51.100.1"); got != http.StatusUnauthorized {
					t.Fatalf("a wrong key within the budget: %d, want 401", got)
				}
			}
			if got := guess(t, e, "198.51.100.1"); got != http.StatusTooManyRequests {
				t.Fatalf("a wrong key past the budget: %d, want 429", got)
			}
			if got := guess(t, e, "198.51.100.2"); got != tt.want {
				t.Errorf("another client's wrong key: %d, want %d", got, tt.want)
			}
		})
	}
}

// /metrics needs no key, so by default it names no account: before, anyone
// could read every account's email count and bytes there.
func TestMetricsNameNoAccountByDefault(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com"})
		resp := get(t, e, "/metrics", "")
		if resp.Status != http.StatusOK {
			t.Fatalf("/metrics: %d", resp.Status)
		}
		for _, leak := range []string{`account="acme"`, `account="globex"`, "mailsink_stored_emails"} {
			if strings.Contains(string(resp.Body), leak) {
				t.Errorf("/metrics shows %s without MAILSINK_METRICS_PER_ACCOUNT", leak)
			}
		}
	})
}

// Idempotency-Key: a repeat answers as the first did and stores nothing
// new, on create and on inbound; the same key for another request is 409;
// a malformed key is 400.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		send := func(method, path, key string, body any, header ...string) *testenv.Response {
			var req *http.Request
			if b, ok := body.(string); ok {
				req, _ = http.NewRequest(method, e.BaseURL+path, strings.NewReader(b))
				req.Header.Set("Content-Type", "message/rfc822")
			} else {
				j, _ := json.Marshal(body)
				req, _ = http.NewRequest(method, e.BaseURL+path, bytes.NewReader(j))
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Authorization", "Bearer "+acme)
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			return e.Send(t, req)
		}
		body := map[string]any{"recipient": "idem@acme.test", "sender": "s@example.com", "subject": "once"}
		first := send(http.MethodPost, "/v1/emails", "create-key-1", body)
		again := send(http.MethodPost, "/v1/emails", "create-key-1", body)
		if first.Status != http.StatusCreated || again.Status != http.StatusCreated {
			t.Fatalf("create and its repeat: %d, %d; want 201, 201", first.Status, again.Status)
		}
		if a, b := first.JSON(t)["item"].(map[string]any)["id"], again.JSON(t)["item"].(map[string]any)["id"]; a != b {
			t.Errorf("the repeat answered id %v, the first %v", b, a)
		}
		body["subject"] = "another"
		if resp := send(http.MethodPost, "/v1/emails", "create-key-1", body); resp.Status != http.StatusConflict {
			t.Errorf("the key reused for another request: %d, want 409: %s", resp.Status, resp.Body)
		}
		if resp := send(http.MethodPost, "/v1/emails", strings.Repeat("k", 256), body); resp.Status != http.StatusBadRequest ||
			!strings.Contains(string(resp.Body), "Idempotency-Key") {
			t.Errorf("a 256-character key: %d, want 400 naming Idempotency-Key: %s", resp.Status, resp.Body)
		}

		raw := "From: s@example.com\r\nTo: idem@acme.test, idem2@acme.test\r\nSubject: inbound once\r\n\r\nhi\r\n"
		in1 := send(http.MethodPost, "/v1/inbound", "inbound-key-1", raw)
		in2 := send(http.MethodPost, "/v1/inbound", "inbound-key-1", raw)
		// The body's digest (fromName, snippet, attachmentCount) may land
		// between the two answers; everything else must repeat.
		if in1.Status != http.StatusCreated || in2.Status != http.StatusCreated ||
			!reflect.DeepEqual(withoutDigest(t, in1), withoutDigest(t, in2)) {
			t.Errorf("inbound and its repeat: %d %s / %d %s; want the same 201 answer", in1.Status, in1.Body, in2.Status, in2.Body)
		}
		if n := len(list(t, e, acme, "recipient=idem%40acme.test")); n != 2 {
			t.Errorf("%d emails to idem@acme.test, want 2 (one create, one inbound)", n)
		}
		// Without a key the same request is stored again, on purpose.
		send(http.MethodPost, "/v1/inbound", "", raw)
		if n := len(list(t, e, acme, "recipient=idem2%40acme.test")); n != 2 {
			t.Errorf("%d emails to idem2@acme.test after a keyless repeat, want 2", n)
		}
	})
}

// Each account has a storage quota: past it SMTP answers 452 4.2.2 and the
// API 429, nothing is stored, and other accounts go on. Before, one team's
// load test could fill a shared store for everyone.
func TestQuotaBoundsOneAccount(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.Quota.MaxEmails = 2 }, func(t *testing.T, e *testenv.Env) {
		raw := "From: app@example.com\r\nTo: q@acme.test\r\nSubject: quota\r\n\r\nhello\r\n"
		c := dialSMTP(t, e.SMTP)
		for i := range 2 {
			if err := c.SendMail("app@example.com", []string{"q@acme.test"}, strings.NewReader(raw)); err != nil {
				t.Fatalf("message %d within the quota: %v", i, err)
			}
		}
		err := c.SendMail("app@example.com", []string{"q@acme.test"}, strings.NewReader(raw))
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 452 || se.EnhancedCode != (smtp.EnhancedCode{4, 2, 2}) {
			t.Fatalf("a message past the quota: %v, want 452 4.2.2", err)
		}
		resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{"recipient": "q@acme.test", "sender": "s@example.com"})
		if resp.Status != http.StatusTooManyRequests || !strings.Contains(string(resp.Body), "quota") {
			t.Errorf("a create past the quota: %d %s, want 429 naming the quota", resp.Status, resp.Body)
		}
		if n := len(list(t, e, acme, "")); n != 2 {
			t.Errorf("acme stores %d emails, want its quota of 2", n)
		}
		if resp := e.Do(t, http.MethodPost, "/v1/emails", globex, map[string]any{"recipient": "q@globex.test", "sender": "s@example.com"}); resp.Status != http.StatusCreated {
			t.Errorf("another account's create: %d, want 201", resp.Status)
		}
		// Deleting makes room again.
		id := list(t, e, acme, "")[0]["id"].(string)
		if resp := e.Do(t, http.MethodDelete, "/v1/emails/"+id, acme, nil); resp.Status != http.StatusNoContent {
			t.Fatalf("delete: %d", resp.Status)
		}
		if err := c.SendMail("app@example.com", []string{"q@acme.test"}, strings.NewReader(raw)); err != nil {
			t.Errorf("after a delete: %v", err)
		}
	})
}

// An account over its quota refuses its own recipients only, and says how
// full it is to nobody else: a message to it and to another account is
// stored for the other (its RCPT gets the 452), and a webhook delivery of
// another account's key that reaches it is refused without its figures.
func TestQuotaOfOneAccountIsItsOwn(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.Quota.MaxEmails = 2 }, func(t *testing.T, e *testenv.Env) {
		for i := range 2 {
			if resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{"recipient": fmt.Sprintf("f%d@acme.test", i), "sender": "s@example.com"}); resp.Status != http.StatusCreated {
				t.Fatalf("create %d: %d %s", i, resp.Status, resp.Body)
			}
		}
		c := dialSMTP(t, e.SMTP)
		if err := c.Mail("app@example.com", nil); err != nil {
			t.Fatal(err)
		}
		err := c.Rcpt("full@acme.test", nil)
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 452 || se.EnhancedCode != (smtp.EnhancedCode{4, 2, 2}) {
			t.Fatalf("RCPT to the full account: %v, want 452 4.2.2", err)
		}
		if strings.Contains(se.Message, "stores") || strings.ContainsAny(se.Message, "0123456789") {
			t.Errorf("an unauthenticated sender learns acme's figures: %q", se.Message)
		}
		if err := c.Rcpt("ok@globex.test", nil); err != nil {
			t.Fatalf("RCPT to globex: %v", err)
		}
		sendData(t, c, "From: app@example.com\r\nSubject: shared\r\n\r\nhi\r\n")
		if n := len(list(t, e, globex, "recipient=ok@globex.test")); n != 1 {
			t.Errorf("globex stores %d, want 1", n)
		}

		// globex's key, a delivery routed to acme's domain.
		f := &inboundtest.Form{Fields: map[string]string{
			"envelope": `{"to":["x@globex.test","y@acme.test"],"from":"a@example.com"}`,
			"email":    "From: a@example.com\r\nSubject: routed\r\n\r\nhi\r\n",
		}}
		body, ct := f.Multipart(t)
		resp := postProvider(t, e, "/v1/inbound/sendgrid", globex, ct, body)
		if resp.Status != http.StatusServiceUnavailable || strings.ContainsAny(string(resp.Body), "0123456789") {
			t.Errorf("globex's delivery to full acme: %d %s, want 503 (which SendGrid retries) without acme's figures", resp.Status, resp.Body)
		}
		if n := len(list(t, e, globex, "recipient=x@globex.test")); n != 0 {
			t.Errorf("globex stores %d of the refused delivery, want nothing", n)
		}
		// acme's own create still tells acme its figures.
		resp = e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{"recipient": "g@acme.test", "sender": "s@example.com"})
		if resp.Status != http.StatusTooManyRequests || !strings.Contains(string(resp.Body), "quota of 2 emails") {
			t.Errorf("acme's own create: %d %s, want 429 with its quota", resp.Status, resp.Body)
		}
	})
}

// A store that answers reads but refuses writes (Redis at maxmemory) gets
// clear answers: 507 over the API, 452 4.3.1 over SMTP, /readyz/writes 503
// and the writable gauge 0, while /readyz stays 200 so that the replica stays
// in service and mail can be deleted to make room; then it recovers.
func TestFullStore(t *testing.T) {
	t.Parallel()
	url := testenv.PrivateRedis(t, "--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
	checkFullStore(t, testenv.Backend{Name: "full-redis", Open: func(t *testing.T) store.Store {
		client, err := redisstore.NewClient(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return redisstore.New(client, redisstore.Options{Prefix: "full:"})
	}}, strings.Repeat("x", 200_000))
}

// The embedded store in memory (MAILSINK_DATA_DIR=:memory:) past its
// bound answers the same, and deletes make room again.
func TestFullStoreInMemory(t *testing.T) {
	t.Parallel()
	checkFullStore(t, testenv.Backend{Name: "full-memory", Open: func(t *testing.T) store.Store {
		st, err := pebblestore.OpenInMemory(16 << 20)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}}, "")
}

// checkFullStore fills the store b with creates of text (random when
// empty: the embedded store compresses) until it answers 507, then checks
// the answers of a full store and that deletes make room.
func checkFullStore(t *testing.T, b testenv.Backend, big string) {
	e := testenv.Start(t, b, nil)
	if big == "" {
		noise := make([]byte, 300_000)
		_, _ = rand.Read(noise)
		big = hex.EncodeToString(noise)
	}
	var ids []string
	for i := 0; ; i++ {
		resp := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "text": big})
		if resp.Status == http.StatusInsufficientStorage {
			break
		}
		if resp.Status != http.StatusCreated || i > 100 {
			t.Fatalf("create %d: %d %s; want 201 until the store is full, then 507", i, resp.Status, resp.Body)
		}
		ids = append(ids, resp.JSON(t)["item"].(map[string]any)["id"].(string))
	}
	// The message is as large as the creates that filled the store, and
	// its text must not compress: the Redis store keeps raw sources
	// compressed, and 200 KB of one letter would fit.
	noise := make([]byte, max(len(big)/2, 100_000))
	_, _ = rand.Read(noise)
	c := dialSMTP(t, e.SMTP)
	err := c.SendMail("app@example.com", []string{"r@acme.test"}, strings.NewReader("Subject: x\r\n\r\n"+hex.EncodeToString(noise)+"\r\n"))
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 452 || se.EnhancedCode != (smtp.EnhancedCode{4, 3, 1}) {
		t.Errorf("SMTP to a full store: %v, want 452 4.3.1", err)
	}
	if resp := get(t, e, "/readyz", ""); resp.Status != http.StatusOK {
		t.Errorf("/readyz with a full store: %d, want 200 (reads work)", resp.Status)
	}
	if resp := get(t, e, "/readyz/writes", ""); resp.Status != http.StatusServiceUnavailable || !strings.Contains(string(resp.Body), "full") {
		t.Errorf("/readyz/writes with a full store: %d %s, want 503 saying it is full", resp.Status, resp.Body)
	}
	if !strings.Contains(string(get(t, e, "/metrics", "").Body), "mailsink_store_writable 0") {
		t.Error("/metrics does not show mailsink_store_writable 0")
	}
	for _, id := range ids {
		if resp := e.Do(t, http.MethodDelete, "/v1/emails/"+id, acme, nil); resp.Status != http.StatusNoContent {
			t.Fatalf("delete from a full store: %d %s", resp.Status, resp.Body)
		}
	}
	// The embedded store gives the space back once its compactions have
	// dropped what was deleted.
	var last *testenv.Response
	testenv.WaitFor(t, 10*time.Second, "a create to succeed after making room", func() bool {
		last = e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "text": big})
		if last.Status != http.StatusCreated && last.Status != http.StatusInsufficientStorage {
			t.Fatalf("create after making room: %d %s", last.Status, last.Body)
		}
		return last.Status == http.StatusCreated
	})
	testenv.WaitFor(t, 10*time.Second, "/readyz/writes to answer 200 after recovery", func() bool {
		return get(t, e, "/readyz/writes", "").Status == http.StatusOK
	})
}

// A large body holding a turn must keep the data-rate floor, so that one
// slow upload cannot hold a turn for the whole read timeout.
func TestSlowLargeBodyLosesItsTurn(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], nil)
	msg := []byte("From: s@example.com\r\nTo: slow@acme.test\r\n\r\n" + strings.Repeat("a", 3<<20) + "\r\n")
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", pr)
		req.Header.Set("Authorization", "Bearer "+acme)
		req.ContentLength = int64(len(msg))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := pw.Write(msg[:3<<19]); err != nil {
		t.Fatal(err)
	}
	g := e.App.LargeGate()
	testenv.WaitFor(t, 5*time.Second, "the upload to hold a turn", func() bool { a, _ := g.Counts(); return a == 1 })
	// It stalls: the floor cuts it (5 s of grace, then 256 KiB/s).
	select {
	case code := <-done:
		if code != http.StatusRequestTimeout && code != 0 {
			t.Errorf("a stalled large upload: %d, want 408", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stalled large upload held its turn for 30 s")
	}
	pw.Close()
	testenv.WaitFor(t, 5*time.Second, "the turn to be given back", func() bool { a, _ := g.Counts(); return a == 0 })
	if n := len(list(t, e, acme, "recipient=slow%40acme.test")); n != 0 {
		t.Errorf("the cut upload stored %d emails", n)
	}
}

// TestBodiesShareMemory: request bodies' first MiB, held while they are
// read and used, come out of a budget of 64 MiB, of which one client
// address (and one account) holds at most half: stalled uploads from one
// address cannot grow the server's memory with their number, and another
// client and account go on.
func TestBodiesShareMemory(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], nil)
	budget := e.App.BodyBudget()
	const n, size = 40, 1 << 20
	var pipes []*io.PipeWriter
	done := make(chan struct{}, n)
	for range n {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		go func() {
			defer func() { done <- struct{}{} }()
			req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", pr)
			req.Header.Set("Authorization", "Bearer "+acme)
			req.ContentLength = size - 1 // all of it within the first MiB
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		go pw.Write(make([]byte, size/2)) // half, then stall
	}
	testenv.WaitFor(t, 10*time.Second, "the stalled uploads to fill the address's half", func() bool { return budget.Used() == 32<<20 })

	// Another client address, another account: not held up.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/emails", strings.NewReader(`{"recipient":"r@globex.test","sender":"s@example.com"}`))
	req.Header.Set("Authorization", "Bearer "+globex)
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("globex's create from another address: %d, want 201", resp.StatusCode)
	}
	if used := budget.Used(); used != 32<<20 {
		t.Errorf("budget used %d, want the stalled address's half, 32 MiB", used)
	}
	for _, pw := range pipes {
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}
	for range n {
		<-done
	}
	testenv.WaitFor(t, 10*time.Second, "the budget to be given back", func() bool { return budget.Used() == 0 })
}

// A JSON body that is not UTF-8 is refused with 400, on every route that
// takes one, and changes nothing: before, PATCH stored U+FFFD in place of
// the bad bytes.
func TestJSONBodyMustBeUTF8(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], nil)
	created := e.Do(t, http.MethodPost, "/v1/emails", acme, map[string]any{"recipient": "u@acme.test", "sender": "s@example.com"})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	id := created.JSON(t)["item"].(map[string]any)["id"].(string)
	bad := "{\"notes\":\"caf\xe9\"}"
	for _, c := range []struct{ method, path string }{
		{http.MethodPatch, "/v1/emails/" + id},
		{http.MethodPost, "/v1/emails"},
		{http.MethodPost, "/v1/faults"},
		{http.MethodPost, "/v1/webhooks"},
	} {
		resp := e.Do(t, c.method, c.path, acme, bad)
		if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), "UTF-8") {
			t.Errorf("%s %s with invalid UTF-8: %d %s, want 400 naming UTF-8", c.method, c.path, resp.Status, resp.Body)
		}
	}
	got := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil).JSON(t)["item"].(map[string]any)
	if got["notes"] != nil {
		t.Errorf("notes %q after the refused PATCH, want null", got["notes"])
	}
}

// withoutDigest is resp's list answer without the fields the search index
// fills in after the message is stored.
func withoutDigest(t *testing.T, resp *testenv.Response) map[string]any {
	t.Helper()
	doc := resp.JSON(t)
	items, _ := doc["items"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			delete(m, "fromName")
			delete(m, "snippet")
			delete(m, "attachmentCount")
		}
	}
	return doc
}
