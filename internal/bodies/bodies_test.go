package bodies

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

const account = "acme-id"

// message is a message with HTML, a text part and an attachment.
var message = []byte(strings.Join([]string{
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
	"--b--"}, "\r\n"))

func openStore(t testing.TB) store.Store {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// put stores raw unparsed, as ingest stores SMTP mail, and returns the
// email's id.
func put(t testing.TB, st store.Store, raw []byte) string {
	t.Helper()
	return putBody(t, st, &store.Body{Raw: raw})
}

func putBody(t testing.TB, st store.Store, b *store.Body) string {
	t.Helper()
	return putIn(t, st, account, b)
}

func putIn(t testing.TB, st store.Store, accountID string, b *store.Body) string {
	t.Helper()
	clock := time.Now().UTC().Truncate(time.Millisecond)
	e := &store.Email{ID: store.NewID(), AccountID: accountID, Sender: "a@example.com", Recipient: "r@acme.test",
		Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(b.Raw)), ReceivedAt: clock, CreatedAt: clock, UpdatedAt: clock}
	if err := st.CreateEmails(context.Background(), b, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// countParses makes s count its parses, and block each until release is
// closed (when release is not nil).
func countParses(s *Service, release chan struct{}) *atomic.Int32 {
	var n atomic.Int32
	s.parse = func(ctx context.Context, raw []byte) (*mailparse.Message, error) {
		n.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return mailparse.ParseContext(ctx, raw)
	}
	return &n
}

// TestParsedTextLeavesTheAttachmentsUnread: ParsedText is the parse without
// the attachments' sizes, under the budget, and not kept in the cache;
// once a whole parse is in the cache, it is used.
func TestParsedTextLeavesTheAttachmentsUnread(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(st, Config{})
	parses := countParses(s, nil)
	var textParses atomic.Int32
	s.parseText = func(ctx context.Context, raw []byte) (*mailparse.Message, error) {
		textParses.Add(1)
		return mailparse.ParseText(ctx, raw)
	}
	id := put(t, st, message)
	want, _ := mailparse.Parse(message)
	sizeless := Attachments(want.Body.Attachments)
	sizeless[0].Size = 0
	r, err := s.ParsedText(context.Background(), account, id, message)
	if err != nil {
		t.Fatal(err)
	}
	if s.Used() == 0 {
		t.Error("an open ParsedText holds none of the budget")
	}
	b := r.Body
	if !reflect.DeepEqual(b.Text, want.Body.Text) || !reflect.DeepEqual(b.HTML, want.Body.HTML) ||
		!reflect.DeepEqual(b.Headers, want.Body.Headers) || !reflect.DeepEqual(b.Attachments, sizeless) {
		t.Errorf("body %+v\nwant %+v with attachments %+v", b, want.Body, sizeless)
	}
	r.Close()
	if s.Used() != 0 {
		t.Errorf("%d bytes of the budget held after Close", s.Used())
	}
	// Not cached: a reader of the whole body parses it, with the sizes.
	r, err = s.Parsed(context.Background(), account, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Body.Attachments; len(got) != 1 || got[0].Size != 4 {
		t.Errorf("attachments after a ParsedText: %+v, want the 4 bytes of r.pdf", got)
	}
	r.Close()
	// Now cached: ParsedText uses the whole parse.
	r, err = s.ParsedText(context.Background(), account, id, message)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Body.Attachments; len(got) != 1 || got[0].Size != 4 {
		t.Errorf("ParsedText with the parse cached: %+v", got)
	}
	r.Close()
	if p, tp := parses.Load(), textParses.Load(); p != 1 || tp != 1 {
		t.Errorf("%d parses and %d text parses, want 1 and 1", p, tp)
	}
}

func TestParsedIsWhatParsingGives(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(st, Config{})
	parses := countParses(s, nil)
	id := put(t, st, message)
	want, _ := mailparse.Parse(message)
	for range 3 {
		r, err := s.Parsed(context.Background(), account, id)
		if err != nil {
			t.Fatal(err)
		}
		b := r.Body
		if !bytes.Equal(b.Raw, message) || !reflect.DeepEqual(b.Text, want.Body.Text) || !reflect.DeepEqual(b.HTML, want.Body.HTML) ||
			!reflect.DeepEqual(b.Headers, want.Body.Headers) || !reflect.DeepEqual(b.Attachments, Attachments(want.Body.Attachments)) {
			t.Errorf("body %+v\nwant %+v", b, want.Body)
		}
		if r.Email.ID != id || r.Email.RawSize != int64(len(message)) {
			t.Errorf("email %+v", r.Email)
		}
		r.Close()
	}
	if n := parses.Load(); n != 1 {
		t.Errorf("parsed %d times for 3 reads, want 1 (then the cache)", n)
	}
	if used := s.Used(); used != 0 {
		t.Errorf("%d bytes of the budget held after every read closed", used)
	}
	if _, err := s.Parsed(context.Background(), "globex-id", id); store.CodeOf(err) != store.NotFound {
		t.Errorf("another account's read: %v, want NotFound", err)
	}
	if err := st.DeleteEmail(context.Background(), account, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Parsed(context.Background(), account, id); store.CodeOf(err) != store.NotFound {
		t.Errorf("read of a deleted email through the cache: %v, want NotFound", err)
	}
}

func TestRawDoesNotParse(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(st, Config{})
	parses := countParses(s, nil)
	id := put(t, st, message)
	r, err := s.Raw(context.Background(), account, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !bytes.Equal(r.Body.Raw, message) || r.Body.Text != nil || r.Body.Headers != nil {
		t.Errorf("Raw gave %+v, want the raw alone", r.Body)
	}
	if n := parses.Load(); n != 0 {
		t.Errorf("Raw parsed %d times", n)
	}
}

func TestStoredParsedBodiesAreNotParsedAgain(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(st, Config{})
	parses := countParses(s, nil)
	// A body stored parsed (by an earlier release, or a create with
	// explicit fields) is read as stored.
	text := "stored text"
	id := putBody(t, st, &store.Body{Raw: message, Given: &store.Parts{Text: &text, Headers: map[string]string{"x": "y"}, Attachments: []store.Attachment{}}})
	r, err := s.Parsed(context.Background(), account, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if deref(r.Body.Text) != text || r.Body.HTML != nil || !reflect.DeepEqual(r.Body.Headers, map[string]string{"x": "y"}) {
		t.Errorf("got %+v, want the body as stored", r.Body)
	}
	if n := parses.Load(); n != 0 {
		t.Errorf("a parsed body was parsed %d times", n)
	}
}

// TestOneParseAtATime: readers of one email that arrive while it is being
// parsed wait for that parse instead of starting their own.
func TestOneParseAtATime(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(st, Config{})
	release := make(chan struct{})
	parses := countParses(s, release)
	id := put(t, st, message)
	const readers = 8
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Go(func() {
			r, err := s.Parsed(context.Background(), account, id)
			if err == nil {
				if deref(r.Body.Text) != "plain" {
					err = errors.New("text " + deref(r.Body.Text))
				}
				r.Close()
			}
			errs <- err
		})
	}
	waitFor(t, "every reader waiting for the parse", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		f := s.flights[account+"/"+id]
		return f != nil && f.waiters == readers
	})
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := parses.Load(); n != 1 {
		t.Errorf("%d parses for %d readers at once, want 1", n, readers)
	}
}

// TestParseStopsWhenEveryReaderHasGone: a parse nobody waits for any more
// is cancelled, and a later reader parses anew.
func TestParseStopsWhenEveryReaderHasGone(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	s := New(st, Config{})
	release := make(chan struct{})
	var cancelled atomic.Bool
	var parses atomic.Int32
	s.parse = func(ctx context.Context, raw []byte) (*mailparse.Message, error) {
		if parses.Add(1) == 1 {
			<-ctx.Done()
			cancelled.Store(true)
			return nil, ctx.Err()
		}
		<-release
		return mailparse.ParseContext(ctx, raw)
	}
	id := put(t, st, message)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := s.Parsed(ctx, account, id)
		done <- err
	}()
	waitFor(t, "the parse to start", func() bool { return parses.Load() == 1 })
	cancel()
	if err := <-done; store.CodeOf(err) != store.Unavailable {
		t.Errorf("a reader that gave up: %v, want Unavailable", err)
	}
	waitFor(t, "the parse to be cancelled", cancelled.Load)
	close(release)
	r, err := s.Parsed(context.Background(), account, id)
	if err != nil {
		t.Fatalf("a later reader: %v", err)
	}
	r.Close()
	if n := parses.Load(); n != 2 {
		t.Errorf("%d parses, want 2 (the cancelled one, then a new one)", n)
	}
	if s.Used() != 0 {
		t.Errorf("%d bytes of the budget still held", s.Used())
	}
}

// TestBudget: reads past the budget wait, then fail with Busy; one account
// holds at most half of the budget; closing a read makes room.
func TestBudget(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	raw := append(append([]byte{}, message...), bytes.Repeat([]byte("x"), 100<<10)...)
	const budget = 2 << 20
	s := New(st, Config{Budget: budget, Wait: 50 * time.Millisecond, CacheBytes: -1})
	id := put(t, st, raw)
	var held []*Read
	for {
		r, err := s.Raw(context.Background(), account, id)
		if err != nil {
			if store.CodeOf(err) != store.Busy {
				t.Fatalf("read past the budget: %v, want Busy", err)
			}
			break
		}
		held = append(held, r)
		if len(held) > 100 {
			t.Fatal("the budget let 100 reads through")
		}
	}
	if used := s.Used(); used > budget/2 || used < budget/2-loadFactor*int64(len(raw))-baseCost {
		t.Errorf("one account holds %d bytes, want just under half of %d", used, budget)
	}
	// Another account still has its half.
	other := putIn(t, st, "globex-id", &store.Body{Raw: raw})
	r, err := s.Parsed(context.Background(), "globex-id", other)
	if err != nil {
		t.Fatalf("another account's read while the first holds its half: %v", err)
	}
	r.Close()
	held[0].Close()
	held[0].Close() // a second Close does nothing
	r, err = s.Raw(context.Background(), account, id)
	if err != nil {
		t.Fatalf("a read after one closed: %v", err)
	}
	r.Close()
	for _, r := range held[1:] {
		r.Close()
	}
	if s.Used() != 0 {
		t.Errorf("%d bytes held after every read closed", s.Used())
	}
	// A read larger than an account's share still gets through alone.
	big := put(t, st, append(append([]byte{}, message...), bytes.Repeat([]byte("y"), budget)...))
	r, err = s.Parsed(context.Background(), account, big)
	if err != nil {
		t.Fatalf("a read larger than the share, alone: %v", err)
	}
	if err := r.Grow(context.Background(), 1<<20); err != nil {
		t.Errorf("Grow of a read that holds its account's share: %v; want nothing more taken, and no error", err)
	}
	if used := s.Used(); used != budget/2 {
		t.Errorf("%d bytes held, want the share, %d", used, budget/2)
	}
	r.Close()
}

func TestParsePanic(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	panics := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_parse_panics_total"})
	var logs bytes.Buffer
	s := New(st, Config{ParsePanics: panics, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	s.parse = func(ctx context.Context, raw []byte) (*mailparse.Message, error) {
		m, _ := mailparse.Parse(raw)
		m.Body.Attachments = m.Body.Attachments[:0]
		return m, mailparse.ErrPanic
	}
	id := put(t, st, message)
	r, err := s.Parsed(context.Background(), account, id)
	if err != nil {
		t.Fatalf("a read whose parsing panicked must not fail: %v", err)
	}
	defer r.Close()
	if !bytes.Equal(r.Body.Raw, message) || deref(r.Body.Text) != "plain" || r.Body.Attachments == nil {
		t.Errorf("body %+v: want the raw and what was parsed", r.Body)
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
	body := func(n int) *parsedBody {
		s := strings.Repeat("x", n)
		return &parsedBody{Text: &s, Headers: map[string]string{}, Attachments: []store.Attachment{}}
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

// BenchmarkParsed reads a stored email parsed: parsing it on every read
// (no cache) and from the cache.
func BenchmarkParsed(b *testing.B) {
	for _, bm := range []struct {
		name  string
		cache int64
	}{{"parse", -1}, {"cached", 0}} {
		b.Run(bm.name, func(b *testing.B) {
			st := openStore(b)
			s := New(st, Config{CacheBytes: bm.cache})
			id := put(b, st, message)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				r, err := s.Parsed(ctx, account, id)
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
