package ingest

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/mailparse"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/boltstore"
)

// attachmentMessage is a message with HTML, a text part and an attachment.
var attachmentMessage = message(
	"From: a@example.com",
	"To: r@acme.test",
	"Subject: =?UTF-8?Q?caf=C3=A9?=",
	"Content-Type: multipart/mixed; boundary=b",
	"",
	"--b",
	"Content-Type: text/plain",
	"",
	"plain",
	"--b",
	"Content-Type: text/html",
	"",
	"<p>hi</p>",
	"--b",
	"Content-Type: application/pdf; name=\"r.pdf\"",
	"Content-Disposition: attachment",
	"Content-Transfer-Encoding: base64",
	"",
	"JVBERg==",
	"--b--")

// newStores returns a Service on a fresh embedded store, the store itself
// and Bodies on it.
func newStores(t *testing.T, cfg BodiesConfig) (*Service, store.Store, *Bodies) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "mailsink.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := NewBodies(st, cfg)
	return New(st, func() time.Time { return now }, Config{}), st, unwrapBodies(t, b)
}

// unwrapBodies returns the *Bodies that NewBodies returned, maybe with
// the store's optional interfaces around it.
func unwrapBodies(t *testing.T, s store.Store) *Bodies {
	t.Helper()
	if b, ok := s.(*Bodies); ok {
		return b
	}
	v := reflect.ValueOf(s).Elem().Field(0).Interface()
	b, ok := v.(*Bodies)
	if !ok {
		t.Fatalf("NewBodies returned %T", s)
	}
	return b
}

// wantParsed checks that got is what parsing raw gives.
func wantParsed(t *testing.T, got *store.Body, raw []byte) {
	t.Helper()
	msg, _ := mailparse.Parse(raw)
	want := storeBody(&msg.Body)
	got.Transcript, want.Transcript = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("body %+v\nwant %+v", got, want)
	}
}

func TestDeliverStoresUnparsedAndBodiesParses(t *testing.T) {
	t.Parallel()
	svc, st, bodies := newStores(t, BodiesConfig{})
	ctx := context.Background()
	got, err := svc.Deliver(ctx, attachmentMessage, Envelope{Recipients: []Recipient{rcpt("r@acme.test", acme)}})
	if err != nil {
		t.Fatal(err)
	}
	if deref(got[0].Subject) != "café" {
		t.Errorf("subject %q: the header parse must give the summary", deref(got[0].Subject))
	}
	stored, err := st.GetBody(ctx, acme.ID, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.Unparsed || stored.Text != nil || stored.HTML != nil || len(stored.Headers) != 0 || len(stored.Attachments) != 0 {
		t.Errorf("stored body %+v: want the raw alone, marked unparsed", stored)
	}
	var parses atomic.Int32
	bodies.parse = func(raw []byte) (*mailparse.Message, error) {
		parses.Add(1)
		return mailparse.Parse(raw)
	}
	for range 3 {
		body, err := bodies.GetBody(ctx, acme.ID, got[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		wantParsed(t, body, attachmentMessage)
		body.Headers["subject"] = "changed by a caller"
	}
	if n := parses.Load(); n != 1 {
		t.Errorf("parsed %d times for 3 reads, want 1 (then the cache)", n)
	}
	if _, err := bodies.GetBody(ctx, globex.ID, got[0].ID); store.CodeOf(err) != store.NotFound {
		t.Errorf("another account's read: %v, want NotFound", err)
	}
	if err := st.DeleteEmail(ctx, acme.ID, got[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := bodies.GetBody(ctx, acme.ID, got[0].ID); store.CodeOf(err) != store.NotFound {
		t.Errorf("read of a deleted email through the cache: %v, want NotFound", err)
	}
}

func TestBodiesKeepsParsedBodies(t *testing.T) {
	t.Parallel()
	_, st, bodies := newStores(t, BodiesConfig{})
	ctx := context.Background()
	// A body stored parsed (by an earlier release, or a create with
	// explicit fields) is returned as stored, not parsed again.
	e := newEmail(acme.ID, "a@example.com", "r@acme.test", now.UTC().Truncate(time.Millisecond))
	stored := &store.Body{Raw: attachmentMessage, Text: ptr("stored text"), Headers: map[string]string{"x": "y"}, Attachments: []store.Attachment{}}
	if err := st.CreateEmails(ctx, stored, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	bodies.parse = func([]byte) (*mailparse.Message, error) { panic("a parsed body must not be parsed again") }
	got, err := bodies.GetBody(ctx, acme.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if deref(got.Text) != "stored text" || got.HTML != nil || !reflect.DeepEqual(got.Headers, stored.Headers) || got.Unparsed {
		t.Errorf("got %+v, want the body as stored", got)
	}
}

func TestCreateStoresGivenFieldsParsed(t *testing.T) {
	t.Parallel()
	svc, st, bodies := newStores(t, BodiesConfig{})
	ctx := context.Background()
	tests := []struct {
		name     string
		in       NewEmail
		unparsed bool
	}{
		{"raw alone", NewEmail{Raw: attachmentMessage}, true},
		{"fields composed into a raw", NewEmail{Subject: &Optional{Value: ptr("s")}}, true},
		{"raw with text", NewEmail{Raw: attachmentMessage, Text: &Optional{Value: ptr("given")}}, false},
		{"raw with null html", NewEmail{Raw: attachmentMessage, HTML: &Optional{}}, false},
		{"raw with headers", NewEmail{Raw: attachmentMessage, Headers: map[string]string{"X-Given": "1"}}, false},
	}
	for _, tt := range tests {
		in := tt.in
		in.AccountID, in.Sender, in.Recipient = acme.ID, "s@example.com", "r@acme.test"
		e, err := svc.Create(ctx, in)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		raw, err := st.GetBody(ctx, acme.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if raw.Unparsed != tt.unparsed {
			t.Errorf("%s: stored unparsed %v, want %v", tt.name, raw.Unparsed, tt.unparsed)
		}
		got, err := bodies.GetBody(ctx, acme.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tt.unparsed {
			wantParsed(t, got, raw.Raw)
			continue
		}
		switch {
		case in.Text != nil && deref(got.Text) != "given",
			in.HTML != nil && got.HTML != nil,
			in.Headers != nil && !reflect.DeepEqual(got.Headers, map[string]string{"x-given": "1"}),
			in.Text == nil && deref(got.Text) != "plain":
			t.Errorf("%s: got text %q html %q headers %v", tt.name, deref(got.Text), deref(got.HTML), got.Headers)
		}
	}
}

func TestBodiesParsePanic(t *testing.T) {
	t.Parallel()
	panics := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_parse_panics_total"})
	var logs bytes.Buffer
	svc, _, bodies := newStores(t, BodiesConfig{ParsePanics: panics, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	got, err := svc.Deliver(ctx, attachmentMessage, Envelope{Recipients: []Recipient{rcpt("r@acme.test", acme)}})
	if err != nil {
		t.Fatal(err)
	}
	bodies.parse = func(raw []byte) (*mailparse.Message, error) {
		m, _ := mailparse.Parse(raw)
		m.Body.Attachments = m.Body.Attachments[:0]
		return m, mailparse.ErrPanic
	}
	body, err := bodies.GetBody(ctx, acme.ID, got[0].ID)
	if err != nil {
		t.Fatalf("a read whose parsing panicked must not fail: %v", err)
	}
	if !bytes.Equal(body.Raw, attachmentMessage) || deref(body.Text) != "plain" || body.Attachments == nil {
		t.Errorf("body %+v: want the raw and what was parsed", body)
	}
	if n := testutil.ToFloat64(panics); n != 1 {
		t.Errorf("%v panics counted, want 1", n)
	}
	if line := logs.String(); !strings.Contains(line, "bytes=") || strings.Contains(line, "plain") {
		t.Errorf("log %q: want the size and none of the content", line)
	}
}

func TestLRUBound(t *testing.T) {
	t.Parallel()
	body := func(n int) *store.Body {
		s := strings.Repeat("x", n)
		return &store.Body{Text: &s, Headers: map[string]string{}, Attachments: []store.Attachment{}}
	}
	c := newLRU(3000)
	c.add("a", body(1000))
	c.add("b", body(1000))
	if _, ok := c.get("a"); !ok {
		t.Fatal("a not kept")
	}
	c.add("c", body(1000)) // over the bound: b, the least recently used, goes
	if _, ok := c.get("b"); ok {
		t.Error("b kept past the bound")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s dropped", k)
		}
	}
	if c.size > c.max {
		t.Errorf("size %d over the bound %d", c.size, c.max)
	}
	c.add("big", body(5000))
	if _, ok := c.get("big"); ok || len(c.entries) != 2 {
		t.Errorf("an entry larger than the bound was kept, or evicted others: %d entries", len(c.entries))
	}
	none := newLRU(-1)
	none.add("a", body(0))
	if _, ok := none.get("a"); ok {
		t.Error("a negative bound keeps something")
	}
}

func TestNewBodiesKeepsInterfaces(t *testing.T) {
	t.Parallel()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "mailsink.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := NewBodies(st, BodiesConfig{})
	if _, ok := b.(store.Notifier); !ok {
		t.Error("store.Notifier lost")
	}
	if _, ok := b.(store.Idempotency); !ok {
		t.Error("store.Idempotency lost")
	}
}

// BenchmarkGetBody reads an unparsed body through Bodies: parsing it on
// every read (no cache) and from the cache.
func BenchmarkGetBody(b *testing.B) {
	for _, bm := range []struct {
		name  string
		cache int64
	}{{"parse", -1}, {"cached", 0}} {
		b.Run(bm.name, func(b *testing.B) {
			st, err := boltstore.Open(filepath.Join(b.TempDir(), "mailsink.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			svc := New(st, time.Now, Config{})
			bodies := NewBodies(st, BodiesConfig{CacheBytes: bm.cache})
			ctx := context.Background()
			got, err := svc.Deliver(ctx, attachmentMessage, Envelope{Recipients: []Recipient{rcpt("r@acme.test", acme)}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bodies.GetBody(ctx, acme.ID, got[0].ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
