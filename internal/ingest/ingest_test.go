package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

var (
	acme   = &store.Account{ID: "acme-id", Slug: "acme", Name: "Acme"}
	globex = &store.Account{ID: "globex-id", Slug: "globex", Name: "Globex"}
	// now has sub-millisecond digits and a zone, which stored times drop.
	now = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
)

// newService returns a Service on a fresh embedded store whose clock reads
// now, and the store as readers see it (through package bodies).
func newService(t *testing.T, cfg Config) (*Service, parsedStore) {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return New(st, func() time.Time { return now }, cfg), parsedStore{st, bodies.New(st, bodies.Config{})}
}

// parsedStore is a store whose GetBody returns bodies as readers see them
// through package bodies.
type parsedStore struct {
	store.Store
	reads *bodies.Service
}

func (p parsedStore) GetBody(ctx context.Context, accountID, id string) (*bodies.Body, error) {
	r, err := p.reads.Parsed(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := *r.Body
	b.Headers, b.Attachments = maps.Clone(b.Headers), slices.Clone(b.Attachments)
	return &b, nil
}

// message joins header and body lines into a CRLF message.
func message(lines ...string) []byte {
	return []byte(strings.Join(lines, "\r\n"))
}

func rcpt(addr string, acc *store.Account) Recipient {
	return Recipient{Address: addr, Account: acc}
}

func wantCode(t *testing.T, err error, code store.Code) {
	t.Helper()
	if store.CodeOf(err) != code {
		t.Fatalf("error %v, want code %v", err, code)
	}
}

// stored returns the emails of an account, oldest first.
func stored(t *testing.T, st interface {
	ListEmails(context.Context, store.ListQuery) ([]*store.Email, error)
}, acc *store.Account) []*store.Email {
	t.Helper()
	list, err := st.ListEmails(context.Background(), store.ListQuery{AccountID: acc.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	return list
}

func TestDeliverSender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		envelope string
		from     string // the From header, "" for none
		want     string // "" for an Invalid error
		refusal  string // for an error: what its message must say
	}{
		{"envelope sender wins", "bounce@example.com", "Alice <alice@example.com>", "bounce@example.com", ""},
		{"no envelope sender: From", "", "Alice <alice@example.com>", "alice@example.com", ""},
		{"invalid envelope sender: From", "not an address", "alice@example.com", "alice@example.com", ""},
		{"first valid From address", "", "nobody, x..y@example.com, Bob <bob@example.com>, carol@example.com", "bob@example.com", ""},
		{"no valid sender anywhere", "", "not an address, x..y@example.com", "", "From header"},
		{"a From at localhost", "", "App <app@localhost>", "", `Sender address <app@localhost> (the From header; the envelope sender is empty) is not accepted: the domain "localhost" has no dot`},
		{"both at localhost", "bounce@localhost", "app@localhost", "", `Sender address <bounce@localhost> (the envelope sender) is not accepted: the domain "localhost" has no dot: it needs a top-level label, like example.com (IP literals are not accepted); and the From header's <app@localhost> is not accepted either`},
		{"no sender at all", "", "", "", "No sender address: the envelope sender is empty and the message has no From header address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc, st := newService(t, Config{})
			header := "Subject: hi"
			if tt.from != "" {
				header = "From: " + tt.from + "\r\n" + header
			}
			raw := message(header, "", "body")
			got, err := svc.Deliver(context.Background(), raw, Envelope{Sender: tt.envelope, Recipients: []Recipient{rcpt("r@acme.test", acme)}})
			if tt.want == "" {
				wantCode(t, err, store.Invalid)
				if err != nil && !strings.Contains(err.Error(), tt.refusal) {
					t.Errorf("refusal %q does not say %q", err, tt.refusal)
				}
				if n := len(stored(t, st, acme)); n != 0 {
					t.Errorf("stored %d emails after an error", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Sender != tt.want {
				t.Errorf("sender %q, want %q", got[0].Sender, tt.want)
			}
		})
	}
}

func TestDeliverOneEmailPerRecipient(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	raw := message(
		"From: Alice <alice@example.com>",
		"To: header-only@acme.test",
		"Subject: =?UTF-8?Q?caf=C3=A9?=",
		"Message-ID: <m1@example.com>",
		"",
		"hello")
	env := Envelope{Recipients: []Recipient{
		rcpt("one@acme.test", acme), rcpt("g@globex.test", globex), rcpt("two@acme.test", acme),
	}}
	got, err := svc.Deliver(context.Background(), raw, env)
	if err != nil {
		t.Fatal(err)
	}
	var rcpts, accounts []string
	ids := map[string]bool{}
	for _, e := range got {
		rcpts = append(rcpts, e.Recipient)
		accounts = append(accounts, e.AccountID)
		ids[e.ID] = true
		if e.Sender != "alice@example.com" || deref(e.Subject) != "café" || deref(e.MessageID) != "m1@example.com" {
			t.Errorf("email %+v", e)
		}
		if e.RawSize != int64(len(raw)) {
			t.Errorf("rawSize %d, want %d", e.RawSize, len(raw))
		}
		want := now.UTC().Truncate(time.Millisecond)
		if !e.ReceivedAt.Equal(want) || !e.CreatedAt.Equal(want) || !e.UpdatedAt.Equal(want) || e.ReceivedAt.Location() != time.UTC {
			t.Errorf("timestamps %v %v %v, want %v in UTC", e.ReceivedAt, e.CreatedAt, e.UpdatedAt, want)
		}
		if e.Status != store.StatusReceived || e.Labels == nil || len(e.Labels) != 0 {
			t.Errorf("status %q labels %v", e.Status, e.Labels)
		}
	}
	if want := []string{"one@acme.test", "g@globex.test", "two@acme.test"}; !reflect.DeepEqual(rcpts, want) {
		t.Errorf("recipients %v, want the envelope's %v (not the To header)", rcpts, want)
	}
	if want := []string{acme.ID, globex.ID, acme.ID}; !reflect.DeepEqual(accounts, want) {
		t.Errorf("accounts %v, want %v", accounts, want)
	}
	if len(ids) != 3 {
		t.Errorf("ids %v, want 3 distinct", ids)
	}

	if n := len(stored(t, st, acme)); n != 2 {
		t.Errorf("acme has %d emails, want 2", n)
	}
	if n := len(stored(t, st, globex)); n != 1 {
		t.Errorf("globex has %d emails, want 1", n)
	}
	body, err := st.GetBody(context.Background(), globex.ID, got[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(body.Raw) != string(raw) || deref(body.Text) != "hello" || body.Headers["subject"] != "café" {
		t.Errorf("body raw %q text %q headers %v", body.Raw, deref(body.Text), body.Headers)
	}
}

func TestDeliverParsedBody(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	raw := message(
		"From: a@example.com",
		"Content-Type: multipart/mixed; boundary=b",
		"",
		"--b",
		"Content-Type: text/html",
		"",
		"<p>hi</p>",
		"--b",
		"Content-Type: application/pdf; name=\"r.pdf\"",
		"Content-Disposition: attachment",
		"Content-ID: <pdf@x>",
		"Content-Transfer-Encoding: base64",
		"",
		"JVBERg==",
		"--b--")
	got, err := svc.Deliver(context.Background(), raw, Envelope{Recipients: []Recipient{rcpt("r@acme.test", acme)}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := st.GetBody(context.Background(), acme.ID, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if body.Text != nil || deref(body.HTML) != "<p>hi</p>" {
		t.Errorf("text %v html %q", body.Text, deref(body.HTML))
	}
	want := []store.Attachment{{ContentID: ptr("pdf@x"), ContentType: ptr("application/pdf"), Disposition: ptr("attachment"), Filename: ptr("r.pdf"), Size: 4}}
	if !reflect.DeepEqual(body.Attachments, want) {
		t.Errorf("attachments %s, want %s", describe(body.Attachments), describe(want))
	}
}

func TestDeliverNoRecipient(t *testing.T) {
	t.Parallel()
	svc, _ := newService(t, Config{})
	raw := message("From: a@example.com", "To: r@acme.test", "", "x")
	_, err := svc.Deliver(context.Background(), raw, Envelope{})
	wantCode(t, err, store.Invalid)
}

func TestDeliverHeaderRecipients(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	raw := message(
		"From: a@example.com",
		"To: One <one@acme.test>, not-an-address, x..y@acme.test, TWO@acme.test",
		"Cc: two@ACME.test, one@acme.test, three@x.io",
		"",
		"x")
	// The envelope's recipients win over the headers.
	got, err := svc.Deliver(context.Background(), raw, Envelope{Recipients: []Recipient{rcpt("env@globex.test", globex)}, HeaderAccount: acme})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Recipient != "env@globex.test" || got[0].AccountID != globex.ID {
		t.Errorf("with an envelope: %+v", got[0])
	}

	got, err = svc.Deliver(context.Background(), raw, Envelope{HeaderAccount: acme})
	if err != nil {
		t.Fatal(err)
	}
	var rcpts []string
	for _, e := range got {
		rcpts = append(rcpts, e.Recipient)
		if e.AccountID != acme.ID {
			t.Errorf("%s in account %s, want %s", e.Recipient, e.AccountID, acme.ID)
		}
	}
	if want := []string{"one@acme.test", "TWO@acme.test", "three@x.io"}; !reflect.DeepEqual(rcpts, want) {
		t.Errorf("recipients %v, want %v (each once, case-insensitive, invalid skipped)", rcpts, want)
	}
	if n := len(stored(t, st, acme)); n != 3 {
		t.Errorf("acme has %d emails, want 3", n)
	}

	_, err = svc.Deliver(context.Background(), message("From: a@example.com", "To: nobody", "", "x"), Envelope{HeaderAccount: acme})
	wantCode(t, err, store.Invalid)
}

// TestDeliverMaxRecipients: POST /v1/inbound takes its recipients from the
// To and Cc headers, so one message could otherwise make any number of
// emails.
func TestDeliverMaxRecipients(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{MaxRecipients: 3})
	to := func(n int) []byte {
		var addrs []string
		for i := range n {
			addrs = append(addrs, "r"+string(rune('a'+i))+"@acme.test")
		}
		return message("From: a@example.com", "To: "+strings.Join(addrs, ", "), "", "x")
	}
	if got, err := svc.Deliver(context.Background(), to(3), Envelope{HeaderAccount: acme}); err != nil || len(got) != 3 {
		t.Fatalf("3 recipients: %d emails, %v", len(got), err)
	}
	_, err := svc.Deliver(context.Background(), to(4), Envelope{HeaderAccount: acme})
	wantCode(t, err, store.Invalid)
	env := Envelope{Recipients: []Recipient{rcpt("a@acme.test", acme), rcpt("b@acme.test", acme), rcpt("c@acme.test", acme), rcpt("d@acme.test", acme)}}
	_, err = svc.Deliver(context.Background(), to(1), env)
	wantCode(t, err, store.Invalid)
	if n := len(stored(t, st, acme)); n != 3 {
		t.Errorf("acme has %d emails, want only the 3 within the limit", n)
	}
}

func TestCreateWithRaw(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	raw := []byte("From: x@example.com\r\nSubject: From raw\r\nMessage-ID: <raw@example.com>\r\nX-Tag: one\r\n\r\nraw text\r\n")
	received := time.Date(2026, 1, 2, 3, 4, 5, 678912345, time.FixedZone("y", -7200))
	e, err := svc.Create(context.Background(), NewEmail{
		AccountID: acme.ID, Sender: "s@example.com", Recipient: "r@acme.test",
		HTML: &Optional{Value: ptr("<b>given</b>")}, Raw: raw, ReceivedAt: &received,
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Sender != "s@example.com" || e.Recipient != "r@acme.test" || deref(e.Subject) != "From raw" || deref(e.MessageID) != "raw@example.com" {
		t.Errorf("email %+v", e)
	}
	if e.RawSize != int64(len(raw)) {
		t.Errorf("rawSize %d, want %d", e.RawSize, len(raw))
	}
	if want := time.Date(2026, 1, 2, 5, 4, 5, 678000000, time.UTC); !e.ReceivedAt.Equal(want) || e.ReceivedAt.Location() != time.UTC {
		t.Errorf("receivedAt %v, want %v", e.ReceivedAt, want)
	}
	if want := now.UTC().Truncate(time.Millisecond); !e.CreatedAt.Equal(want) {
		t.Errorf("createdAt %v, want %v", e.CreatedAt, want)
	}
	body, err := st.GetBody(context.Background(), acme.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(body.Raw) != string(raw) || deref(body.Text) != "raw text\n" || deref(body.HTML) != "<b>given</b>" || body.Headers["x-tag"] != "one" {
		t.Errorf("body text %q html %q headers %v", deref(body.Text), deref(body.HTML), body.Headers)
	}

	// Given fields win over the raw's; an explicit null clears.
	e, err = svc.Create(context.Background(), NewEmail{
		AccountID: acme.ID, Sender: "s@example.com", Recipient: "r@acme.test", Raw: raw,
		Subject: &Optional{Value: nil}, Text: &Optional{Value: nil}, Headers: map[string]string{"X-Own": "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = st.GetBody(context.Background(), acme.ID, e.ID)
	if e.Subject != nil || body.Text != nil || !reflect.DeepEqual(body.Headers, map[string]string{"x-own": "v"}) {
		t.Errorf("subject %v text %v headers %v", e.Subject, body.Text, body.Headers)
	}
}

func TestCreateComposes(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	e, err := svc.Create(context.Background(), NewEmail{
		AccountID: acme.ID, Sender: "s@example.com", Recipient: "r@acme.test\r\nBcc: injected@example.com",
		Subject: &Optional{Value: ptr("Grüße\r\nBcc: injected@example.com")},
		Text:    &Optional{Value: ptr("plain ✓")},
		HTML:    &Optional{Value: ptr("<p>html</p>")},
		Headers: map[string]string{"X-Trace": "t1", "From": "ignored@example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := e.ID + "@mailsink.local"; deref(e.MessageID) != want {
		t.Errorf("messageId %q, want %q", deref(e.MessageID), want)
	}
	if !e.ReceivedAt.Equal(now.UTC().Truncate(time.Millisecond)) {
		t.Errorf("receivedAt %v", e.ReceivedAt)
	}
	body, err := st.GetBody(context.Background(), acme.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.RawSize != int64(len(body.Raw)) || len(body.Raw) == 0 {
		t.Errorf("rawSize %d, raw is %d bytes", e.RawSize, len(body.Raw))
	}
	raw := string(body.Raw)
	for _, want := range []string{"From: s@example.com\r\n", "To: r@acme.test  Bcc: injected@example.com\r\n", "X-Trace: t1\r\n", "Message-ID: <" + e.ID + "@mailsink.local>\r\n"} {
		if !strings.Contains(raw, want) {
			t.Errorf("composed raw lacks %q:\n%s", want, raw)
		}
	}
	if strings.Contains(raw, "ignored@") || strings.Contains(raw, "\r\nBcc:") {
		t.Errorf("composed raw has a header it must not:\n%s", raw)
	}
	if deref(body.Text) != "plain ✓" || deref(body.HTML) != "<p>html</p>" || body.Headers["x-trace"] != "t1" {
		t.Errorf("parsed back: text %q html %q headers %v", deref(body.Text), deref(body.HTML), body.Headers)
	}
	if deref(e.Subject) != "Grüße\r\nBcc: injected@example.com" {
		t.Errorf("subject %q", deref(e.Subject))
	}
}

func TestParsePanicsCounted(t *testing.T) {
	t.Parallel()
	panics := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_parse_panics_total"})
	var logs bytes.Buffer
	svc, st := newService(t, Config{ParsePanics: panics, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	raw := message("From: a@example.com", "Subject: secret subject", "", "secret body")
	env := Envelope{Recipients: []Recipient{rcpt("r@acme.test", acme)}}
	if _, err := svc.Deliver(context.Background(), raw, env); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(panics); n != 0 || logs.Len() != 0 {
		t.Errorf("%v panics counted, log %q, for a message that parses", n, logs.String())
	}

	// A parser that panics halfway: mailparse.ParseHeader recovers and
	// says so.
	svc.parseHeader = func(raw []byte) (*mailparse.Message, error) {
		m, _ := mailparse.ParseHeader(raw)
		return m, mailparse.ErrPanic
	}
	got, err := svc.Deliver(context.Background(), raw, env)
	if err != nil {
		t.Fatalf("a message whose parsing panicked is still stored: %v", err)
	}
	if n := testutil.ToFloat64(panics); n != 1 {
		t.Errorf("%v panics counted, want 1", n)
	}
	if line := logs.String(); !strings.Contains(line, fmt.Sprintf("bytes=%d", len(raw))) || strings.Contains(line, "secret") {
		t.Errorf("log %q: want the size and none of the content", line)
	}
	if _, err := st.GetBody(context.Background(), acme.ID, got[0].ID); err != nil {
		t.Error(err)
	}
	// With a valid envelope sender only the summary is parsed.
	svc.parseSummary = func(raw []byte) (*mailparse.Message, error) {
		m, _ := mailparse.ParseSummary(raw)
		return m, mailparse.ErrPanic
	}
	withSender := env
	withSender.Sender = "s@example.com"
	if _, err := svc.Deliver(context.Background(), raw, withSender); err != nil {
		t.Fatalf("a message whose parsing panicked is still stored: %v", err)
	}
	if n := testutil.ToFloat64(panics); n != 2 {
		t.Errorf("%v panics counted, want 2", n)
	}
	if _, err := svc.Create(context.Background(), NewEmail{AccountID: acme.ID, Sender: "s@example.com", Recipient: "r@acme.test", Raw: raw}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(panics); n != 3 {
		t.Errorf("%v panics counted after create, want 3", n)
	}
}

func TestSplitAddressList(t *testing.T) {
	t.Parallel()
	got := SplitAddressList(" a@x.test, <b@y.test>,, ,c@z.test ")
	if want := []string{"a@x.test", "b@y.test", "c@z.test"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func ptr(s string) *string { return &s }

func describe(atts []store.Attachment) string {
	var parts []string
	for _, a := range atts {
		parts = append(parts, strings.Join([]string{deref(a.ContentID), deref(a.ContentType), deref(a.Disposition), deref(a.Filename)}, "|"))
	}
	return strings.Join(parts, "; ")
}
