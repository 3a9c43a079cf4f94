package webhooks_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/webhooks"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
	"github.com/mailsink/mailsink/store/redisstore"
)

// TestSignStandardWebhooksVector checks Sign against the example of the
// Standard Webhooks specification's reference libraries.
func TestSignStandardWebhooksVector(t *testing.T) {
	got, err := webhooks.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// TestDeliverySigned: an email's creation, update and deletion reach the
// receiver, each signed so that an independent verifier accepts it, with
// the email summary (or, deleted, its id) as data.
func TestDeliverySigned(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			rc := newReceiver(t)
			w := startWorker(t, st, testConfig(), nil)
			h := createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{})
			e := createEmail(t, st, acct, "user@acme.test", "Your code is 123456")
			if _, err := st.UpdateEmail(context.Background(), acct, e.ID, store.Update{Labels: &[]string{"seen"}, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if err := st.DeleteEmail(context.Background(), acct, e.ID); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 10*time.Second, "three deliveries", func() bool { return rc.count() >= 3 })
			types := map[string]bool{}
			for _, r := range rc.requests() {
				if err := verify(h.Secret, r); err != nil {
					t.Fatalf("delivery %s: %v", r.ID, err)
				}
				var p struct {
					Type      string         `json:"type"`
					Timestamp string         `json:"timestamp"`
					Data      map[string]any `json:"data"`
				}
				if err := json.Unmarshal(r.Body, &p); err != nil {
					t.Fatalf("body %s: %v", r.Body, err)
				}
				if p.Data["id"] != e.ID || p.Timestamp == "" {
					t.Fatalf("body %s: want data.id %s and a timestamp", r.Body, e.ID)
				}
				if p.Type == "email.created" && (p.Data["recipient"] != "user@acme.test" || p.Data["subject"] != "Your code is 123456") {
					t.Fatalf("created body %s lacks the summary", r.Body)
				}
				if !strings.HasPrefix(r.ID, "msg_") {
					t.Fatalf("webhook-id %q", r.ID)
				}
				types[p.Type] = true
			}
			if len(types) != 3 {
				t.Fatalf("event types delivered: %v", types)
			}
			// A wrong secret does not verify: the verifier is not lenient.
			if err := verify(webhooks.NewSecret(), rc.requests()[0]); err == nil {
				t.Fatal("a request verified with another secret")
			}
		})
	}
}

// TestFilters: a webhook gets only its event types and the emails its
// filters match; another account's emails never.
func TestFilters(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	rc := newReceiver(t)
	w := startWorker(t, st, testConfig(), nil)
	createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{Recipient: "A@acme.test", Subject: "CODE"}, store.EmailCreated)
	createEmail(t, st, otherAcct, "a@acme.test", "code 1")
	createEmail(t, st, acct, "b@acme.test", "code 2")
	createEmail(t, st, acct, "a@acme.test", "hello")
	want := createEmail(t, st, acct, "a@acme.test", "your Code: 3")
	testenv.WaitFor(t, 10*time.Second, "a delivery", func() bool { return rc.count() >= 1 })
	// A later matching email proves the earlier ones were passed over.
	last := createEmail(t, st, acct, "a@acme.test", "code 4")
	testenv.WaitFor(t, 10*time.Second, "a second delivery", func() bool { return rc.count() >= 2 })
	reqs := rc.requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), want.ID) || !strings.Contains(string(reqs[1].Body), last.ID) {
		t.Fatalf("deliveries: %d, want exactly the two matching emails", len(reqs))
	}
}

// TestRetryAfter500KeepsID: a receiver that answers 500 twice gets the
// same webhook-id three times, each attempt freshly signed; the log shows
// the success after three attempts.
func TestRetryAfter500KeepsID(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			rc := newReceiver(t)
			rc.answer = func(n int, w http.ResponseWriter, _ *http.Request) {
				if n < 2 {
					http.Error(w, "down for maintenance", http.StatusInternalServerError)
				}
			}
			w := startWorker(t, st, testConfig(), nil)
			h := createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{})
			createEmail(t, st, acct, "user@acme.test", "hi")
			testenv.WaitFor(t, 10*time.Second, "the log to show success", func() bool {
				ds := deliveries(t, w.Service, h)
				return len(ds) == 1 && ds[0].Status == store.DeliverySucceeded
			})
			reqs := rc.requests()
			if len(reqs) != 3 {
				t.Fatalf("got %d requests, want 3", len(reqs))
			}
			for _, r := range reqs {
				if r.ID != reqs[0].ID {
					t.Fatalf("webhook-id changed between attempts: %s, %s", reqs[0].ID, r.ID)
				}
				if err := verify(h.Secret, r); err != nil {
					t.Fatal(err)
				}
			}
			d := deliveries(t, w.Service, h)[0]
			if d.Attempts != 3 || d.LastStatusCode != 200 || d.ID != reqs[0].ID {
				t.Fatalf("log entry %+v, want 3 attempts ending in 200", d)
			}
		})
	}
}

// TestRetryAfterOutage: while the receiver is down the attempts fail (the
// log says why) and once it is back the event arrives with its webhook-id.
func TestRetryAfterOutage(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	rc := newReceiver(t)
	addr := rc.srv.Listener.Addr().String()
	url := rc.url()
	rc.srv.Close()
	w := startWorker(t, st, testConfig(), nil)
	h := createWebhook(t, w.Service, acct, url, store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "hi")
	testenv.WaitFor(t, 10*time.Second, "two failed attempts", func() bool {
		ds := deliveries(t, w.Service, h)
		return len(ds) == 1 && ds[0].Attempts >= 2
	})
	failed := deliveries(t, w.Service, h)[0]
	if failed.Status != store.DeliveryPending || failed.LastError == "" || failed.LastStatusCode != 0 {
		t.Fatalf("during the outage the log says %+v", failed)
	}
	rc.restartOn(t, addr)
	testenv.WaitFor(t, 10*time.Second, "the delivery after the outage", func() bool { return rc.count() >= 1 })
	if got := rc.requests()[0]; got.ID != failed.ID {
		t.Fatalf("webhook-id after the outage %s, want %s", got.ID, failed.ID)
	}
}

// TestRestartMidRetry: the process stops while a delivery waits for its
// next attempt, and events arrive while no worker runs; a new process on
// the same store delivers both, the first with its webhook-id.
func TestRestartMidRetry(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		path := t.TempDir() + "/store"
		open := func() store.Store {
			st, err := pebblestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		restartMidRetry(t, open)
	})
	t.Run("redis", func(t *testing.T) {
		url := testenv.RedisURL(t)
		if url == "" {
			t.Skip("Redis is not available")
		}
		prefix := "mailsink-test:" + testenv.RandomHex(6) + ":"
		t.Cleanup(func() { testenv.DeletePrefix(t, url, prefix) })
		open := func() store.Store {
			client, err := redisstore.NewClient(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			return redisstore.New(client, redisstore.Options{Prefix: prefix})
		}
		restartMidRetry(t, open)
	})
}

func restartMidRetry(t *testing.T, open func() store.Store) {
	rc := newReceiver(t)
	rc.answer = func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
	cfg := testConfig()
	// The next attempt is due a second after the first: the restart
	// happens in between (and if it is slower, the new process makes the
	// attempt when it is up: either way by the new process).
	cfg.RetryBase, cfg.RetryMax = time.Second, time.Second
	st := open()
	w := startWorker(t, st, cfg, nil)
	h := createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "first")
	testenv.WaitFor(t, 10*time.Second, "a failed attempt", func() bool {
		ds := deliveries(t, w.Service, h)
		return len(ds) == 1 && ds[0].Attempts == 1
	})
	w.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	first := rc.requests()
	if len(first) != 1 {
		t.Fatalf("before the restart the receiver got %d requests, want 1", len(first))
	}

	rc.mu.Lock()
	rc.answer = nil
	rc.mu.Unlock()
	st = open()
	defer st.Close()
	// An event while no worker runs.
	second := createEmail(t, st, acct, "user@acme.test", "second")
	w2 := startWorker(t, st, cfg, nil)
	testenv.WaitFor(t, 10*time.Second, "both deliveries", func() bool {
		got := map[string]bool{}
		for _, r := range rc.requests()[1:] {
			if r.ID == first[0].ID || strings.Contains(string(r.Body), second.ID) {
				got[r.ID] = true
			}
		}
		return len(got) == 2
	})
	testenv.WaitFor(t, 10*time.Second, "the log to show the first delivery's success", func() bool {
		for _, d := range deliveries(t, w2.Service, h) {
			if d.ID == first[0].ID {
				return d.Status == store.DeliverySucceeded
			}
		}
		return false
	})
	for _, d := range deliveries(t, w2.Service, h) {
		if d.ID == first[0].ID && d.Attempts != 2 {
			t.Fatalf("the first delivery after the restart took %d attempts, want 2", d.Attempts)
		}
	}
}

// TestTwoReplicasDeliverOnce: two workers on one Redis each deliver an
// event once when the receiver answers at once.
func TestTwoReplicasDeliverOnce(t *testing.T) {
	b := testenv.SharedRedis(t)
	st1, st2 := b.Open(t), b.Open(t)
	defer st1.Close()
	defer st2.Close()
	rc := newReceiver(t)
	w1 := startWorker(t, st1, testConfig(), nil)
	startWorker(t, st2, testConfig(), nil)
	h := createWebhook(t, w1.Service, acct, rc.url(), store.WebhookFilter{})
	const n = 30
	for i := range n {
		st := st1
		if i%2 == 1 {
			st = st2
		}
		createEmail(t, st, acct, "user@acme.test", "hello")
	}
	// Once every delivery is recorded as succeeded none can be claimed
	// again, so the count is final.
	testenv.WaitFor(t, 20*time.Second, "every delivery to succeed", func() bool {
		ds := deliveries(t, w1.Service, h)
		if len(ds) != n {
			return false
		}
		for _, d := range ds {
			if d.Status != store.DeliverySucceeded {
				return false
			}
		}
		return true
	})
	seen := map[string]int{}
	for _, r := range rc.requests() {
		seen[r.ID]++
	}
	if len(seen) != n {
		t.Fatalf("%d distinct deliveries, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("delivery %s arrived %d times", id, c)
		}
	}
}

// TestMetadataTargetRefused: a host name that resolves to a metadata
// address is refused at every attempt, even for an account that allows
// private targets; one that resolves to loopback is refused for an account
// that does not, and reached by one that does, whose pooled connection to
// it the other account must not get.
func TestMetadataTargetRefused(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	rc := newReceiver(t)
	_, port, _ := net.SplitHostPort(rc.srv.Listener.Addr().String())
	dialer := &webhooks.Dialer{LookupHost: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "metadata.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "aws6.test":
			return []netip.Addr{netip.MustParseAddr("fd00:ec2::254")}, nil
		case "loopback.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &netDNSError{host}
	}}
	w := startWorker(t, st, testConfig(), dialer)
	meta := createWebhook(t, w.Service, acct, "http://metadata.test:"+port+"/latest/meta-data", store.WebhookFilter{})
	aws6 := createWebhook(t, w.Service, acct, "http://aws6.test:"+port+"/", store.WebhookFilter{})
	private := createWebhook(t, w.Service, otherAcct, "http://loopback.test:"+port+"/", store.WebhookFilter{})
	allowed := createWebhook(t, w.Service, acct, "http://loopback.test:"+port+"/ok", store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "hi")
	createEmail(t, st, otherAcct, "user@other.test", "hi")
	testenv.WaitFor(t, 10*time.Second, "the allowed delivery", func() bool { return rc.count() >= 1 })
	for _, h := range []*store.Webhook{meta, aws6, private} {
		testenv.WaitFor(t, 10*time.Second, "two refused attempts to "+h.URL, func() bool {
			ds := deliveries(t, w.Service, h)
			return len(ds) == 1 && ds[0].Attempts >= 2
		})
		d := deliveries(t, w.Service, h)[0]
		if !strings.Contains(d.LastError, "refused") || d.Status != store.DeliveryPending {
			t.Fatalf("%s: log %+v, want a refusal", h.URL, d)
		}
	}
	if rc.count() != 1 || deliveries(t, w.Service, allowed)[0].Status != store.DeliverySucceeded {
		t.Fatalf("receiver got %d requests, want only the allowed one", rc.count())
	}
}

type netDNSError struct{ host string }

func (e *netDNSError) Error() string { return "no such host " + e.host }

// TestRedirectNotFollowed: a redirect is a failed attempt, and its target
// gets nothing.
func TestRedirectNotFollowed(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	target := newReceiver(t)
	rc := newReceiver(t)
	rc.answer = func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.url(), http.StatusTemporaryRedirect)
	}
	w := startWorker(t, st, testConfig(), nil)
	h := createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "hi")
	testenv.WaitFor(t, 10*time.Second, "two attempts", func() bool {
		ds := deliveries(t, w.Service, h)
		return len(ds) == 1 && ds[0].Attempts >= 2
	})
	d := deliveries(t, w.Service, h)[0]
	if d.LastStatusCode != http.StatusTemporaryRedirect || !strings.Contains(d.LastError, "redirect") || target.count() != 0 {
		t.Fatalf("log %+v, redirect target got %d requests", d, target.count())
	}
}

// TestSlowReceiversBounded: a receiver that never answers is cut off at the
// attempt timeout, and one that streams a huge body slowly is read for at
// most 256 bytes; neither holds its delivery past the timeout.
func TestSlowReceiversBounded(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	release := make(chan struct{})
	defer close(release)
	hang := newReceiver(t)
	hang.answer = func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	huge := newReceiver(t)
	huge.answer = func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 10_000 { // 640 MB, slowly
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	cfg := testConfig()
	cfg.AttemptTimeout = 300 * time.Millisecond
	w := startWorker(t, st, cfg, nil)
	hh := createWebhook(t, w.Service, acct, hang.url(), store.WebhookFilter{})
	hb := createWebhook(t, w.Service, acct, huge.url(), store.WebhookFilter{})
	start := time.Now()
	createEmail(t, st, acct, "user@acme.test", "hi")
	for _, h := range []*store.Webhook{hh, hb} {
		testenv.WaitFor(t, 10*time.Second, "two attempts to "+h.URL, func() bool {
			ds := deliveries(t, w.Service, h)
			return len(ds) == 1 && ds[0].Attempts >= 2
		})
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("two attempts each took %s", d)
	}
	if d := deliveries(t, w.Service, hh)[0]; !strings.Contains(d.LastError, "no answer within") {
		t.Fatalf("hanging receiver: log %+v", d)
	}
	if d := deliveries(t, w.Service, hb)[0]; len(d.LastResponse) > 256 || d.LastStatusCode != 500 {
		t.Fatalf("huge body: kept %d bytes, status %d", len(d.LastResponse), d.LastStatusCode)
	}
}

// TestGiveUpDisables: a delivery that fails for the whole retry period is
// given up, and its webhook disabled with the reason.
func TestGiveUpDisables(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	rc := newReceiver(t)
	rc.answer = func(_ int, w http.ResponseWriter, _ *http.Request) { http.Error(w, "nope", http.StatusBadGateway) }
	cfg := testConfig()
	cfg.RetryFor = 300 * time.Millisecond
	w := startWorker(t, st, cfg, nil)
	h := createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "hi")
	testenv.WaitFor(t, 10*time.Second, "the webhook to be disabled", func() bool {
		got, err := w.Store().GetWebhook(context.Background(), acct, h.ID)
		return err == nil && got.DisabledAt != nil
	})
	got, _ := w.Store().GetWebhook(context.Background(), acct, h.ID)
	if !strings.Contains(got.DisabledReason, "502") {
		t.Fatalf("reason %q does not say what failed", got.DisabledReason)
	}
	testenv.WaitFor(t, 5*time.Second, "the delivery to be given up", func() bool {
		ds := deliveries(t, w.Service, h)
		return len(ds) == 1 && ds[0].Status == store.DeliveryFailed
	})
	// A disabled webhook gets no new deliveries.
	n := rc.count()
	createEmail(t, st, acct, "user@acme.test", "again")
	other := createWebhook(t, w.Service, acct, newReceiver(t).url(), store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "third")
	testenv.WaitFor(t, 10*time.Second, "the other webhook's delivery", func() bool {
		return len(deliveries(t, w.Service, other)) >= 1
	})
	if len(deliveries(t, w.Service, h)) != 1 || rc.count() != n {
		t.Fatal("a disabled webhook got new deliveries")
	}
}

// TestStopQueuesLastEvents: events stored after the worker's last round
// are queued when it stops, so that the embedded store, whose events live
// in memory, does not lose them with the process.
func TestStopQueuesLastEvents(t *testing.T) {
	path := t.TempDir() + "/store"
	st, err := pebblestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	cfg := testConfig()
	cfg.PollInterval = time.Hour // one round at the start, then only the last one
	w := startWorker(t, st, cfg, nil)
	h := createWebhook(t, w.Service, acct, rc.url(), store.WebhookFilter{})
	e := createEmail(t, st, acct, "user@acme.test", "just before the stop")
	w.stop()
	if got := deliveries(t, w.Service, h); len(got) != 1 || got[0].EmailID != e.ID {
		t.Fatalf("after the stop the log holds %d deliveries, want the last email's", len(got))
	}
	st.Close()
	st, err = pebblestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	startWorker(t, st, testConfig(), nil)
	testenv.WaitFor(t, 10*time.Second, "the delivery after the restart", func() bool { return rc.count() == 1 })
	if !strings.Contains(string(rc.requests()[0].Body), e.ID) {
		t.Fatalf("delivered %s", rc.requests()[0].Body)
	}
}

// TestMetrics: attempts are counted by outcome.
func TestMetrics(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	rc := newReceiver(t)
	rc.answer = func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewWebhooks(reg)
	s := webhooks.New(testConfig(), st.(store.Webhooks), st.(store.Events), nil, testLog(), m, nil)
	s.SetPrivateTargets([]string{acct})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	createWebhook(t, s, acct, rc.url(), store.WebhookFilter{})
	createWebhook(t, s, acct, "http://169.254.169.254/", store.WebhookFilter{})
	createEmail(t, st, acct, "user@acme.test", "hi")
	testenv.WaitFor(t, 10*time.Second, "a success", func() bool {
		return testutil.ToFloat64(m.Attempts.WithLabelValues("success")) == 1
	})
	testenv.WaitFor(t, 10*time.Second, "a refusal", func() bool {
		return testutil.ToFloat64(m.Attempts.WithLabelValues("refused_address")) >= 1
	})
	if got := testutil.ToFloat64(m.Attempts.WithLabelValues("http_error")); got != 1 {
		t.Fatalf("http_error attempts = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "mailsink_webhook_attempts_total"); err != nil || n != len(metrics.WebhookOutcomes) {
		t.Fatalf("attempts series = %d (%v), want the %d outcomes only", n, err, len(metrics.WebhookOutcomes))
	}
}

// racingEvents runs race once, at the first EventsAfter after it is armed:
// between the worker's reading of the webhooks and of the events.
type racingEvents struct {
	store.Events
	armed atomic.Bool
	race  func()
}

func (r *racingEvents) EventsAfter(ctx context.Context, accountID, afterID string) ([]store.Event, bool, error) {
	if r.armed.CompareAndSwap(true, false) {
		r.race()
	}
	return r.Events.EventsAfter(ctx, accountID, afterID)
}

// TestWebhookMadeDuringFanOut: a webhook made while the worker fans events
// out, after it read the webhooks, gets the events made after it, not only
// the webhooks the worker had read.
func TestWebhookMadeDuringFanOut(t *testing.T) {
	st := testenv.OpenEmbedded(t)
	defer st.Close()
	events := &racingEvents{Events: st}
	s := webhooks.New(testConfig(), st.(store.Webhooks), events, nil, testLog(), nil, nil)
	s.SetPrivateTargets([]string{acct})
	first, late := newReceiver(t), newReceiver(t)
	h := createWebhook(t, s, acct, first.url(), store.WebhookFilter{})
	var other atomic.Pointer[store.Webhook]
	events.race = func() { // on the worker's goroutine: t.Error only
		ctx := context.Background()
		w, err := s.Create(ctx, store.Webhook{AccountID: acct, URL: late.url(),
			Events: []store.EventType{store.EmailCreated}})
		if err != nil {
			t.Error(err)
			return
		}
		other.Store(w)
		now := time.Now().UTC().Truncate(time.Millisecond)
		subject := "after the webhook"
		e := &store.Email{ID: store.NewID(), AccountID: acct, Sender: "app@example.com", Recipient: "user@acme.test",
			Subject: &subject, Status: store.StatusReceived, Labels: []string{}, RawSize: 10,
			ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
		body := &store.Body{Raw: []byte("Subject: x\r\n\r\nhi")}
		if err := st.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
			t.Error(err)
			return
		}
		// Until the email's event is there for the worker's read.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			evs, _, err := st.(store.Events).EventsAfter(ctx, acct, eventhub.ID{}.String())
			if err == nil && slices.ContainsFunc(evs, func(ev store.Event) bool { return ev.EmailID == e.ID }) {
				return
			}
			runtime.Gosched()
		}
		t.Error("the email's event did not come")
	}
	events.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	createEmail(t, st, acct, "user@acme.test", "before")
	testenv.WaitFor(t, 10*time.Second, "the late webhook's delivery", func() bool {
		w := other.Load()
		return w != nil && len(deliveries(t, s, w)) >= 1
	})
	if len(deliveries(t, s, h)) < 2 {
		t.Errorf("the first webhook has %d deliveries, want both emails'", len(deliveries(t, s, h)))
	}
}
