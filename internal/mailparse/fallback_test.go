package mailparse

import (
	"strings"
	"testing"
	"time"
)

// TestFallbacks pins each fallback over go-message and the standard library
// to a corpus message that needs it: without the fallback, the field checked
// here is lost or wrong.
func TestFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fallback string
		fixture  string
		check    func(m *Message) (got, want string)
	}{
		{"mbox From line (skipMboxLine)", "corpus/plain_emails/raw_email.eml", func(m *Message) (string, string) {
			return deref(m.MessageID), "d3b8cf8e49f04480850c28713a1f473e@37signals.com"
		}},
		{"obsolete From field is no mbox line (skipMboxLine)", "corpus/rfc2822/example13.eml", func(m *Message) (string, string) {
			return strings.Join(m.From, ","), "jdoe@machine.example"
		}},
		{"unfolded continuation line (readHeader)", "corpus/plain_emails/raw_email_incorrect_header.eml", func(m *Message) (string, string) {
			return deref(m.Subject), "Stop adware/spyware once and for all."
		}},
		{"unfolded continuation line (readHeader)", "corpus/rfc2822/example13.eml", func(m *Message) (string, string) {
			return deref(m.Subject), "Saying Hello"
		}},
		{"comments in a Message-ID (cleanID)", "corpus/rfc2822/example13.eml", func(m *Message) (string, string) {
			return deref(m.MessageID), "1234@local.machine.example"
		}},
		{"comments and spaced colons in a Date (parseDate)", "corpus/rfc2822/example13.eml", func(m *Message) (string, string) {
			return m.Date.Format(time.RFC3339), "1997-11-21T09:55:06-06:00"
		}},
		{"obsolete address syntax (lenientAddresses)", "corpus/rfc2822/example10.eml", func(m *Message) (string, string) {
			return strings.Join(append(m.From, m.To...), ","), "pete@silly.test,c@public.example,joe@example.org,jdoe@one.test"
		}},
		{"obsolete route and spaced dots (lenientAddresses)", "corpus/rfc2822/example11.eml", func(m *Message) (string, string) {
			return strings.Join(m.To, ","), "mary@example.net,jdoe@test.example"
		}},
		{"address without angle brackets after a name (lenientAddresses)", "corpus/plain_emails/mix_caps_content_type.eml", func(m *Message) (string, string) {
			return strings.Join(m.From, ","), "bb@bug.com"
		}},
		{"addresses without a comma (lenientAddresses)", "corpus/plain_emails/raw_email_multiple_from.eml", func(m *Message) (string, string) {
			return strings.Join(m.To, ","), "tim@powerupdev.com,concierge@powerupdev.com"
		}},
		{"@ in a display name (lenientAddresses)", "corpus/plain_emails/raw_email_with_at_display_name.eml", func(m *Message) (string, string) {
			return strings.Join(m.To, ","), "smith@gmail.com,raasdnil@gmail.com,tom@gmail.com"
		}},
		{"unquoted boundary with = (lenientParams)", "corpus/mime_emails/raw_email_with_illegal_boundary.eml", func(m *Message) (string, string) {
			return deref(m.Body.Text), "Hello\nThis is an outlook test\n\nSo there.\n\nMe.\n"
		}},
		{"unquoted boundary with = (lenientParams)", "corpus/plain_emails/raw_email_bad_time.eml", func(m *Message) (string, string) {
			return deref(m.Body.Text)[:min(len(deref(m.Body.Text)), 21)], "\nFilter2: This messag"
		}},
		{"unquoted boundary with = (lenientParams)", "corpus/mime_emails/raw_email_with_binary_encoded.eml", func(m *Message) (string, string) {
			return attachmentNames(m), "2013-08-13_19-08-28-1.jpg"
		}},
		{"unquoted file name with spaces (lenientParams)", "corpus/attachment_emails/attachment_with_unquoted_name.eml", func(m *Message) (string, string) {
			return attachmentNames(m), "This is a test.txt"
		}},
		{"8-bit file name (lenientParams)", "corpus/attachment_emails/attachment_nonascii_filename.eml", func(m *Message) (string, string) {
			return attachmentNames(m), "ciële.txt"
		}},
		{"unquoted encoded-word file name (lenientParams)", "corpus/attachment_emails/attachment_with_base64_encoded_name.eml", func(m *Message) (string, string) {
			return attachmentNames(m), "This is a test.pdf"
		}},
		{"RFC 2231 name in ISO-2022-JP (lenientParams)", "corpus/attachment_emails/attachment_with_encoded_name.eml", func(m *Message) (string, string) {
			return attachmentNames(m), "01 Quien Te Dij\uFFFDat. Pitbull.mp3"
		}},
		{"ISO-8859-1 read as windows-1252 (charsetReader)", "corpus/attachment_emails/attachment_pdf_non_ascii.eml", func(m *Message) (string, string) {
			text := strings.TrimSpace(deref(m.Body.Text))
			return text[max(0, len(text)-len("Ã‚")):], "Ã‚"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fallback+" "+tt.fixture, func(t *testing.T) {
			m := mustParse(t, readFixture(t, tt.fixture))
			if got, want := tt.check(m); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func attachmentNames(m *Message) string {
	var names []string
	for _, a := range m.Body.Attachments {
		names = append(names, deref(a.Filename))
	}
	return strings.Join(names, ",")
}
