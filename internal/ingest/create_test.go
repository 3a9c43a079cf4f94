package ingest

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
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

// wantParsed checks that got is what parsing raw gives.
func wantParsed(t *testing.T, got *bodies.Body, raw []byte) {
	t.Helper()
	msg, _ := mailparse.Parse(raw)
	have := &store.Parts{Text: got.Text, HTML: got.HTML, Headers: got.Headers, Attachments: got.Attachments}
	if want := storeParts(&msg.Body); !reflect.DeepEqual(have, want) {
		t.Errorf("body %+v\nwant %+v", have, want)
	}
}

// TestDeliverStoresUnparsed: SMTP and raw inbound deliveries store the raw
// alone; readers parse it.
func TestDeliverStoresUnparsed(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
	ctx := context.Background()
	got, err := svc.Deliver(ctx, attachmentMessage, Envelope{Recipients: []Recipient{rcpt("r@acme.test", acme)}})
	if err != nil {
		t.Fatal(err)
	}
	if deref(got[0].Subject) != "café" {
		t.Errorf("subject %q: the header parse must give the summary", deref(got[0].Subject))
	}
	stored, err := st.Store.GetBody(ctx, acme.ID, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Given != nil || !bytes.Equal(stored.Raw, attachmentMessage) {
		t.Errorf("stored body %+v: want the raw alone", stored)
	}
	read, err := st.GetBody(ctx, acme.ID, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantParsed(t, read, attachmentMessage)
}

func TestCreateStoresGivenFieldsParsed(t *testing.T) {
	t.Parallel()
	svc, st := newService(t, Config{})
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
		raw, err := st.Store.GetBody(ctx, acme.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if unparsed := raw.Given == nil; unparsed != tt.unparsed {
			t.Errorf("%s: stored without given parts %v, want %v", tt.name, unparsed, tt.unparsed)
		}
		got, err := st.GetBody(ctx, acme.ID, e.ID)
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
