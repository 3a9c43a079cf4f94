package mailparse

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// msg joins header and body lines into a CRLF message.
func msg(lines ...string) []byte {
	return []byte(strings.Join(lines, "\r\n"))
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestTextCharsets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		charset  string // the Content-Type charset parameter as written
		encoding string
		body     string
		want     string
	}{
		{"utf-8", "utf-8", "8bit", "caf\xc3\xa9 \xe2\x9c\x93", "café ✓"},
		{"utf-8 quoted upper case", `"UTF-8"`, "8bit", "caf\xc3\xa9", "café"},
		{"us-ascii carrying utf-8", "us-ascii", "8bit", "caf\xc3\xa9", "café"},
		{"iso-8859-1", "ISO-8859-1", "8bit", "Caf\xe9 cr\xe8me", "Café crème"},
		{"iso-8859-1 0x80 is the euro sign", "iso-8859-1", "8bit", "5 \x80", "5 €"},
		{"latin1 alias", "latin1", "8bit", "\xfc", "ü"},
		{"iso-8859-1 quoted-printable", "iso-8859-1", "quoted-printable", "Caf=E9 =\r\nsoft", "Café soft"},
		{"windows-1252", "windows-1252", "8bit", "\x93q\x94 \x80 \x96", "“q” € –"},
		{"windows-1252 base64", "windows-1252", "base64", "k3GUIIA=", "“q” €"},
		{"shift_jis", "Shift_JIS", "8bit", "\x82\xb1\x82\xf1\x82\xc9\x82\xbf\x82\xcd", "こんにちは"},
		{"shift_jis cp932 extension", "shift_jis", "8bit", "\x87\x40", "①"},
		{"iso-2022-jp", "iso-2022-jp", "7bit", "\x1b$B$3$s$K$A$O\x1b(B", "こんにちは"},
		{"euc-jp", "EUC-JP", "8bit", "\xa4\xb3\xa4\xf3\xa4\xcb\xa4\xc1\xa4\xcf", "こんにちは"},
		{"euc-kr", "euc-kr", "8bit", "\xc7\xd1\xb1\xb9\xbe\xee", "한국어"},
		{"ks_c_5601-1987", "ks_c_5601-1987", "8bit", "\xc7\xd1\xb1\xb9\xbe\xee", "한국어"},
		{"gb2312", "gb2312", "8bit", "\xd6\xd0\xce\xc4", "中文"},
		{"gbk", "GBK", "8bit", "\xd6\xd0\xce\xc4", "中文"},
		{"big5", "big5", "8bit", "\xa4\xa4\xa4\xe5", "中文"},
		{"koi8-r", "koi8-r", "8bit", "\xf0\xd2\xc9\xd7\xc5\xd4", "Привет"},
		{"windows-1251", "windows-1251", "8bit", "\xcf\xf0\xe8\xe2\xe5\xf2", "Привет"},
		{"utf-16le", "UTF-16LE", "binary", "H\x00i\x00 \x00\xe9\x00", "Hi é"},
		{"utf-16be base64", "utf-16be", "base64", "AEgAaQ==", "Hi"},
		{"unknown charset read as utf-8", "x-no-such-charset", "8bit", "caf\xc3\xa9", "café"},
		{"unknown charset invalid bytes", "x-no-such-charset", "8bit", "a\xffb", "a\uFFFDb"},
		{"invalid utf-8 replaced", "utf-8", "8bit", "a\xc3(b", "a\uFFFD(b"},
		{"unknown transfer encoding taken as is", "utf-8", "x-uuencode", "begin 644", "begin 644"},
		{"CRLF becomes LF", "utf-8", "7bit", "a\r\nb\r\n", "a\nb\n"},
		{"lone CR kept", "utf-8", "7bit", "a\rb", "a\rb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := msg(
				"Content-Type: text/plain; charset="+tt.charset,
				"Content-Transfer-Encoding: "+tt.encoding,
				"",
				tt.body)
			m := mustParse(t, raw)
			if got := deref(m.Body.Text); got != tt.want {
				t.Errorf("Text = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHTMLCharset(t *testing.T) {
	t.Parallel()
	raw := msg(
		"Content-Type: multipart/alternative; boundary=b",
		"",
		"--b",
		"Content-Type: text/html; charset=windows-1252",
		"Content-Transfer-Encoding: quoted-printable",
		"",
		"<p>=93Hi=94</p>",
		"--b",
		"Content-Type: text/html; charset=utf-8",
		"",
		"<p>second html is ignored</p>",
		"--b--")
	m := mustParse(t, raw)
	if got, want := deref(m.Body.HTML), "<p>“Hi”</p>"; got != want {
		t.Errorf("HTML = %q, want %q", got, want)
	}
	if m.Body.Text != nil {
		t.Errorf("Text = %q, want nil", *m.Body.Text)
	}
}

func TestSubject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string // the message header, CRLF-separated
		want   string
	}{
		{"plain", "Subject: Hello", "Hello"},
		{"empty", "Subject:", ""},
		{"trimmed", "Subject:   spaced   out  ", "spaced   out"},
		{"folded", "Subject: one\r\n  two\r\n\tthree", "one two three"},
		{"B utf-8", "Subject: =?UTF-8?B?w6k=?=", "é"},
		{"Q iso-8859-1", "Subject: =?ISO-8859-1?Q?caf=E9_cr=E8me?=", "café crème"},
		{"lower-case encoding letter", "Subject: =?utf-8?q?caf=c3=a9?=", "café"},
		{"adjacent words drop the space", "Subject: =?UTF-8?Q?a?= =?UTF-8?Q?b?=", "ab"},
		{"adjacent words across a fold", "Subject: =?UTF-8?Q?a?=\r\n =?UTF-8?Q?b?=", "ab"},
		{"text between words kept", "Subject: =?UTF-8?Q?a?= x =?UTF-8?Q?b?=", "a x b"},
		{"mixed charsets", "Subject: =?ISO-8859-1?Q?=E9?= =?UTF-8?B?w6k=?= =?KOI8-R?B?8NLJ1w==?=", "ééПрив"},
		{"multibyte split across B words", "Subject: =?UTF-8?B?5pc=?= =?UTF-8?B?pQ==?=", "日"},
		{"shift_jis B", "Subject: =?Shift_JIS?B?g2WDWINn?=", "テスト"},
		{"iso-2022-jp", "Subject: =?ISO-2022-JP?B?GyRCJUYlOSVIGyhC?=", "テスト"},
		{"unknown charset read as utf-8", "Subject: =?x-bogus?Q?caf=C3=A9?=", "café"},
		{"language suffix", "Subject: =?UTF-8*en?Q?hi?=", "hi"},
		{"malformed word kept", "Subject: =?UTF-8?Z?abc?= =?broken", "=?UTF-8?Z?abc?= =?broken"},
		{"word without ?= kept", "Subject: =?UTF-8?Q?open", "=?UTF-8?Q?open"},
		{"partly encoded", "Subject: Re: =?UTF-8?B?Iua8ouWtlyI=?= tail", `Re: "漢字" tail`},
		{"raw utf-8", "Subject: Grüße", "Grüße"},
		{"raw latin-1, no charset declared", "Subject: Gr\xfc\xdfe", "Gr\uFFFDe"},
		{"first of two wins", "Subject: first\r\nSubject: second", "first"},
		{"field name case", "SUBJECT: upper", "upper"},
		{"mbox From line skipped", "From sender@example.com Mon Jan  2 15:04:05 2006\r\nSubject: mbox", "mbox"},
		{"From header with obsolete space is not an mbox line", "From  : a@example.com\r\nSubject: obs", "obs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, []byte(tt.header+"\r\n\r\nbody\r\n"))
			if got := deref(m.Subject); got != tt.want {
				t.Errorf("Subject = %q, want %q", got, tt.want)
			}
		})
	}
	if m := mustParse(t, msg("From: a@example.com", "", "no subject")); m.Subject != nil {
		t.Errorf("Subject = %q for a message without one, want nil", *m.Subject)
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	raw := msg(
		"Received: from a by b;",
		"\tMon, 9 Mar 2026 10:00:02 +0000",
		"Received: from c by d; Mon, 9 Mar 2026 10:00:01 +0000",
		"X-Tag: one",
		"x-tag: two",
		"X-TAG: three",
		"X-Encoded: =?UTF-8?Q?caf=C3=A9?= =?UTF-8?Q?_au_lait?=",
		"X-Broken: =?UTF-8?Q?unterminated",
		"X-Eight-Bit: caf\xe9",
		"X-Empty:",
		"X-Folded: a",
		"   b",
		"not a header line, joined to the field before",
		"Obsolete-Space : value",
		"",
		"Received: in the body is not a header",
	)
	m := mustParse(t, raw)
	want := map[string]string{
		"received":       "from a by b; Mon, 9 Mar 2026 10:00:02 +0000, from c by d; Mon, 9 Mar 2026 10:00:01 +0000",
		"x-tag":          "one, two, three",
		"x-encoded":      "café au lait",
		"x-broken":       "=?UTF-8?Q?unterminated",
		"x-eight-bit":    "caf\uFFFD",
		"x-empty":        "",
		"x-folded":       "a b not a header line, joined to the field before",
		"obsolete-space": "value",
	}
	if len(m.Body.Headers) != len(want) {
		t.Errorf("got %d headers %q, want %d", len(m.Body.Headers), m.Body.Headers, len(want))
	}
	for k, v := range want {
		if got, ok := m.Body.Headers[k]; !ok || got != v {
			t.Errorf("Headers[%q] = %q (present %v), want %q", k, got, ok, v)
		}
	}

	for _, raw := range [][]byte{nil, []byte("\r\n\r\nonly a body"), []byte("no header at all")} {
		m := mustParse(t, raw)
		if m.Body.Headers == nil || len(m.Body.Headers) != 0 {
			t.Errorf("mustParse(t, %q).Body.Headers = %v, want an empty map", raw, m.Body.Headers)
		}
	}
}

func TestAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  []string
	}{
		{"a@example.com", []string{"a@example.com"}},
		{"Alice <Alice@Example.COM>", []string{"Alice@Example.COM"}},
		{`"Doe, John" <john@example.com>, jane@example.com`, []string{"john@example.com", "jane@example.com"}},
		{`"Giant; \"Big\" Box" <box@example.net>`, []string{"box@example.net"}},
		{"=?UTF-8?B?w6k=?= <e@example.com>", []string{"e@example.com"}},
		{"Team: a@x.test, B <b@x.test>;, c@y.test", []string{"a@x.test", "b@x.test", "c@y.test"}},
		{"undisclosed-recipients:;", nil},
		{"Pete(A \\) chap) <pete(his account)@silly.test(his host)>", []string{"pete@silly.test"}},
		{"<@route.example:mary@example.net>", []string{"mary@example.net"}},
		{"jdoe@test   . example", []string{"jdoe@test.example"}},
		{"a@x.test b@y.test", []string{"a@x.test", "b@y.test"}},
		{"Big Bug bb@bug.com", []string{"bb@bug.com"}},
		{"Mikel@Lindsaar <raasdnil@gmail.com>", []string{"raasdnil@gmail.com"}},
		{`"quoted local"@example.com`, []string{`quoted local@example.com`}}, // as net/mail gives it
		{"user@[192.0.2.1]", []string{"user@[192.0.2.1]"}},
		{", ,", nil},
		{"no address here", nil},
		{"<unclosed@example.com", []string{"unclosed@example.com"}},
		{"broken )] > <ok@example.com>", []string{"ok@example.com"}},
	}
	for _, tt := range tests {
		got := addresses([]string{tt.value})
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("addresses of %q = %q, want %q", tt.value, got, tt.want)
		}
	}

	m := mustParse(t, msg("From: A <a@x.test>", "To: b@x.test", "Cc: c@x.test, D <d@x.test>", "To: e@x.test", "", ""))
	if strings.Join(m.From, ",") != "a@x.test" || strings.Join(m.To, ",") != "b@x.test,e@x.test" ||
		strings.Join(m.Cc, ",") != "c@x.test,d@x.test" {
		t.Errorf("From %q To %q Cc %q", m.From, m.To, m.Cc)
	}
}

func TestMessageID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  string // "<nil>" for none
	}{
		{"<abc@example.com>", "abc@example.com"},
		{"  <abc@example.com>  (comment)", "abc@example.com"},
		{"abc@example.com", "abc@example.com"},
		{"<1234   @   local(blah)  .machine .example>", "1234@local.machine.example"},
		{"<d3b8@0c28@f473e@37signals.com>", "d3b8@0c28@f473e@37signals.com"},
		{"", "<nil>"},
		{"<>", "<nil>"},
	}
	for _, tt := range tests {
		m := mustParse(t, msg("Message-ID: "+tt.value, "", ""))
		if got := deref(m.MessageID); got != tt.want {
			t.Errorf("MessageID of %q = %q, want %q", tt.value, got, tt.want)
		}
	}
}

func TestDate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value string
		want  string // RFC 3339, "" for nil
	}{
		{"Fri, 21 Nov 1997 09:55:06 -0600", "1997-11-21T09:55:06-06:00"},
		{"21 Nov 1997 09:55:06 +0000", "1997-11-21T09:55:06Z"},
		{"Fri, 21 Nov 97 09:55 GMT", "1997-11-21T09:55:00Z"},
		{"Thu,\r\n 13\r\n Feb\r\n 1969\r\n 23:32\r\n -0330 (Newfoundland Time)", "1969-02-13T23:32:00-03:30"},
		{"Fri, 21 Nov 1997 09(comment):   55  :  06 -0600", "1997-11-21T09:55:06-06:00"},
		{"Wed, 28 May 2014 17:18:19 +0900 (JST)", "2014-05-28T17:18:19+09:00"},
		{"1 May 2020 10:00:00 +0000", "2020-05-01T10:00:00Z"},
		{"Pn, 29 paX 2007 21:13:00 +0100", ""},
		{"0000A0 MAYA", ""},
		{"31 Apr 2020 10:00:00 +0000", ""},
		{"Fri, 21 Nov 1997 25:00:00 -0600", ""},
		{"Fri, 21 Nov 1997", ""},
		{"yesterday", ""},
		{"", ""},
	}
	for _, tt := range tests {
		m := mustParse(t, msg("Date: "+tt.value, "", ""))
		got := ""
		if m.Date != nil {
			got = m.Date.Format(time.RFC3339)
		}
		if got != tt.want {
			t.Errorf("Date of %q = %q, want %q", tt.value, got, tt.want)
		}
	}
}

// attachmentCase describes one expected attachment; Content, when set, is
// what Attachment must return for it.
type attachmentCase struct {
	Filename, ContentType, Disposition, ContentID string // "" for nil
	Size                                          int64
	Content                                       string
	ContentPrefix                                 string
}

func TestAttachments(t *testing.T) {
	t.Parallel()
	pdf := "%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
	var cut []byte
	for i := 0; i < 66; i++ {
		cut = append(cut, byte(i))
	}
	tests := []struct {
		fixture string
		want    []attachmentCase
	}{
		{"alternative-attachment-inline.eml", []attachmentCase{
			{Filename: "logo.png", ContentType: "image/png", Disposition: "inline", ContentID: "logo@example.com", Size: 70, ContentPrefix: "\x89PNG\r\n\x1a\n"},
			{ContentType: "image/gif", ContentID: "pixel", Size: 42, ContentPrefix: "GIF89a"},
			{Filename: "report.pdf", ContentType: "application/pdf", Disposition: "attachment", Size: int64(len(pdf)), Content: pdf},
			{Filename: "notes.txt", ContentType: "text/plain", Disposition: "attachment", Size: 15, Content: "a=b\r\nsoft break"},
		}},
		{"message-rfc822.eml", []attachmentCase{
			{ContentType: "message/rfc822", Disposition: "inline", Size: 461, ContentPrefix: "From: Inner Sender <inner@example.org>\r\n"},
		}},
		{"rfc2231-filename.eml", []attachmentCase{
			{Filename: "naïve résumé.pdf", ContentType: "application/pdf", Disposition: "attachment", Size: 3, Content: "one"},
			{Filename: "日本語.txt", ContentType: "text/plain", Disposition: "attachment", Size: 3, Content: "two"},
			{Filename: "£ rates.csv", ContentType: "text/csv", Disposition: "attachment", Size: 5, Content: "three"},
			{Filename: "café.bin", ContentType: "application/octet-stream", Size: 4, Content: "four"},
			{Filename: "✓.txt", ContentType: "application/octet-stream", Disposition: "attachment", Size: 4, Content: "five"},
			{Filename: "a-b.txt", ContentType: "application/octet-stream", Disposition: "attachment", Size: 3, Content: "six"},
		}},
		{"truncated-multipart.eml", []attachmentCase{
			{Filename: "data.bin", ContentType: "application/octet-stream", Disposition: "attachment", Size: 66, Content: string(cut)},
		}},
		{"digest.eml", []attachmentCase{
			{ContentType: "message/rfc822", Size: 55, Content: "From: one@example.com\r\nSubject: First\r\n\r\nFirst message."},
			{ContentType: "message/rfc822", Size: 57, Content: "From: two@example.com\r\nSubject: Second\r\n\r\nSecond message."},
		}},
		{"corpus/multi_charset/japanese_attachment.eml", []attachmentCase{
			{Filename: "てすと.txt", ContentType: "text/plain", Disposition: "attachment", Size: 33, Content: "this is a test\nこれわてすと"},
		}},
		{"corpus/attachment_emails/attachment_with_quoted_filename.eml", []attachmentCase{
			{Filename: "Eelanalüüsi päring.jpg", ContentType: "image/jpeg", Disposition: "inline", Size: 1952, ContentPrefix: "\xff\xd8\xff\xe0"},
		}},
		{"corpus/attachment_emails/attachment_with_base64_encoded_name.eml", []attachmentCase{
			{Filename: "This is a test.pdf", ContentType: "application/pdf", Disposition: "attachment", Size: 399},
		}},
		{"corpus/mime_emails/raw_email7.eml", []attachmentCase{
			{Filename: "test.rb", ContentType: "text/x-ruby-script", Disposition: "attachment", Size: 25, Content: "puts \"testing, testing\"\r\n"},
			{Filename: "test.pdf", ContentType: "application/pdf", Disposition: "inline", Size: 14, Content: "blah blah blah"},
			{Filename: "smime.p7s", ContentType: "application/pkcs7-signature", Disposition: "attachment", Size: 227},
		}},
		{"corpus/attachment_emails/attachment_content_location.eml", []attachmentCase{
			{Filename: "Photo25.jpg", ContentType: "image/jpeg", Disposition: "inline", ContentID: "qbFGyPQAS8", Size: 227},
		}},
		{"corpus/mime_emails/raw_email_with_binary_encoded.eml", []attachmentCase{
			{Filename: "2013-08-13_19-08-28-1.jpg", ContentType: "image/jpeg", Size: 24, Content: "BINARY_CONTENT_GOES_HERE"},
		}},
		{"iso-8859-1-qp.eml", nil},
	}
	ptr := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			raw := readFixture(t, tt.fixture)
			m := mustParse(t, raw)
			if len(m.Body.Attachments) != len(tt.want) {
				t.Fatalf("got %d attachments, want %d", len(m.Body.Attachments), len(tt.want))
			}
			for i, w := range tt.want {
				want := Attachment{
					Filename: ptr(w.Filename), ContentType: ptr(w.ContentType), Disposition: ptr(w.Disposition),
					ContentID: ptr(w.ContentID), Size: w.Size,
				}
				if got := m.Body.Attachments[i]; !sameAttachment(got, want) {
					t.Errorf("attachment %d = %s, want %s", i, describe(got), describe(want))
				}
				att, content, ok := ReadAttachment(raw, i)
				if !ok {
					t.Fatalf("Attachment(%d) not found", i)
				}
				if !sameAttachment(att, want) {
					t.Errorf("Attachment(%d) = %s, want %s", i, describe(att), describe(want))
				}
				if w.Content != "" && string(content) != w.Content {
					t.Errorf("Attachment(%d) content = %q, want %q", i, content, w.Content)
				}
				if !bytes.HasPrefix(content, []byte(w.ContentPrefix)) {
					t.Errorf("Attachment(%d) content starts %q, want prefix %q", i, content[:min(len(content), 16)], w.ContentPrefix)
				}
			}
			if _, _, ok := ReadAttachment(raw, len(tt.want)); ok {
				t.Errorf("Attachment(%d) found, want none", len(tt.want))
			}
		})
	}
}

func TestBodySelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		raw       []byte
		text      string // "<nil>" for none
		html      string
		nAttached int
	}{
		{"no content type is text/plain", msg("Subject: x", "", "hello"), "hello", "<nil>", 0},
		{"empty input", nil, "", "<nil>", 0},
		{"attachment-only top level", msg("Content-Type: text/plain", "Content-Disposition: attachment; filename=a.txt", "", "data"), "<nil>", "<nil>", 1},
		{"text with a filename is an attachment", msg("Content-Type: text/plain; name=a.txt", "", "data"), "<nil>", "<nil>", 1},
		{"inline text with content-id is the body", msg("Content-Type: text/plain", "Content-ID: <t@x>", "", "body"), "body", "<nil>", 0},
		{"nameless pdf is an attachment", msg("Content-Type: application/pdf", "", "%PDF"), "<nil>", "<nil>", 1},
		{"text/calendar without a name is neither", msg("Content-Type: text/calendar", "", "BEGIN:VCALENDAR"), "<nil>", "<nil>", 0},
		{"invalid content type is text/plain", msg("Content-Type: garbage", "", "body"), "body", "<nil>", 0},
		{
			"first text/plain and first text/html win",
			msg("Content-Type: multipart/mixed; boundary=b", "",
				"--b", "Content-Type: text/html", "", "<p>one</p>",
				"--b", "Content-Type: text/plain", "", "one",
				"--b", "Content-Type: text/plain", "", "two",
				"--b", "Content-Type: text/html", "", "<p>two</p>",
				"--b--"),
			"one", "<p>one</p>", 0,
		},
		{
			"message/rfc822 is one attachment and its body is not ours",
			msg("Content-Type: multipart/mixed; boundary=b", "",
				"--b", "Content-Type: message/rfc822", "",
				"Content-Type: multipart/alternative; boundary=c", "",
				"--c", "Content-Type: text/plain", "", "inner",
				"--c", "Content-Type: text/html", "", "<p>inner</p>",
				"--c", "Content-Type: image/png; name=x.png", "", "png",
				"--c--",
				"--b", "Content-Type: text/plain", "", "outer",
				"--b--"),
			"outer", "<nil>", 1,
		},
		{
			"delimiter with trailing white space and single-dash close",
			msg("Content-Type: multipart/mixed; boundary=b", "",
				"--b  \t", "Content-Type: text/plain", "", "ok",
				"--b-", "", "epilogue"),
			"ok", "<nil>", 0,
		},
		{
			"boundary must be followed by white space or --",
			msg("Content-Type: multipart/mixed; boundary=b", "",
				"--b", "", "part one",
				"--bb not a delimiter",
				"--b--"),
			"part one\n--bb not a delimiter", "<nil>", 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, tt.raw)
			if got := deref(m.Body.Text); got != tt.text {
				t.Errorf("Text = %q, want %q", got, tt.text)
			}
			if got := deref(m.Body.HTML); got != tt.html {
				t.Errorf("HTML = %q, want %q", got, tt.html)
			}
			if len(m.Body.Attachments) != tt.nAttached {
				t.Errorf("got %d attachments, want %d", len(m.Body.Attachments), tt.nAttached)
			}
			checkInvariants(t, tt.raw)
		})
	}
}

// TestLimits checks that hostile structure costs bounded stack and memory.
func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("deep nesting", func(t *testing.T) {
		var b bytes.Buffer
		const depth = 100000
		for i := 0; i < depth; i++ {
			b.WriteString("Content-Type: multipart/mixed; boundary=\"")
			b.WriteString(strings.Repeat("x", i%7+1))
			b.WriteString(itoa(i))
			b.WriteString("\"\r\n\r\n--")
			b.WriteString(strings.Repeat("x", i%7+1))
			b.WriteString(itoa(i))
			b.WriteString("\r\n")
		}
		b.WriteString("Content-Type: text/plain\r\n\r\ndeepest")
		m := mustParse(t, b.Bytes())
		if m.Body.Text != nil {
			t.Errorf("text %d levels deep was found; the depth limit is %d", depth, MaxDepth)
		}
	})
	t.Run("shallow nesting is followed", func(t *testing.T) {
		var b bytes.Buffer
		const depth = MaxDepth - 1
		for i := 0; i < depth; i++ {
			b.WriteString("Content-Type: multipart/mixed; boundary=b" + itoa(i) + "\r\n\r\n--b" + itoa(i) + "\r\n")
		}
		b.WriteString("Content-Type: text/plain\r\n\r\nfound")
		if got := deref(mustParse(t, b.Bytes()).Body.Text); got != "found" {
			t.Errorf("Text = %q, want %q", got, "found")
		}
	})
	t.Run("many parts", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString("Content-Type: multipart/mixed; boundary=b\r\n\r\n")
		for i := 0; i < 5*MaxParts; i++ {
			b.WriteString("--b\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
		}
		b.WriteString("--b--\r\n")
		raw := b.Bytes()
		m := mustParse(t, raw)
		if n := len(m.Body.Attachments); n == 0 || n >= MaxParts {
			t.Errorf("got %d attachments, want some but fewer than %d", n, MaxParts)
		}
		if _, _, ok := ReadAttachment(raw, MaxParts); ok {
			t.Errorf("Attachment(%d) found beyond the part limit", MaxParts)
		}
	})
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestParseKeepsRaw(t *testing.T) {
	t.Parallel()
	raw := msg("Subject: x", "", "body")
	m := mustParse(t, raw)
	if &m.Body.Raw[0] != &raw[0] || len(m.Body.Raw) != len(raw) {
		t.Error("Body.Raw is not the input slice")
	}
}

// TestPathological feeds inputs built to make a careless parser quadratic.
// Each is a few MB; a quadratic pass over any of them would take minutes.
func TestPathological(t *testing.T) {
	t.Parallel()
	const n = 2 << 20
	rep := func(s string) string { return strings.Repeat(s, n/len(s)) }
	tests := []struct {
		name string
		raw  []byte
	}{
		{"unterminated encoded words", []byte("Subject: " + rep("=?a?Q?") + "\r\n\r\n")},
		{"encoded word starts", []byte("Subject: " + rep("=?") + "\r\n\r\n")},
		{"repeated header", []byte(rep("X-Same: value\r\n") + "\r\n")},
		{"semicolons before a parameter", []byte("Content-Type: multipart/mixed" + rep(";") + "boundary=b\r\n\r\n--b\r\n\r\nx")},
		{"many parameters", []byte("Content-Type: text/plain" + rep("; a=b") + "\r\n\r\nx")},
		{"unquoted value with spaces", []byte("Content-Type: text/plain; name=" + rep("a ") + "\r\n\r\nx")},
		{"boundary look-alikes", []byte("Content-Type: multipart/mixed; boundary=b\r\n\r\n" + rep("--bx\r\n"))},
		{"guessed boundary look-alikes", []byte("Content-Type: multipart/mixed\r\n\r\n" + rep("--\r\n"))},
		{"nested comments in address", []byte("From: " + rep("(") + "\r\n\r\n")},
		{"angle brackets in address", []byte("To: " + rep("<a@b") + "\r\n\r\n")},
		{"colons in date", []byte("Date: " + rep(":") + "\r\n\r\n")},
		{"folded lines", []byte("Subject: a" + rep("\r\n b") + "\r\n\r\n")},
		{"lines that are not fields", []byte("Subject: a\r\n" + rep("junk\r\n") + "\r\n")},
		{"quoted-printable equals", []byte("Content-Transfer-Encoding: quoted-printable\r\n\r\n" + rep("="))},
		{"many tiny parts", []byte("Content-Type: multipart/mixed; boundary=b\r\n\r\n" + rep("--b\r\n"))},
	}
	for _, tt := range tests {
		start := time.Now()
		m := mustParse(t, tt.raw)
		for i := range m.Body.Attachments {
			ReadAttachment(tt.raw, i)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: %v for %d bytes", tt.name, d, len(tt.raw))
		}
	}
}

func TestLocationName(t *testing.T) {
	t.Parallel()
	tests := []struct{ value, want string }{
		{"Photo25.jpg", "Photo25.jpg"},
		{"http://example.com/img/logo%20big.png?size=2#top", "logo big.png"},
		{`C:\\Temp\\report.pdf`, "report.pdf"},
		{"cid:part1@example.com", ""},
		{"http://example.com/dir/", ""},
	}
	for _, tt := range tests {
		if got := locationName(tt.value); got != tt.want {
			t.Errorf("locationName(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
}

// mustParse parses raw and fails the test if the parser panicked.
func mustParse(t testing.TB, raw []byte) *Message {
	t.Helper()
	m, err := Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

// TestByteOrderMark checks that a message saved by an editor with a UTF-8
// byte-order mark before its first header keeps its headers.
func TestByteOrderMark(t *testing.T) {
	t.Parallel()
	m, err := Parse([]byte("\xef\xbb\xbfFrom: a@example.com\r\nSubject: hello\r\n\r\nbody\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || *m.Subject != "hello" || len(m.From) != 1 || m.From[0] != "a@example.com" {
		t.Errorf("subject %v, from %v; want hello and a@example.com", m.Subject, m.From)
	}
	if m.Body.Text == nil || strings.TrimSpace(*m.Body.Text) != "body" {
		t.Errorf("text %q, want body", deref(m.Body.Text))
	}
}
