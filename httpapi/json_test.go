package httpapi

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/accounts"
	"github.com/mailsink/mailsink/internal/jsonenc"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// testAPI returns an API that knows two accounts, one with characters
// that need escaping in its name.
func testAPI() *API {
	return &API{accounts: accounts.New([]config.Account{
		{ID: "acc-1", Slug: "acme", Name: "Acme QA"},
		{ID: "acc-2", Slug: "glo\"bex", Name: "Globex <&> \u2028\x01 ünï"},
	})}
}

// referenceList is the list answer as encoding/json writes it, the way
// every answer was written before json.go wrote summaries by hand.
func referenceList(a *API, status int, emails []*store.Email) *httptest.ResponseRecorder {
	items := make([]emailJSON, len(emails))
	for i, e := range emails {
		items[i] = a.emailJSON(e)
	}
	w := httptest.NewRecorder()
	writeJSON(w, status, map[string]any{"items": items})
	return w
}

func referenceItem(a *API, status int, e *store.Email) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	writeJSON(w, status, map[string]any{"item": a.emailJSON(e)})
	return w
}

// tricky are strings that exercise every branch of encoding/json's string
// encoder.
var tricky = []string{
	"", "plain", `quo"te`, `back\slash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f", "<script>&amp;</script>",
	"ünïcödé 日本語 🎉", "\u2028\u2029", "bad \xff utf8 \xc3", "\xe2\x80", "\xed\xa0\x80 surrogate",
	"ends with \\", "\ufffd literal", "\u0085 next line", "/slash/",
}

func randomString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return tricky[r.IntN(len(tricky))]
	}
	n := r.IntN(40)
	var sb strings.Builder
	for range n {
		switch r.IntN(6) {
		case 0:
			sb.WriteByte(byte(r.IntN(256))) // any byte, invalid UTF-8 included
		case 1:
			sb.WriteByte(byte(r.IntN(0x20)))
		case 2:
			sb.WriteRune(rune(r.IntN(0x3000)))
		case 3:
			sb.WriteRune(rune(0x10000 + r.IntN(0x10000)))
		default:
			sb.WriteByte(byte(0x20 + r.IntN(0x60)))
		}
	}
	return sb.String()
}

func randomTime(r *rand.Rand) time.Time {
	locs := []*time.Location{time.UTC, time.FixedZone("x", -7*3600-1800), time.FixedZone("y", 14*3600)}
	switch r.IntN(10) {
	case 0: // years time.Format writes with a sign or five digits, and year 0
		years := []int{-1, -12345, 0, 9999, 10000, 123456}
		return time.Date(years[r.IntN(len(years))], time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), locs[r.IntN(len(locs))])
	case 1:
		return time.Time{}
	}
	return time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).In(locs[r.IntN(len(locs))])
}

func randomEmail(r *rand.Rand) *store.Email {
	opt := func() *string {
		if r.IntN(3) == 0 {
			return nil
		}
		s := randomString(r)
		return &s
	}
	var labels []string
	switch r.IntN(3) {
	case 0: // nil: written as []
	case 1:
		labels = []string{}
	default:
		for range 1 + r.IntN(4) {
			labels = append(labels, randomString(r))
		}
	}
	accs := []string{"acc-1", "acc-2", "unknown", ""}
	return &store.Email{
		ID: randomString(r), AccountID: accs[r.IntN(len(accs))], MessageID: opt(),
		Sender: randomString(r), Recipient: randomString(r), Subject: opt(),
		Status: store.Status(randomString(r)), Notes: opt(), Labels: labels,
		RawSize:    r.Int64() - r.Int64(),
		ReceivedAt: randomTime(r), CreatedAt: randomTime(r), UpdatedAt: randomTime(r),
	}
}

func sameAnswer(t *testing.T, got, want *httptest.ResponseRecorder) {
	t.Helper()
	if got.Code != want.Code {
		t.Errorf("status %d, want %d", got.Code, want.Code)
	}
	if g, w := got.Header().Get("Content-Type"), want.Header().Get("Content-Type"); g != w {
		t.Errorf("Content-Type %q, want %q", g, w)
	}
	if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
		t.Fatalf("body differs from encoding/json's:\ngot  %q\nwant %q", got.Body.Bytes(), want.Body.Bytes())
	}
}

func TestAppendEmailMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	a := testAPI()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		emails := make([]*store.Email, r.IntN(5))
		for j := range emails {
			emails[j] = randomEmail(r)
		}
		got := httptest.NewRecorder()
		a.writeList(got, http.StatusOK, emails)
		sameAnswer(t, got, referenceList(a, http.StatusOK, emails))
		if len(emails) > 0 {
			got := httptest.NewRecorder()
			a.writeItem(got, http.StatusCreated, emails[0])
			sameAnswer(t, got, referenceItem(a, http.StatusCreated, emails[0]))
		}
		if t.Failed() {
			t.Fatalf("iteration %d", i)
		}
	}
}

// TestAppendEmailWithSummaries: a list's page, whose summaries are read
// from the search index together, is what encoding/json writes from each
// email's own summary, for emails with a digest, without one, and not in
// the index.
func TestAppendEmailWithSummaries(t *testing.T) {
	t.Parallel()
	a := testAPI()
	svc := search.NewService(nil, search.Config{})
	a.cfg.Search = svc
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 500 {
		emails := make([]*store.Email, r.IntN(30))
		for j := range emails {
			e := randomEmail(r)
			if r.IntN(2) == 0 {
				e.ID = store.NewID()
			}
			emails[j] = e
			switch r.IntN(3) {
			case 0: // not in the index
			case 1:
				svc.Index().Put(e)
			default:
				svc.Index().Put(e)
				svc.Index().SetDigest(e.AccountID, e.ID, &search.Digest{FromNames: []string{randomString(r)},
					Snippet: randomString(r), Attachments: r.IntN(4), Text: "words"})
			}
		}
		got := httptest.NewRecorder()
		a.writeList(got, http.StatusOK, emails)
		sameAnswer(t, got, referenceList(a, http.StatusOK, emails))
		if t.Failed() {
			t.Fatalf("iteration %d", i)
		}
	}
}

// TestAppendStringEveryRune compares every rune, every single byte and the
// surrogate and out-of-range encodings with encoding/json.
func TestAppendStringEveryRune(t *testing.T) {
	t.Parallel()
	a := testAPI()
	e := &store.Email{AccountID: "acc-1", Labels: []string{}}
	var batch []string
	check := func() {
		e.Labels = batch
		got := httptest.NewRecorder()
		a.writeItem(got, http.StatusOK, e)
		sameAnswer(t, got, referenceItem(a, http.StatusOK, e))
		batch = batch[:0]
	}
	for c := 0; c < 256; c++ {
		batch = append(batch, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	check()
	for r := rune(0); r <= utf8.MaxRune; r++ {
		batch = append(batch, string(r))
		if len(batch) == 4096 {
			check()
		}
	}
	check()
	// Surrogates and runes past U+10FFFF in UTF-8's own form, which Go's
	// string(rune) would have replaced.
	for _, s := range []string{"\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\xc0\x80"} {
		batch = append(batch, s, s[:len(s)-1], "x"+s+"y")
	}
	check()
}

func TestAppendTimeMatchesFormatTime(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		tm := randomTime(r)
		got := appendTime(nil, tm)
		want := jsonenc.AppendString(nil, formatTime(tm))
		if !bytes.Equal(got, want) {
			t.Fatalf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
}

// FuzzAppendEmail compares the hand-written summary with encoding/json's
// for arbitrary strings in every string field.
func FuzzAppendEmail(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s, int64(1_700_000_000_123_456_789))
	}
	a := testAPI()
	f.Fuzz(func(t *testing.T, s1, s2 string, nanos int64) {
		tm := time.Unix(0, nanos)
		e := &store.Email{
			ID: s1, AccountID: "acc-2", MessageID: &s2, Sender: s2, Recipient: s1,
			Subject: &s1, Status: store.Status(s2), Labels: []string{s1, s2},
			RawSize: nanos, ReceivedAt: tm, CreatedAt: tm.Add(time.Duration(len(s1))), UpdatedAt: tm.UTC(),
		}
		got := httptest.NewRecorder()
		a.writeList(got, http.StatusOK, []*store.Email{e, e})
		sameAnswer(t, got, referenceList(a, http.StatusOK, []*store.Email{e, e}))
	})
}

// TestListAnswerBytes pins the bytes clients see in a list answer: field
// names and order, null for absent values, [] for no labels, strings
// escaped as encoding/json does with HTML escaping off, timestamps in
// RFC 3339 UTC with milliseconds.
func TestListAnswerBytes(t *testing.T) {
	t.Parallel()
	a := testAPI()
	at := time.UnixMilli(1700000000123).UTC()
	mid, subj := "<a&b@example.com>", "Order \"1234\" <ok> ünï \u2028\x01"
	e := &store.Email{ID: "0b6f7a52-4c1e-4f1a-9d7e-2f0c8a1b3c4d", AccountID: "acc-2", MessageID: &mid,
		Sender: "shop@example.com", Recipient: "user@example.com", Subject: &subj,
		Status: store.StatusProcessed, Labels: []string{"a/b", "<&>"}, RawSize: 2048,
		ReceivedAt: at, CreatedAt: at.Add(time.Millisecond), UpdatedAt: at.Add(2 * time.Second).In(time.FixedZone("x", -7*3600-1800))}
	unknown := *e
	unknown.AccountID, unknown.Labels = "unknown", nil

	w := httptest.NewRecorder()
	a.writeList(w, http.StatusOK, []*store.Email{e, &unknown})
	summary := `"messageId":"<a&b@example.com>","sender":"shop@example.com","recipient":"user@example.com",` +
		`"subject":"Order \"1234\" <ok> ünï \u2028\u0001","status":"processed","notes":null,`
	times := `"rawSize":2048,"receivedAt":"2023-11-14T22:13:20.123Z","createdAt":"2023-11-14T22:13:20.124Z","updatedAt":"2023-11-14T22:13:22.123Z",` +
		`"read":false,"fromName":null,"snippet":null,"attachmentCount":null}`
	want := `{"items":[{"id":"0b6f7a52-4c1e-4f1a-9d7e-2f0c8a1b3c4d","account":{"id":"acc-2","slug":"glo\"bex","name":"Globex <&> \u2028\u0001 ünï"},` +
		summary + `"labels":["a/b","<&>"],` + times +
		`,{"id":"0b6f7a52-4c1e-4f1a-9d7e-2f0c8a1b3c4d","account":null,` + summary + `"labels":[],` + times + "]}\n"
	if got := w.Body.String(); got != want {
		t.Fatalf("list answer\ngot  %s\nwant %s", got, want)
	}
}
