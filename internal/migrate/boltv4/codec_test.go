package boltv4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// encodeBodyTwo is the body encoder of schema version 2, kept to check
// that bodies written by it still decode: format 2, or 3 when unparsed,
// with the transcript as JSON.
func encodeBodyTwo(b *store.Body) []byte {
	e := encoder{}
	parts := b.Given
	if parts == nil {
		e.byte(bodyFormatUnparsed)
		parts = &store.Parts{}
	} else {
		e.byte(bodyFormat2)
	}
	encodeParts(&e, parts)
	var transcript []byte
	if b.Transcript != nil {
		transcript, _ = json.Marshal(b.Transcript)
	}
	e.bytes(transcript)
	e.bytes(b.Raw)
	return e.b
}

// encodeEmailOne is the email encoder of schema version 2 (format 1).
func encodeEmailOne(r *emailRecord) []byte {
	e := encoder{}
	e.byte(emailFormatOne)
	e.uvarint(r.BodyID)
	e.str(r.ID)
	e.str(r.AccountID)
	e.optStr(r.MessageID)
	e.str(r.Sender)
	e.str(r.Recipient)
	e.optStr(r.Subject)
	e.str(string(r.Status))
	e.optStr(r.Notes)
	e.uvarint(uint64(len(r.Labels)))
	for _, l := range r.Labels {
		e.str(l)
	}
	e.varint(r.RawSize)
	e.time(r.ReceivedAt)
	e.time(r.CreatedAt)
	e.time(r.UpdatedAt)
	return e.b
}

// TestDecodeBodyFormatOne checks that a body written before the transcript
// existed (format 1: no transcript field) still decodes.
func TestDecodeBodyFormatOne(t *testing.T) {
	t.Parallel()
	text := "hi"
	b := &store.Body{Raw: []byte("raw source"), Given: &store.Parts{Text: &text, Headers: map[string]string{"subject": "s"}, Attachments: []store.Attachment{{Size: 3}}}}
	v2 := encodeBodyTwo(b)
	// Format 2 writes an empty transcript as one zero length byte just
	// before the raw source's length and bytes.
	tail := len(v2) - len(b.Raw) - 1
	if v2[tail-1] != 0 {
		t.Fatalf("no empty transcript before the raw source: % x", v2)
	}
	v1 := append([]byte{bodyFormatOne}, v2[1:tail-1]...)
	v1 = append(v1, v2[tail:]...)
	got, err := decodeBody(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Raw, b.Raw) || got.Given == nil || *got.Given.Text != text || got.Given.Attachments[0].Size != 3 || got.Transcript != nil {
		t.Errorf("format 1: got %+v", got)
	}
}

// randomBody returns a body with each field set or not, nil or empty.
func randomBody(r *rand.Rand) *store.Body {
	b := &store.Body{}
	if r.IntN(2) == 0 {
		b.Given = &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}
	}
	switch r.IntN(5) {
	case 0:
		b.Raw = []byte{}
	case 1:
		b.Raw = make([]byte, r.IntN(5000))
		for i := range b.Raw {
			b.Raw[i] = byte(r.Uint32())
		}
	case 2:
		b.Raw = make([]byte, rawzip.MaxSize+1+r.IntN(10))
	default:
		b.Raw = realisticMessage(r, r.IntN(100), 64+r.IntN(4000), "to@example.com")
	}
	if g := b.Given; g != nil {
		if r.IntN(2) == 0 {
			g.Text = ptr(fmt.Sprint("text ", r.Int()))
		}
		if r.IntN(2) == 0 {
			g.HTML = ptr("")
		}
		for i := range r.IntN(3) {
			g.Headers[fmt.Sprint("h", i)] = fmt.Sprint(r.Int())
		}
		for range r.IntN(3) {
			g.Attachments = append(g.Attachments, store.Attachment{Filename: ptr("f"), ContentID: ptr(""), Size: r.Int64N(1e6)})
		}
	}
	if r.IntN(3) > 0 {
		t := &store.Transcript{ClientAddress: "127.0.0.1:1", Helo: "h", AuthIdentity: fmt.Sprint(r.Int()),
			Mail: store.TranscriptCommand{Address: "a@b", Reply: "250"}, RcptsOmitted: r.IntN(3), Data: "250 ok"}
		if r.IntN(2) == 0 {
			t.Mail.Params = []string{}
		}
		if r.IntN(3) > 0 {
			t.Rcpts = []store.TranscriptCommand{}
			for range r.IntN(3) {
				t.Rcpts = append(t.Rcpts, store.TranscriptCommand{Address: "r@b", Params: []string{"NOTIFY=NEVER"}, Reply: "250 r"})
			}
		}
		b.Transcript = t
	}
	return b
}

// TestBodyFormats encodes random bodies in the current format and in
// schema 2's, and checks that both decode to the body given.
func TestBodyFormats(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	compressed := 0
	for i := range 500 {
		b := randomBody(r)
		want := *b
		v := encodeBody(new(rawzip.Compressor), b)
		if v[1]&bodyCompressed != 0 {
			compressed++
			if old := encodeBodyTwo(b); len(v) >= len(old) {
				t.Errorf("body %d: %d bytes compressed, %d in schema 2's format", i, len(v), len(old))
			}
		}
		for name, enc := range map[string][]byte{"format 4": v, "schema 2": encodeBodyTwo(b)} {
			got, err := decodeBody(enc)
			if err != nil {
				t.Fatalf("body %d, %s: %v", i, name, err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("body %d, %s:\ngot  %+v\nwant %+v", i, name, got, &want)
			}
		}
	}
	if compressed < 100 {
		t.Errorf("%d of 500 bodies compressed, want at least 100", compressed)
	}
}

// TestEmailFormats checks that an email record reads back from the current
// format and from format 1.
func TestEmailFormats(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(-5).UTC()
	for _, e := range []*store.Email{
		testEmail("0190b6d2-7c3e-7a1b-8c2d-000000000001", "r@example.com", 1_767_225_600_000),
		{ID: "x", AccountID: string(make([]byte, 200)), Status: store.StatusArchived, Labels: []string{"a", ""},
			MessageID: ptr(""), Subject: ptr("s"), Notes: ptr("n"), RawSize: 1 << 40,
			ReceivedAt: at, CreatedAt: at.Add(-time.Hour), UpdatedAt: at.Add(time.Hour)},
	} {
		r := &emailRecord{Email: *e, BodyID: 1 << 50}
		k := emailKey(e.AccountID, e.ID)
		for name, v := range map[string][]byte{"format 2": encodeEmail(r), "format 1": encodeEmailOne(r)} {
			got, err := decodeEmail(k, v)
			// opt is where the decoded optional strings live.
			if err != nil || !reflect.DeepEqual(got.Email, r.Email) || got.BodyID != r.BodyID {
				t.Errorf("%s: got %+v, %v; want %+v", name, got, err, r)
			}
		}
	}
}

// TestTranscriptFieldsEncoded fails when store.Transcript or
// store.TranscriptCommand gains a field: encodeTranscript writes the
// fields one by one and must be taught the new one (with a body format
// that still reads the old layout).
func TestTranscriptFieldsEncoded(t *testing.T) {
	if n := reflect.TypeFor[store.Transcript]().NumField(); n != 11 {
		t.Errorf("store.Transcript has %d fields; encodeTranscript writes 10 and skips OmittedBy (Transcript.For folds it into RcptsOmitted before storing)", n)
	}
	if n := reflect.TypeFor[store.TranscriptCommand]().NumField(); n != 4 {
		t.Errorf("store.TranscriptCommand has %d fields; encodeCommand writes 3 and skips AccountID", n)
	}
}

// TestDecodeBodyBoundsAllocation decodes corrupt bodies of 2 MiB whose item
// counts (headers, attachments, the transcript's RCPT commands and a
// command's parameters) claim about one item per remaining byte, followed
// by bytes that do not decode: decoding fails without allocating much more
// than the record, however large a struct per item the count asks for.
func TestDecodeBodyBoundsAllocation(t *testing.T) {
	const n = 2 << 20
	emptyTranscript := func(e *encoder) {
		e.byte(1)
		for range 6 {
			e.str("")
		}
	}
	tests := []struct {
		name   string
		prefix func(e *encoder)
	}{
		{"headers", func(e *encoder) { e.byte(bodyFormat); e.byte(0); e.optStr(nil); e.optStr(nil) }},
		{"attachments", func(e *encoder) { e.byte(bodyFormat); e.byte(0); e.optStr(nil); e.optStr(nil); e.uvarint(0) }},
		{"rcpts", func(e *encoder) {
			e.byte(bodyFormat)
			e.byte(bodyUnparsed)
			emptyTranscript(e)
			e.str("")
			e.uvarint(0)
			e.str("")
		}},
		{"params", func(e *encoder) {
			e.byte(bodyFormat)
			e.byte(bodyUnparsed)
			emptyTranscript(e)
			e.str("")
		}},
	}
	for _, tt := range tests {
		e := encoder{}
		tt.prefix(&e)
		e.uvarint(n)
		e.b = append(e.b, bytes.Repeat([]byte{0xff}, n)...)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := decodeBody(e.b)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: decodeBody of a corrupt record succeeded", tt.name)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 4*uint64(len(e.b)) {
			t.Errorf("%s: decoding a %d-byte record allocated %d bytes", tt.name, len(e.b), got)
		}
	}
}

// words is the vocabulary of realisticMessage: text made of it compresses
// about as well as English prose does, unlike one line repeated.
var words = strings.Fields(`the of and to in is you that it he was for on are as with his they at be this have from
or one had by word but not what all were we when your can said there use an each which she do how their if will up
other about out many then them these so some her would make like him into time has look two more write go see number
no way could people my than first water been call who oil its now find long down day did get come made may part
invoice order shipment account password reset confirm meeting tomorrow report quarterly figures attached review
please regards thanks team project deadline update status customer support ticket release notes version server`)

// realisticMessage returns message i as a load tool would send it over
// SMTP: headers as tools/internal/loadgen writes them, then about size bytes of
// lines of random words.
func realisticMessage(r *rand.Rand, i, size int, recipient string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Load Tool <sender@bench.test>\r\nTo: %s\r\nSubject: bench run m%d\r\n", recipient, i)
	fmt.Fprintf(&b, "Date: Sun, 22 Nov 2026 12:00:00 +0000\r\nMessage-ID: <m%d.run@bench.test>\r\nMIME-Version: 1.0\r\n", i)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	line := 0
	for b.Len() < size-2 {
		w := words[r.IntN(len(words))]
		if line+len(w)+1 > 72 {
			b.WriteString("\r\n")
			line = 0
		} else if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// fillLikeSMTP stores n emails of about size bytes as ingest does for an
