package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/webhooks"
	"github.com/mailsink/mailsink/store"
)

const (
	acct      = "acct-hooks"
	otherAcct = "acct-other"
)

// testConfig has short timings so that retries happen within a test.
func testConfig() webhooks.Config {
	return webhooks.Config{
		MaxPerAccount:  10,
		MaxURLLength:   2048,
		PollInterval:   20 * time.Millisecond,
		AttemptTimeout: 2 * time.Second,
		Concurrency:    8,
		RetryBase:      50 * time.Millisecond,
		RetryMax:       200 * time.Millisecond,
		RetryFor:       time.Hour,
	}
}

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// worker is a running Service.
type worker struct {
	*webhooks.Service
	stop func()
}

// startWorker runs a Service on st, where acct allows private targets,
// until the test ends or stop is called.
func startWorker(t *testing.T, st store.Store, cfg webhooks.Config, dialer *webhooks.Dialer) *worker {
	t.Helper()
	s := webhooks.New(cfg, st.(store.Webhooks), st.(store.Events), nil, testLog(), nil, dialer)
	s.SetPrivateTargets([]string{acct})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &worker{Service: s, stop: stop}
}

// request is one delivery a receiver got.
type request struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// receiver is a webhook target on 127.0.0.1 that records every request and
// answers with its current handler (200 when nil).
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []request
	// answer, when set, answers request n (from 0).
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// restartOn serves again on addr after the server was closed.
func (rc *receiver) restartOn(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	rc.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(rc.serve)}}
	rc.srv.Start()
	t.Cleanup(rc.srv.Close)
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.got)
	rc.got = append(rc.got, request{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"),
		Signature: r.Header.Get("webhook-signature"), Body: body})
	answer := rc.answer
	rc.mu.Unlock()
	if answer != nil {
		answer(n, w, r)
	}
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

func (rc *receiver) count() int { return len(rc.requests()) }

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

// createWebhook stores a webhook of accountID for url with the service.
func createWebhook(t *testing.T, s *webhooks.Service, accountID, url string, f store.WebhookFilter, events ...store.EventType) *store.Webhook {
	t.Helper()
	if len(events) == 0 {
		events = []store.EventType{store.EmailCreated, store.EmailUpdated, store.EmailDeleted}
	}
	h, err := s.Create(context.Background(), store.Webhook{AccountID: accountID, URL: url, Events: events, Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// createEmail stores one email of accountID to rcpt with subject.
func createEmail(t *testing.T, st store.Store, accountID, rcpt, subject string) *store.Email {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	e := &store.Email{ID: store.NewID(), AccountID: accountID, Sender: "app@example.com", Recipient: rcpt,
		Subject: &subject, Status: store.StatusReceived, Labels: []string{}, RawSize: 10,
		ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
	body := &store.Body{Raw: []byte("Subject: x\r\n\r\nhi")}
	if err := st.CreateEmails(context.Background(), body, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	return e
}

// verify checks a request's signature the way the Standard Webhooks
// specification describes it, written here from the specification and not
// from the package: the signed content is "id.timestamp.body", the key is
// the base64-decoded part of the secret after "whsec_", the signature is
// HMAC-SHA256 in base64, and the header is a space-separated list of
// "v1,<signature>" entries, any of which may match; the timestamp must be
// within five minutes of now.
func verify(secret string, r request) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("secret: %v", err)
	}
	ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %v", r.Timestamp, err)
	}
	if d := time.Since(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %d is %s away from now", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.ID + "." + r.Timestamp + "." + string(r.Body)))
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(r.Signature) {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature in %q matches", r.Signature)
}

// backends are the stores a test runs on: the embedded one, and Redis when
// it answers.
func backends(t *testing.T) []testenv.Backend { return testenv.Backends(t) }

// deliveries returns the webhook's delivery log.
func deliveries(t *testing.T, s *webhooks.Service, h *store.Webhook) []*store.Delivery {
	t.Helper()
	ds, err := s.Store().ListDeliveries(context.Background(), h.AccountID, h.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}
