package inbound_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/inbound"
	"github.com/mailsink/mailsink/internal/inbound/inboundtest"
	"github.com/mailsink/mailsink/internal/mailparse"
)

// FuzzProviders feeds the same bytes to every provider's reader: each
// either refuses them with an *inbound.Error or gives a message that
// parses; none panics.
func FuzzProviders(f *testing.F) {
	for _, name := range []string{"mailgun-parsed.json", "sendgrid-parsed.json"} {
		body, ct := inboundtest.LoadForm(f, name).Multipart(f)
		f.Add(body, ct)
	}
	f.Add(inboundtest.Fixture(f, "postmark-parsed.json"), "application/json")
	f.Add(inboundtest.Fixture(f, "ses-received.json"), "text/plain")
	f.Add([]byte("from=a%40b.test&attachment-count=1"), "application/x-www-form-urlencoded")
	sns := inbound.NewSNS(nil, nil)
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		lim := inbound.Limits{MaxMessageBytes: 1 << 20, MaxParts: 50}
		check := func(d *inbound.Delivery, err error) {
			if err != nil {
				return
			}
			if _, perr := mailparse.Parse(d.Raw); perr != nil {
				t.Errorf("composed message does not parse: %v", perr)
			}
		}
		check(inbound.Mailgun(ct, body, "", time.Now(), lim))
		check(inbound.SendGrid(ct, body, nil, inbound.SendGridSignature{}, time.Now(), lim))
		check(inbound.Postmark(body, lim))
		// No topic is listed: SES refuses before any fetch.
		sns.SES(context.Background(), "", body, nil, lim)
	})
}

// FuzzCompose: whatever the parts, the composed message parses and keeps
// the text; no header line is broken by a provider's line breaks.
func FuzzCompose(f *testing.F) {
	f.Add("Subject", "hi\r\nBcc: x@evil.test", "text", "<p>html</p>", "a.txt", "text/plain; charset=\"x\r\ny\"", "cid\r\n")
	f.Fuzz(func(t *testing.T, name, value, text, html, filename, ct, cid string) {
		raw := inbound.Compose(&inbound.Parts{
			Header:      []inbound.Field{{Name: name, Value: value}},
			From:        "a@example.com",
			Text:        text,
			HTML:        html,
			Attachments: []inbound.Attachment{{Filename: filename, ContentType: ct, ContentID: cid, Content: []byte(text)}},
		})
		hdr, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
		for _, line := range bytes.Split(hdr, []byte("\r\n")) {
			if bytes.HasPrefix(bytes.ToLower(line), []byte("bcc:")) && !bytes.EqualFold(bytes.TrimSpace([]byte(name)), []byte("bcc")) {
				t.Fatalf("a header was injected:\n%s", hdr)
			}
		}
		if _, err := mailparse.Parse(raw); err != nil {
			t.Fatal(err)
		}
	})
}
