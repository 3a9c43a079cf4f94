package boltstore

import (
	"bytes"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// TestDecodeBodyFormatOne checks that a body written before the transcript
// existed (format 1: no transcript field) still decodes.
func TestDecodeBodyFormatOne(t *testing.T) {
	text := "hi"
	b := &store.Body{Raw: []byte("raw source"), Text: &text, Headers: map[string]string{"subject": "s"}, Attachments: []store.Attachment{{Size: 3}}}
	v2 := encodeBody(b)
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
	if !bytes.Equal(got.Raw, b.Raw) || *got.Text != text || got.Attachments[0].Size != 3 || got.Transcript != nil {
		t.Errorf("format 1: got %+v", got)
	}
}
