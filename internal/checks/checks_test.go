package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// countingReader counts the reads of emails' content.
type countingReader struct {
	*bodies.Service
	n atomic.Int32
}

func (c *countingReader) Parsed(ctx context.Context, accountID, id string) (*bodies.Read, error) {
	c.n.Add(1)
	return c.Service.Parsed(ctx, accountID, id)
}

type fixture struct {
	st     store.Store
	reads  *countingReader
	checks *Service
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reads := &countingReader{Service: bodies.New(st, bodies.Config{})}
	s, err := New(reads, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st, reads, s}
}

var next atomic.Int64

// add stores an email of the account whose HTML part is html.
func (f *fixture) add(t *testing.T, accountID, html string) string {
	t.Helper()
	id := store.NewID()
	raw := "From: a@example.com\r\nTo: b@example.com\r\nSubject: x\r\nContent-Type: text/html\r\n\r\n" + html + "\r\n"
	now := time.Now().UTC().Truncate(time.Millisecond).Add(time.Duration(next.Add(1)) * time.Millisecond)
	e := &store.Email{ID: id, AccountID: accountID, Sender: "a@example.com", Recipient: "b@example.com",
		Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)), ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
	if err := f.st.CreateEmails(context.Background(), &store.Body{Raw: []byte(raw)}, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	return id
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A result is run once and kept: later requests read it, refresh runs it
// again, and it goes with its email.
func TestResultIsKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := context.Background()
	id := f.add(t, "acct", `<div style="display:flex">x</div>`)
	first, err := f.checks.Result(ctx, "acct", id, HTML, false)
	if err != nil {
		t.Fatal(err)
	}
	if decode(t, first)["checkedAt"] == nil {
		t.Errorf("no checkedAt in %s", first)
	}
	again, err := f.checks.Result(ctx, "acct", id, HTML, false)
	if err != nil || string(again) != string(first) || f.reads.n.Load() != 1 {
		t.Errorf("second request: %d reads of the email, same answer %v (err %v); want 1, true", f.reads.n.Load(), string(again) == string(first), err)
	}
	if _, err := f.checks.Result(ctx, "acct", id, HTML, true); err != nil || f.reads.n.Load() != 2 {
		t.Errorf("refresh: %d reads (err %v), want 2", f.reads.n.Load(), err)
	}
	if _, err := f.checks.Result(ctx, "other", id, HTML, false); !store.IsCode(err, store.NotFound) {
		t.Errorf("another account: %v, want NotFound", err)
	}
	if err := f.st.DeleteEmail(ctx, "acct", id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.checks.Result(ctx, "acct", id, HTML, false); !store.IsCode(err, store.NotFound) {
		t.Errorf("deleted email: %v, want NotFound", err)
	}
	if _, err := f.checks.Result(ctx, "acct", id, "virus", false); !store.IsCode(err, store.NotFound) {
		t.Errorf("unknown check: %v, want NotFound", err)
	}
	if _, err := f.checks.Result(ctx, "acct", id, Spam, false); !store.IsCode(err, store.Conflict) {
		t.Errorf("spam without spamd: %v, want Conflict", err)
	}
}

// Requests for the same result at once share one run: each URL is fetched
// once.
func TestConcurrentRequestsShareOneRun(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(site.Close)
	f := newFixture(t, Config{AllowPrivate: func(string) bool { return true }})
	id := f.add(t, "acct", `<a href="`+site.URL+`/a">a</a>`)
	var wg sync.WaitGroup
	results := make([]string, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := f.checks.Result(context.Background(), "acct", id, Links, false)
			if err != nil {
				t.Error(err)
			}
			results[i] = string(b)
		}()
	}
	wg.Wait()
	if n := hits.Load(); n != 1 {
		t.Errorf("5 requests at once fetched the link %d times, want 1", n)
	}
	for _, r := range results[1:] {
		if r != results[0] {
			t.Errorf("answers differ: %s / %s", r, results[0])
		}
	}
}

// The checks that reach other servers take turns: an account holds at most
// half of them, and a check that finds none in time is Busy, while another
// account's check still runs.
func TestTurns(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(func() { close(release); site.Close() })
	f := newFixture(t, Config{Turns: 2, TurnWait: 200 * time.Millisecond, AllowPrivate: func(string) bool { return true }})
	held := f.add(t, "busy", fmt.Sprintf(`<a href="%s/slow">x</a>`, site.URL))
	go f.checks.Result(context.Background(), "busy", held, Links, false)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if active, _ := f.checks.turns.Counts(); active == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first check did not take its turn within 5 s")
		}
	}
	second := f.add(t, "busy", `<a href="https://example.invalid/">x</a>`)
	if _, err := f.checks.Result(context.Background(), "busy", second, Links, false); !store.IsCode(err, store.Busy) {
		t.Errorf("the account's second check: %v, want Busy", err)
	}
	other := f.add(t, "calm", `<p>no links</p>`)
	if _, err := f.checks.Result(context.Background(), "calm", other, Links, false); err != nil {
		t.Errorf("another account's check: %v", err)
	}
}
