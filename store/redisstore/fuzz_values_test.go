package redisstore

import (
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// FuzzDecodeValues feeds arbitrary stored values to the decoders of the
// current layout's records and bodies: a damaged or hostile value is an
// error, never a panic, and a body that decodes holds no more raw bytes
// than the compressor allows.
func FuzzDecodeValues(f *testing.F) {
	text := "hello"
	e := testEmail("acct", "a@example.com", "b@example.com", 1)
	r := newRecord(e, e.ID, "body-1")
	f.Add(packRecord(r.storedValues(r.values()), 12))
	f.Add(string(encodeBodyValue(new(rawzip.Compressor), &store.Body{Raw: []byte("Subject: x\r\n\r\nshort")})))
	f.Add(string(encodeBodyValue(new(rawzip.Compressor), &store.Body{Raw: []byte(strings.Repeat("Subject: compressible\r\n", 50)), Given: &store.Parts{Text: &text}})))
	f.Fuzz(func(t *testing.T, v string) {
		if r, err := decodePacked(v, "id", "acct"); err == nil && (r.ID != "id" || r.AccountID != "acct") {
			t.Fatalf("decodePacked kept %q, %q", r.ID, r.AccountID)
		}
		if b, err := decodeBodyValue(v); err == nil && len(b.Raw) > len(v) && len(b.Raw) > 1<<20 {
			t.Fatalf("decodeBodyValue made %d raw bytes of a %d-byte value", len(b.Raw), len(v))
		}
	})
}
