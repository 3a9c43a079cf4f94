package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/internal/relay"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// connections is how many SMTP connections the upstream has accepted.
func connections(up *testenv.Upstream) float64 {
	return testutil.ToFloat64(up.App.Metrics().SMTPConnections)
}

// source is the mailsink side: a store holding captured emails, and the
// release service over it with the account's relay entry.
type source struct {
	st      store.Store
	ingest  *ingest.Service
	svc     *relay.Service
	metrics *metrics.Releases
	log     *testenv.SyncBuffer
}

const accountID = "acme-id"

// allowAcme allows every address at acme.test.
const allowAcme = `.*@acme\.test`

func newSource(t *testing.T, relayYAML string, cfg relay.Config) *source {
	t.Helper()
	accs, err := config.ParseAccountsWith([]byte("accounts:\n  - {slug: acme, name: Acme, id: "+accountID+", apiKeys: [k], relay: "+relayYAML+"}\n"),
		func(string) string { return "" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	st := testenv.OpenEmbedded(t)
	t.Cleanup(func() { st.Close() })
	s := &source{st: st, ingest: ingest.New(st, time.Now, ingest.Config{}), metrics: metrics.NewReleases(prometheus.NewRegistry()),
		log: &testenv.SyncBuffer{}}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	cfg.Metrics, cfg.Log = s.metrics, slog.New(slog.NewTextHandler(s.log, nil))
	s.svc = relay.New(cfg, accounts.New(accs), bodies.New(st, bodies.Config{}))
	return s
}

// capture stores raw as captured mail from sender to recipient and
// returns its id.
func (s *source) capture(t *testing.T, sender, recipient, raw string) string {
	t.Helper()
	emails, err := s.ingest.Deliver(context.Background(), []byte(raw), ingest.Envelope{Sender: sender,
		Recipients: []ingest.Recipient{{Address: recipient, Account: &store.Account{ID: accountID, Slug: "acme"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return emails[0].ID
}

func (s *source) released(result string) float64 {
	return testutil.ToFloat64(s.metrics.Results.WithLabelValues(result))
}

// message is a raw source with what SMTP's DATA must carry exactly: lines
// that start with dots, a line that is one dot, and bytes that are not
// ASCII.
const message = "From: App <app@example.com>\r\nTo: qa@acme.test\r\nSubject: Welcome\r\n\r\n" +
	"Hello,\r\n.a line that starts with a dot\r\n..two dots\r\n.\r\nCaf\xc3\xa9 \xe9\r\n-- \r\nThe team\r\n"

func TestReleaseArrivesByteExact(t *testing.T) {
	t.Parallel()
	up := testenv.StartUpstream(t)
	for _, tc := range []struct{ name, relay string }{
		{"plain", up.Relay(config.RelayNone, allowAcme)},
		{"starttls with auth", up.Relay(config.RelayStartTLS, allowAcme)},
		{"implicit tls with auth", up.Relay(config.RelayTLS, allowAcme)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newSource(t, tc.relay, relay.Config{})
			rcpt := strings.ReplaceAll(tc.name, " ", "-") + "@acme.test"
			id := src.capture(t, "app@example.com", "qa@acme.test", message)
			reply, err := src.svc.Release(context.Background(), accountID, id, []string{rcpt})
			if err != nil {
				t.Fatalf("release: %v", err)
			}
			if reply.Code != 250 || !strings.Contains(reply.Text, "2.0.0") {
				t.Errorf("reply %d %q, want 250 with the upstream's text", reply.Code, reply.Text)
			}
			if got := up.Raws(t, rcpt); len(got) != 1 || got[0] != message {
				t.Errorf("the upstream stored %q, want the captured raw %q", got, message)
			}
			if n := src.released("released"); n != 1 {
				t.Errorf("mailsink_releases_total{result=released} = %v, want 1", n)
			}
			if strings.Contains(src.log.String(), testenv.AcmeKey) {
				t.Errorf("the log shows the relay's password:\n%s", src.log.String())
			}
			if !strings.Contains(src.log.String(), "email released") {
				t.Errorf("the release was not logged:\n%s", src.log.String())
			}
		})
	}

	t.Run("bare LF line ends go as CRLF", func(t *testing.T) {
		src := newSource(t, up.Relay(config.RelayNone, allowAcme), relay.Config{})
		lf := "From: app@example.com\nSubject: LF\n\nline one\n.dot\n"
		id := src.capture(t, "app@example.com", "qa@acme.test", lf)
		if _, err := src.svc.Release(context.Background(), accountID, id, []string{"lf@acme.test"}); err != nil {
			t.Fatal(err)
		}
		if got, want := up.Raws(t, "lf@acme.test"), strings.ReplaceAll(lf, "\n", "\r\n"); len(got) != 1 || got[0] != want {
			t.Errorf("the upstream stored %q, want %q", got, want)
		}
	})

	t.Run("the envelope sender is the relay's from, else the stored sender", func(t *testing.T) {
		for _, tc := range []struct{ from, want string }{{"", "bounce@example.com"}, {"release@acme.test", "release@acme.test"}} {
			relayYAML := up.Relay(config.RelayNone, allowAcme)
			if tc.from != "" {
				relayYAML = strings.Replace(relayYAML, "{", "{from: "+tc.from+", ", 1)
			}
			src := newSource(t, relayYAML, relay.Config{})
			rcpt := "from-" + strings.NewReplacer("@", "-", ".", "-").Replace(tc.want) + "@acme.test"
			id := src.capture(t, "bounce@example.com", "qa@acme.test", message)
			if _, err := src.svc.Release(context.Background(), accountID, id, []string{rcpt}); err != nil {
				t.Fatal(err)
			}
			resp := up.Do(t, http.MethodGet, "/v1/emails?recipient="+rcpt, testenv.AcmeKey, nil)
			items := resp.JSON(t)["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["sender"] != tc.want {
				t.Errorf("relay from %q: the upstream got %s, want sender %s", tc.from, resp.Body, tc.want)
			}
		}
	})
}

func TestReleaseRefusalsSendNothing(t *testing.T) {
	t.Parallel()
	up := testenv.StartUpstream(t)
	plain := up.Relay(config.RelayNone, allowAcme)

	t.Run("a recipient outside allowedRecipients", func(t *testing.T) {
		src := newSource(t, plain, relay.Config{})
		id := src.capture(t, "app@example.com", "qa@acme.test", message)
		before := connections(up)
		_, err := src.svc.Release(context.Background(), accountID, id, []string{"ok@acme.test", "boss@acme.test.evil.example"})
		var re *relay.RecipientsError
		if !store.IsCode(err, store.Invalid) || !errors.As(err, &re) || len(re.Refused) != 1 || re.Refused[0] != "boss@acme.test.evil.example" {
			t.Fatalf("error %v, want Invalid naming boss@acme.test.evil.example", err)
		}
		if connections(up) != before {
			t.Errorf("the upstream was connected to")
		}
	})

	t.Run("no relay, and no allowedRecipients", func(t *testing.T) {
		src := newSource(t, "null", relay.Config{})
		id := src.capture(t, "app@example.com", "qa@acme.test", message)
		if _, err := src.svc.Release(context.Background(), accountID, id, []string{"ok@acme.test"}); !store.IsCode(err, store.Conflict) {
			t.Errorf("without a relay: error %v, want Conflict", err)
		}
		src = newSource(t, up.Relay(config.RelayNone), relay.Config{})
		id = src.capture(t, "app@example.com", "qa@acme.test", message)
		if _, err := src.svc.Release(context.Background(), accountID, id, []string{"ok@acme.test"}); !store.IsCode(err, store.Invalid) {
			t.Errorf("without allowedRecipients: error %v, want Invalid", err)
		}
	})

	t.Run("an email that is not there", func(t *testing.T) {
		src := newSource(t, plain, relay.Config{})
		if _, err := src.svc.Release(context.Background(), accountID, "0190b6d2-7c3e-7a1b-8c2d-1234567890ab", []string{"ok@acme.test"}); !store.IsCode(err, store.NotFound) {
			t.Errorf("error %v, want NotFound", err)
		}
	})

	t.Run("the upstream refuses a recipient", func(t *testing.T) {
		rule := up.Do(t, http.MethodPost, "/v1/faults", testenv.AcmeKey, map[string]any{"stage": "rcpt", "recipient": "refused@acme.test",
			"reply": map[string]any{"code": 550, "text": "5.1.1 No such user"}})
		if rule.Status != http.StatusCreated {
			t.Fatalf("fault rule: %d %s", rule.Status, rule.Body)
		}
		src := newSource(t, plain, relay.Config{})
		id := src.capture(t, "app@example.com", "qa@acme.test", message)
		_, err := src.svc.Release(context.Background(), accountID, id, []string{"also@acme.test", "refused@acme.test"})
		var ue *relay.UpstreamError
		if !store.IsCode(err, store.Upstream) || !errors.As(err, &ue) || ue.Reply == nil || ue.Reply.Code != 550 || ue.Reply.Text != "5.1.1 No such user" {
			t.Fatalf("error %v, want Upstream with the reply 550 5.1.1 No such user", err)
		}
		if !strings.Contains(err.Error(), "refused RCPT TO:<refused@acme.test>: 550 5.1.1 No such user") {
			t.Errorf("message %q does not say which command was refused and how", err)
		}
		if got := up.Raws(t, "also@acme.test"); len(got) != 0 {
			t.Errorf("a message one recipient refused reached the other: %q", got)
		}
		if src.released("refused") != 1 {
			t.Errorf("mailsink_releases_total{result=refused} = %v, want 1", src.released("refused"))
		}
	})

	t.Run("wrong AUTH credentials", func(t *testing.T) {
		src := newSource(t, strings.Replace(up.Relay(config.RelayStartTLS, allowAcme), testenv.AcmeKey, "wrong-key", 1), relay.Config{})
		id := src.capture(t, "app@example.com", "qa@acme.test", message)
		_, err := src.svc.Release(context.Background(), accountID, id, []string{"auth@acme.test"})
		var ue *relay.UpstreamError
		if !errors.As(err, &ue) || ue.Reply == nil || ue.Reply.Code != 535 || !strings.Contains(err.Error(), "refused AUTH") {
			t.Errorf("error %v, want the upstream's 535 to AUTH", err)
		}
		if strings.Contains(src.log.String(), "wrong-key") || strings.Contains(err.Error(), "wrong-key") {
			t.Errorf("the password shows in the error or the log:\n%v\n%s", err, src.log.String())
		}
	})

	t.Run("a certificate that caFile does not vouch for", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(up.SMTP)
		src := newSource(t, fmt.Sprintf(`{host: localhost, port: %s, allowedRecipients: ['.*@acme\.test']}`, port), relay.Config{})
		id := src.capture(t, "app@example.com", "qa@acme.test", message)
		_, err := src.svc.Release(context.Background(), accountID, id, []string{"untrusted@acme.test"})
		if !store.IsCode(err, store.Upstream) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("error %v, want a certificate failure", err)
		}
		if got := up.Raws(t, "untrusted@acme.test"); len(got) != 0 {
			t.Errorf("the message went over an unverified connection: %q", got)
		}
	})

	t.Run("an upstream that is down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, dead, _ := net.SplitHostPort(ln.Addr().String())
		ln.Close()
		src := newSource(t, fmt.Sprintf(`{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: ['.*@acme\.test']}`, dead), relay.Config{})
		id := src.capture(t, "app@example.com", "qa@acme.test", message)
		_, err = src.svc.Release(context.Background(), accountID, id, []string{"ok@acme.test"})
		var ue *relay.UpstreamError
		if !store.IsCode(err, store.Upstream) || !errors.As(err, &ue) || ue.Reply != nil || !strings.Contains(err.Error(), "connecting") {
			t.Errorf("error %v, want Upstream without a reply, failing at connecting", err)
		}
		if src.released("failed") != 1 {
			t.Errorf("mailsink_releases_total{result=failed} = %v, want 1", src.released("failed"))
		}
	})
}

// silentServer accepts connections and never says a word; open tells how
// many of them are open.
func silentServer(t *testing.T) (port string, open func() int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() { io.Copy(io.Discard, c); c.Close(); n.Add(-1) }()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, n.Load
}

func TestReleaseStopsAtItsTimeoutAndWithItsRequest(t *testing.T) {
	t.Parallel()
	port, open := silentServer(t)
	src := newSource(t, fmt.Sprintf(`{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: ['.*@acme\.test']}`, port),
		relay.Config{Timeout: 300 * time.Millisecond})
	id := src.capture(t, "app@example.com", "qa@acme.test", message)
	start := time.Now()
	_, err := src.svc.Release(context.Background(), accountID, id, []string{"ok@acme.test"})
	if !store.IsCode(err, store.Upstream) || !strings.Contains(err.Error(), "MAILSINK_RELEASE_TIMEOUT") {
		t.Errorf("error %v, want a timeout naming MAILSINK_RELEASE_TIMEOUT", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a silent upstream held the release %s, with a timeout of 300ms", d)
	}

	port, open = silentServer(t)
	src = newSource(t, fmt.Sprintf(`{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: ['.*@acme\.test']}`, port),
		relay.Config{Timeout: time.Minute})
	id = src.capture(t, "app@example.com", "qa@acme.test", message)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := src.svc.Release(ctx, accountID, id, []string{"ok@acme.test"})
		done <- err
	}()
	testenv.WaitFor(t, 5*time.Second, "the release to connect", func() bool { return open() == 1 })
	cancel()
	select {
	case err := <-done:
		if !strings.Contains(fmt.Sprint(err), "the request ended") {
			t.Errorf("error %v, want one saying the request ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the release went on after its request ended")
	}
}

func TestReleaseRateAndConcurrencyPerAccount(t *testing.T) {
	t.Parallel()
	up := testenv.StartUpstream(t)
	src := newSource(t, up.Relay(config.RelayNone, allowAcme), relay.Config{PerMinute: 2})
	id := src.capture(t, "app@example.com", "qa@acme.test", message)
	for i := range 2 {
		if _, err := src.svc.Release(context.Background(), accountID, id, []string{"rate@acme.test"}); err != nil {
			t.Fatalf("release %d of 2 per minute: %v", i+1, err)
		}
	}
	_, err := src.svc.Release(context.Background(), accountID, id, []string{"rate@acme.test"})
	var le *relay.LimitError
	if !store.IsCode(err, store.QuotaExceeded) || !errors.As(err, &le) || le.Wait <= 0 || le.Wait > 31*time.Second {
		t.Fatalf("the third release in a minute: error %v, want QuotaExceeded with a wait of up to 30s", err)
	}
	if got := up.Raws(t, "rate@acme.test"); len(got) != 2 {
		t.Errorf("the upstream got %d messages, want 2", len(got))
	}
	if src.released("limited") != 1 {
		t.Errorf("mailsink_releases_total{result=limited} = %v, want 1", src.released("limited"))
	}

	// Releases under way at once are bounded per account.
	silent, open := silentServer(t)
	src = newSource(t, fmt.Sprintf(`{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: ['.*@acme\.test']}`, silent),
		relay.Config{Timeout: time.Minute})
	id = src.capture(t, "app@example.com", "qa@acme.test", message)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := src.svc.Release(ctx, accountID, id, []string{"held@acme.test"})
			errs <- err
		}()
	}
	limited := 0
	for range 4 {
		if err := <-errs; errors.As(err, &le) {
			limited++
		}
	}
	testenv.WaitFor(t, 5*time.Second, "4 connections to the silent upstream", func() bool { return open() == 4 })
	if limited != 4 {
		t.Errorf("8 releases at once against a silent upstream: %d refused at once, want 4 (4 under way)", limited)
	}
}

func TestReleaseEach(t *testing.T) {
	t.Parallel()
	up := testenv.StartUpstream(t)
	plain := up.Relay(config.RelayNone, allowAcme)
	rule := up.Do(t, http.MethodPost, "/v1/faults", testenv.AcmeKey, map[string]any{"stage": "rcpt", "sender": "refused@example.com",
		"reply": map[string]any{"code": 553, "text": "5.7.1 Sender refused"}})
	if rule.Status != http.StatusCreated {
		t.Fatalf("fault rule: %d %s", rule.Status, rule.Body)
	}

	src := newSource(t, plain, relay.Config{PerMinute: 3})
	first := src.capture(t, "app@example.com", "qa@acme.test", message)
	refused := src.capture(t, "refused@example.com", "qa@acme.test", message)
	gone := src.capture(t, "app@example.com", "qa@acme.test", message)
	if err := src.st.DeleteEmail(context.Background(), accountID, gone); err != nil {
		t.Fatal(err)
	}
	last := src.capture(t, "app@example.com", "qa@acme.test", strings.Replace(message, "Welcome", "Last", 1))
	limited := src.capture(t, "app@example.com", "qa@acme.test", message)

	results, err := src.svc.ReleaseEach(context.Background(), accountID, []string{first, refused, gone, last, limited}, []string{"bulk@acme.test"})
	if err != nil {
		t.Fatal(err)
	}
	var le *relay.LimitError
	for i, check := range []struct {
		id   string
		ok   func(relay.Result) bool
		want string
	}{
		{first, func(r relay.Result) bool { return r.Err == nil && r.Reply.Code == 250 }, "released"},
		{refused, func(r relay.Result) bool {
			return store.IsCode(r.Err, store.Upstream) && r.Reply != nil && r.Reply.Code == 553
		}, "refused with 553"},
		{gone, func(r relay.Result) bool { return store.IsCode(r.Err, store.NotFound) && r.Reply == nil }, "not found"},
		{last, func(r relay.Result) bool { return r.Err == nil && r.Reply.Code == 250 }, "released after a refusal on the same connection"},
		{limited, func(r relay.Result) bool { return errors.As(r.Err, &le) && r.Reply == nil }, "not sent: past the rate"},
	} {
		if results[i].ID != check.id || !check.ok(results[i]) {
			t.Errorf("result %d: %+v (reply %v), want %s", i, results[i], results[i].Reply, check.want)
		}
	}
	got := up.Raws(t, "bulk@acme.test")
	if len(got) != 2 || got[0] != strings.Replace(message, "Welcome", "Last", 1) || got[1] != message {
		t.Errorf("the upstream stored %q, want the first and the last email, byte-exact", got)
	}
	if n := connections(up); n != 1 {
		t.Errorf("the bulk release made %v connections, want 1", n)
	}

	// An upstream that is down: nothing is sent, and the caller hears it.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	_, dead, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	src = newSource(t, fmt.Sprintf(`{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: ['.*@acme\.test']}`, dead), relay.Config{})
	id := src.capture(t, "app@example.com", "qa@acme.test", message)
	if results, err := src.svc.ReleaseEach(context.Background(), accountID, []string{id}, []string{"bulk@acme.test"}); !store.IsCode(err, store.Upstream) || results != nil {
		t.Errorf("to an upstream that is down: %v, %v; want an Upstream error and no results", results, err)
	}
}
