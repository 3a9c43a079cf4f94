package redisstore

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// Records written by earlier releases, whose hand-written encoder wrote
// what json.Marshal writes: the stored format the code must keep reading
// and writing.
const (
	storedFixed = `{"b":"body-1","id":"0b6f7a52-4c1e-4f1a-9d7e-2f0c8a1b3c4d","acc":"acc-1","mid":"\u003ca\u0026b@example.com\u003e",` +
		`"from":"Shop \u003cshop@example.com\u003e","to":"user@example.com","size":2048,"recv":1700000000123,"created":1700000000124}`
	storedSubject = `"Order \"1234\" \u003cok\u003e ünï \u2028\u0001"`
	storedLabels  = `["a/b","\u003c\u0026\u003e","ünï"]`
	storedBody    = `{"text":"Hi \u003cthere\u003e\r\n","html":null,"headers":{"from":"x@y","subject":"Order \u0026 co"},` +
		`"att":[{"cid":"\u003cc1\u003e","type":"image/png","disp":"inline","name":null,"size":12}]}`
)

// storedEmail is the email the stored records above hold.
func storedEmail() *store.Email {
	at := time.UnixMilli(1700000000123).UTC()
	return &store.Email{ID: "0b6f7a52-4c1e-4f1a-9d7e-2f0c8a1b3c4d", AccountID: "acc-1", MessageID: ptr("<a&b@example.com>"),
		Sender: "Shop <shop@example.com>", Recipient: "user@example.com", Subject: ptr("Order \"1234\" <ok> ünï \u2028\x01"),
		Status: store.StatusProcessed, Labels: []string{"a/b", "<&>", "ünï"}, RawSize: 2048,
		ReceivedAt: at, CreatedAt: at.Add(time.Millisecond), UpdatedAt: at.Add(2 * time.Second)}
}

func anys(vals []string) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v
	}
	return out
}

// TestStoredFormat checks that an email and a body are stored in the
// format of earlier releases, byte for byte, and that records in that
// format decode to what was stored.
func TestStoredFormat(t *testing.T) {
	t.Parallel()
	e := storedEmail()
	want := []string{storedFixed, "processed", storedSubject, "null", storedLabels, "1700000002123"}
	got := newRecord(e, e.ID, "body-1").values()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("values\ngot  %q\nwant %q", got, want)
	}
	r, err := decodeFields(anys(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.email(), e) || r.Body != "body-1" {
		t.Fatalf("decoded %+v (body %q), want %+v", r.email(), r.Body, e)
	}

	wantEvent := `{"type":"email.created","accountId":"acc-1","emailId":"0b6f7a52-4c1e-4f1a-9d7e-2f0c8a1b3c4d","fields":` + marshal(want) + `}`
	if got := string(createdPayload(e.AccountID, e.ID, want)); got != wantEvent {
		t.Fatalf("createdPayload\ngot  %s\nwant %s", got, wantEvent)
	}

	body := &store.Body{Raw: []byte("raw"), Given: &store.Parts{Text: ptr("Hi <there>\r\n"), Headers: map[string]string{"subject": "Order & co", "from": "x@y"}, Attachments: []store.Attachment{{ContentID: ptr("<c1>"), ContentType: ptr("image/png"), Disposition: ptr("inline"), Size: 12}}}}
	if got := encodeBody(body); got != storedBody {
		t.Fatalf("encodeBody\ngot  %s\nwant %s", got, storedBody)
	}
	gotBody, err := decodeBody("raw", storedBody)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotBody, body) {
		t.Fatalf("decodeBody = %+v, want %+v", gotBody, body)
	}
	empty := `{"text":null,"html":null,"headers":{},"att":[]}`
	if got := encodeBody(&store.Body{Given: &store.Parts{}}); got != empty {
		t.Fatalf("encodeBody of an empty body = %s, want %s", got, empty)
	}
	if b, err := decodeBody("", `{"text":null,"html":null,"headers":null,"att":null}`); err != nil || b.Given == nil || b.Given.Headers == nil || b.Given.Attachments == nil {
		t.Fatalf("decodeBody of null headers and attachments = %+v, %v; want empty ones", b, err)
	}
}

// TestDecodeFieldsRefusesCorruptRecords checks that a record the store did
// not write is an Internal error, not a panic or a wrong email.
func TestDecodeFieldsRefusesCorruptRecords(t *testing.T) {
	t.Parallel()
	good := []string{storedFixed, "processed", storedSubject, "null", storedLabels, "1700000002123"}
	for i, bad := range [][]any{
		anys(good[:5]),
		anys(append(append([]string{}, good...), "x")),
		append(anys(good[:5]), int64(1)),
		append(anys(good[:2]), nil, "null", "[]", "1"),
		anys([]string{storedFixed[:40], "processed", "null", "null", "[]", "1"}),
		anys([]string{storedFixed, "processed", `"x`, "null", "[]", "1"}),
		anys([]string{storedFixed, "processed", "null", "1", "[]", "1"}),
		anys([]string{storedFixed, "processed", "null", "null", `["a",]`, "1"}),
		anys([]string{strings.Replace(storedFixed, `"size":2048`, `"size":"2048"`, 1), "processed", "null", "null", "[]", "1"}),
		anys([]string{storedFixed, "processed", "null", "null", "[]", "1.5"}),
	} {
		r, err := decodeFields(bad)
		var se *store.Error
		if !errors.As(err, &se) || se.Code != store.Internal {
			t.Errorf("case %d: decodeFields(%q) = %+v, %v; want an Internal error", i, bad, r, err)
		}
	}
}

// validText is randomText with its invalid UTF-8 left out: what the
// store keeps as it is (encoding/json replaces invalid UTF-8 with U+FFFD, as
// every release did).
func validText(r *rand.Rand) string { return strings.ToValidUTF8(randomText(r), "") }

// TestRecordRoundTrip stores random emails' fields and reads them back, as
// GetEmail does and as a replica reads the created event.
func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	opt := func() *string {
		if r.IntN(3) == 0 {
			return nil
		}
		return ptr(validText(r))
	}
	for range 2000 {
		e := testEmail(validText(r), validText(r), validText(r), r.Int64N(1<<45))
		e.ID, e.MessageID, e.Subject, e.Notes, e.RawSize = validText(r), opt(), opt(), opt(), r.Int64()-r.Int64()
		for range r.IntN(4) {
			e.Labels = append(e.Labels, validText(r))
		}
		vals := newRecord(e, e.ID, "body").values()
		stored, err := decodeFields(anys(vals))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(stored.email(), e) {
			t.Fatalf("stored %+v, read back %+v", e, stored.email())
		}
		r := newRecord(e, e.ID, "body")
		kept := r.storedValues(r.values())
		packed := packRecord(kept, e.RawSize)
		if strings.Count(packed, recordSep) != len(fields) {
			t.Fatalf("record %q has %d separators, want %d", packed, strings.Count(packed, recordSep), len(fields))
		}
		if f, ok := fastFixed(kept[0]); !ok || f.ID != "" || f.AccountID != "" || f.Body != "body" {
			t.Fatalf("the record's fixed part %s: fast path %v, %+v; want it taken, without id and account", kept[0], ok, f)
		}
		fromRecord, err := decodePacked(packed, e.ID, e.AccountID)
		if err != nil || !reflect.DeepEqual(fromRecord.email(), e) || fromRecord.Body != "body" {
			t.Fatalf("record of %+v reads back as %+v, %v", e, fromRecord, err)
		}
		// An update's event carries the record's values (updateScript).
		updated, _ := json.Marshal(map[string]any{"type": store.EmailUpdated, "accountId": e.AccountID, "emailId": e.ID, "fields": kept})
		if ev, ok := decodeEvent("2-0", string(updated)); !ok || !reflect.DeepEqual(ev.Email, e) {
			t.Fatalf("the update event %s decodes to %+v, %v; want the email %+v", updated, ev.Email, ok, e)
		}
		payload := string(createdPayload(e.AccountID, e.ID, vals))
		ev, ok := decodeEvent("1-0", payload)
		if !ok {
			t.Fatalf("the created event %s does not decode", payload)
		}
		if ev.ID != "1-0" || ev.Type != store.EmailCreated || ev.AccountID != e.AccountID || ev.EmailID != e.ID || !reflect.DeepEqual(ev.Email, e) {
			t.Fatalf("created event decodes to %+v (email %+v), want the email %+v", ev, ev.Email, e)
		}
		if acc, ok := accountOf(payload); ok && acc != e.AccountID {
			t.Fatalf("accountOf = %q, want %q", acc, e.AccountID)
		}
	}
}

// TestBodyValueRoundTrip stores random bodies, compressible or not, parsed
// or not, in the body string and reads them back as GetBody does.
func TestBodyValueRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	var zipped, plain int
	for i := range 500 {
		var raw string
		switch i % 3 {
		case 0:
			raw = strings.Repeat("a line of text\r\n", r.IntN(200))
		case 1:
			raw = randomText(r)
		default:
			raw = strings.Repeat(validText(r)+"\n", r.IntN(50))
		}
		b := &store.Body{Raw: []byte(raw), Given: &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}}
		if r.IntN(2) == 0 {
			b.Given = nil
			b.Transcript = &store.Transcript{Helo: validText(r), Mail: store.TranscriptCommand{Address: validText(r), Params: []string{}},
				Rcpts: []store.TranscriptCommand{}, Data: "250 ok"}
		} else {
			b.Given.Text, b.Given.HTML = ptr(validText(r)), ptr("<p>\n"+validText(r))
			b.Given.Headers = map[string]string{"subject": validText(r)}
			b.Given.Attachments = []store.Attachment{{Filename: ptr(validText(r)), Size: r.Int64N(1 << 30)}}
		}
		v := encodeBodyValue(new(rawzip.Compressor), b)
		meta, rest, _ := strings.Cut(string(v), recordSep)
		switch rest[0] {
		case bodyZipped:
			zipped++
		case bodyPlain:
			plain++
		}
		got, err := decodeBodyValue(string(v))
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Fatalf("body %+v (meta %s) reads back as %+v, %v", b, meta, got, err)
		}
	}
	if zipped == 0 || plain == 0 {
		t.Errorf("%d bodies compressed, %d not: want both", zipped, plain)
	}
	for _, bad := range []string{"", "{}", "{}\n", "{}\nx", "{}\nz12\nnot s2", "{}\nz\n", "not json\nrraw"} {
		if b, err := decodeBodyValue(bad); !store.IsCode(err, store.Internal) {
			t.Errorf("decodeBodyValue(%q) = %+v, %v; want an Internal error", bad, b, err)
		}
	}
}
