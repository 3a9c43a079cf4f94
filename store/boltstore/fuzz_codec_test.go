package boltstore

import (
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// FuzzDecodeRecords feeds arbitrary stored values to the email and body
// decoders of every format: a damaged value is an error, never a panic.
func FuzzDecodeRecords(f *testing.F) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	r := &emailRecord{BodyID: 7}
	r.Sender, r.Recipient, r.Status = "a@example.com", "b@example.com", store.StatusReceived
	r.ReceivedAt, r.CreatedAt, r.UpdatedAt = now, now, now
	f.Add(encodeEmail(r))
	text := "hello"
	f.Add(encodeBody(new(rawzip.Compressor), &store.Body{Raw: []byte("Subject: x\r\n\r\nshort")}))
	f.Add(encodeBody(new(rawzip.Compressor), &store.Body{Raw: []byte(strings.Repeat("Subject: compressible\r\n", 50)), Transcript: &store.Transcript{Helo: "h", Rcpts: []store.TranscriptCommand{{Address: "b@example.com"}}}, Given: &store.Parts{Text: &text, Headers: map[string]string{"Subject": "compressible"}, Attachments: []store.Attachment{{Size: 3}}}}))
	key := emailKey("acct", "id")
	f.Fuzz(func(t *testing.T, v []byte) {
		if e, err := decodeEmail(key, v); err == nil && len(v) > 0 && v[0] == emailFormat && (e.ID != "id" || e.AccountID != "acct") {
			t.Fatalf("decodeEmail took %q, %q from the key", e.ID, e.AccountID)
		}
		decodeBody(v)
	})
}
