package mailparse

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// FuzzParse checks the invariants of checkInvariants on arbitrary input,
// starting from every fixture. Crashers found are kept in testdata/fuzz and
// as fixtures in testdata/regress*.eml.
func FuzzParse(f *testing.F) {
	for _, rel := range fixtures(f) {
		f.Add(readFixture(f, rel))
	}
	f.Add([]byte(""))
	f.Add([]byte("\n"))
	f.Add([]byte("Subject: =?UTF-8?B?5pc=?= =?UTF-8?Q?=A5?=\r\n\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: multipart/mixed; boundary=b\n\n--b\n--b--\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkInvariants(t, raw)
	})
}

// benchPlain is a 2 KB single-part message with a typical header.
func benchPlain() []byte {
	var b bytes.Buffer
	b.WriteString("Received: from mail.example.org (mail.example.org [192.0.2.10])\r\n" +
		"\tby mx.example.com (Postfix) with ESMTPS id 4B1C2D3E4F\r\n" +
		"\tfor <rcpt@example.com>; Mon, 9 Mar 2026 10:00:02 +0000 (UTC)\r\n" +
		"Received: from [198.51.100.7] (client.example.net [198.51.100.7])\r\n" +
		"\tby mail.example.org with ESMTPSA id AbCdEf; Mon, 9 Mar 2026 10:00:01 +0000\r\n" +
		"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.org; s=sel;\r\n" +
		"\th=from:to:subject:date:message-id; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;\r\n" +
		"\tb=dGhpcyBpcyBub3QgYSByZWFsIHNpZ25hdHVyZSBidXQgaXQgaXMgYXMgbG9uZyBhcyBvbmU=\r\n" +
		"From: \"Example Sender\" <sender@example.org>\r\n" +
		"To: Recipient <rcpt@example.com>\r\n" +
		"Cc: other@example.com\r\n" +
		"Subject: =?UTF-8?Q?Your_weekly_report_=E2=9C=94?=\r\n" +
		"Date: Mon, 9 Mar 2026 10:00:00 +0000\r\n" +
		"Message-ID: <20260309100000.12345@example.org>\r\n" +
		"MIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Content-Transfer-Encoding: quoted-printable\r\n" +
		"\r\n")
	for b.Len() < 2048 {
		b.WriteString("Hello, this is line of the weekly report with a caf=C3=A9 in it.\r\n")
	}
	return b.Bytes()
}

// benchAttachment is a ~100 KB message: text and HTML alternatives and a
// base64 attachment.
func benchAttachment() []byte {
	data := make([]byte, 72*1024)
	for i := range data {
		data[i] = byte(i * 7)
	}
	enc := base64.StdEncoding.EncodeToString(data)
	var lines strings.Builder
	for len(enc) > 76 {
		lines.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	lines.WriteString(enc + "\r\n")
	return []byte(fmt.Sprintf("From: sender@example.org\r\n"+
		"To: rcpt@example.com\r\n"+
		"Subject: Invoice\r\n"+
		"Date: Mon, 9 Mar 2026 10:00:00 +0000\r\n"+
		"Message-ID: <invoice@example.org>\r\n"+
		"MIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"mixed\"\r\n"+
		"\r\n"+
		"--mixed\r\n"+
		"Content-Type: multipart/alternative; boundary=\"alt\"\r\n"+
		"\r\n"+
		"--alt\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n"+
		"\r\n"+
		"Your invoice is attached.\r\n"+
		"--alt\r\n"+
		"Content-Type: text/html; charset=utf-8\r\n"+
		"\r\n"+
		"<p>Your invoice is attached.</p>\r\n"+
		"--alt--\r\n"+
		"--mixed\r\n"+
		"Content-Type: application/pdf; name=\"invoice.pdf\"\r\n"+
		"Content-Disposition: attachment; filename=\"invoice.pdf\"\r\n"+
		"Content-Transfer-Encoding: base64\r\n"+
		"\r\n"+
		"%s"+
		"--mixed--\r\n", lines.String()))
}

func BenchmarkParse(b *testing.B) {
	for _, bm := range []struct {
		name string
		raw  []byte
	}{
		{"plain-2KB", benchPlain()},
		{"base64-attachment-100KB", benchAttachment()},
	} {
		b.Run(bm.name, func(b *testing.B) {
			m, _ := Parse(bm.raw)
			if m.Body.Text == nil || len(m.Body.Headers) == 0 {
				b.Fatal("benchmark message did not parse")
			}
			b.SetBytes(int64(len(bm.raw)))
			b.ReportAllocs()
			for b.Loop() {
				Parse(bm.raw)
			}
		})
		b.Run(bm.name+"/header-only", func(b *testing.B) {
			b.SetBytes(int64(len(bm.raw)))
			b.ReportAllocs()
			for b.Loop() {
				ParseHeader(bm.raw)
			}
		})
		b.Run(bm.name+"/summary", func(b *testing.B) {
			b.SetBytes(int64(len(bm.raw)))
			b.ReportAllocs()
			for b.Loop() {
				ParseSummary(bm.raw)
			}
		})
	}
}

func BenchmarkAttachment(b *testing.B) {
	raw := benchAttachment()
	if _, content, ok := ReadAttachment(raw, 0); !ok || len(content) != 72*1024 {
		b.Fatal("attachment not found")
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		ReadAttachment(raw, 0)
	}
}
