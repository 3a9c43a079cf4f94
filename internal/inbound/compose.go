package inbound

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
)

// Parts is a message as a provider parsed it.
type Parts struct {
	// Header holds the message's headers in order, as the provider listed
	// them; the MIME structure headers among them are replaced by the
	// composed message's own.
	Header []Field
	// From, To, Cc, Subject, Date and MessageID are added as headers when
	// Header lacks them (some providers list them apart).
	From, To, Cc, Subject, Date, MessageID string
	Text, HTML                             string
	Attachments                            []Attachment
}

// Field is one header field.
type Field struct{ Name, Value string }

// Attachment is one attached file.
type Attachment struct {
	Filename    string
	ContentType string
	// ContentID, without angle brackets, makes the attachment inline (an
	// image the HTML refers to by cid:).
	ContentID string
	Content   []byte
}

// Size is what the parts put into the message, before encoding.
func (p *Parts) Size() int64 {
	n := len(p.Text) + len(p.HTML) + len(p.From) + len(p.To) + len(p.Cc) + len(p.Subject) + len(p.Date) + len(p.MessageID)
	for _, f := range p.Header {
		n += len(f.Name) + len(f.Value)
	}
	for _, a := range p.Attachments {
		n += len(a.Content) + len(a.Filename) + len(a.ContentType) + len(a.ContentID)
	}
	return int64(n)
}

// structural are the headers Compose writes itself.
var structural = map[string]bool{"Content-Type": true, "Content-Transfer-Encoding": true, "Mime-Version": true,
	"Content-Disposition": true, "Content-Id": true}

// Compose writes the parts as a MIME message: the headers, then the text
// and HTML (multipart/alternative when both), then every attachment with
// its type, file name and content id (multipart/mixed). The same parts
// always give the same bytes (boundaries are derived from the content), so
// that a provider's retry of a parsed delivery is recognised.
func Compose(p *Parts) []byte {
	var b bytes.Buffer
	have := map[string]bool{}
	for _, f := range p.Header {
		name := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(f.Name))
		if !validName(name) || structural[name] {
			continue
		}
		have[name] = true
		writeField(&b, name, f.Value)
	}
	for _, f := range []Field{{"From", p.From}, {"To", p.To}, {"Cc", p.Cc}, {"Subject", p.Subject}, {"Date", p.Date}, {"Message-Id", p.MessageID}} {
		if f.Value != "" && !have[f.Name] {
			writeField(&b, f.Name, f.Value)
		}
	}
	b.WriteString("MIME-Version: 1.0\r\n")
	seed := contentSum(p)
	if len(p.Attachments) == 0 {
		writeBody(&b, p, seed)
		return b.Bytes()
	}
	mw := multipart.NewWriter(&b)
	mw.SetBoundary("mixed-" + seed)
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\r\n\r\n", mw.Boundary())
	var body bytes.Buffer
	writeBody(&body, p, seed)
	h, rest, _ := bytes.Cut(body.Bytes(), []byte("\r\n\r\n"))
	w, _ := mw.CreatePart(partHeader(string(h)))
	w.Write(rest)
	for _, a := range p.Attachments {
		ct := contentType(a.ContentType)
		hdr := textproto.MIMEHeader{}
		if a.Filename != "" {
			ct = setParam(ct, "name", a.Filename)
		}
		hdr.Set("Content-Type", ct)
		hdr.Set("Content-Transfer-Encoding", "base64")
		disp := "attachment"
		if a.ContentID != "" {
			disp = "inline"
			hdr.Set("Content-Id", "<"+oneLine(strings.Trim(a.ContentID, "<>"))+">")
		}
		if a.Filename != "" {
			disp = mime.FormatMediaType(disp, map[string]string{"filename": oneLine(a.Filename)})
		}
		hdr.Set("Content-Disposition", disp)
		w, _ := mw.CreatePart(hdr)
		writeBase64(w, a.Content)
	}
	mw.Close()
	return b.Bytes()
}

// writeBody writes the Content-Type header, a blank line and the text and
// HTML: one part, or multipart/alternative with both.
func writeBody(b *bytes.Buffer, p *Parts, seed string) {
	switch {
	case p.Text != "" && p.HTML != "":
		mw := multipart.NewWriter(b)
		mw.SetBoundary("alt-" + seed)
		fmt.Fprintf(b, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", mw.Boundary())
		for _, t := range []struct{ typ, s string }{{"text/plain", p.Text}, {"text/html", p.HTML}} {
			w, _ := mw.CreatePart(textproto.MIMEHeader{
				"Content-Type":              {t.typ + "; charset=utf-8"},
				"Content-Transfer-Encoding": {"quoted-printable"},
			})
			writeQP(w, t.s)
		}
		mw.Close()
	case p.HTML != "":
		b.WriteString("Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
		writeQP(b, p.HTML)
	default:
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
		writeQP(b, p.Text)
	}
}

// partHeader reads back the header lines writeBody wrote.
func partHeader(h string) textproto.MIMEHeader {
	out := textproto.MIMEHeader{}
	for _, line := range strings.Split(h, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out.Set(k, strings.TrimSpace(v))
		}
	}
	return out
}

func writeQP(w interface{ Write([]byte) (int, error) }, s string) {
	qp := quotedprintable.NewWriter(w)
	qp.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")))
	qp.Close()
}

func writeBase64(w interface{ Write([]byte) (int, error) }, data []byte) {
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		w.Write([]byte(enc[:76] + "\r\n"))
		enc = enc[76:]
	}
	w.Write([]byte(enc + "\r\n"))
}

// writeField writes one header field, its value on one line. A value that
// is not ASCII is RFC 2047-encoded, but for address fields, which RFC 6532
// lets carry UTF-8 as it is (encoding them whole would hide the addresses).
func writeField(b *bytes.Buffer, name, value string) {
	value = oneLine(value)
	for i := 0; i < len(value) && !addressField[name]; i++ {
		if value[i] >= 0x80 {
			value = mime.QEncoding.Encode("utf-8", value)
			break
		}
	}
	b.WriteString(name + ": " + value + "\r\n")
}

var addressField = map[string]bool{"From": true, "To": true, "Cc": true, "Bcc": true, "Reply-To": true,
	"Sender": true, "Return-Path": true, "Delivered-To": true}

// oneLine unfolds a value, so that no line break in a provider's field can
// start a header of its own.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\r' || r == '\n' }), " ")
}

// validName reports whether name is a header field name (RFC 5322: printable
// ASCII but colon).
func validName(name string) bool {
	if name == "" || len(name) > 200 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == ':' {
			return false
		}
	}
	return true
}

// contentType is a provider's content type as a well-formed header value:
// re-formatted from its parsed parts, or application/octet-stream.
func contentType(ct string) string {
	typ, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "application/octet-stream"
	}
	if s := mime.FormatMediaType(typ, params); s != "" {
		return s
	}
	return "application/octet-stream"
}

// setParam adds a parameter to a media type.
func setParam(ct, key, value string) string {
	typ, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	params[key] = oneLine(value)
	if s := mime.FormatMediaType(typ, params); s != "" {
		return s
	}
	return typ
}

// contentSum derives the boundaries from the parts: fixed for the same
// parts, and never found inside the base64 or quoted-printable bodies
// (which have no "-" in a row at a line start followed by this hex).
func contentSum(p *Parts) string {
	h := sha256.New()
	for _, s := range []string{p.Text, p.HTML, p.Subject} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	for _, a := range p.Attachments {
		fmt.Fprintf(h, "%d:%s%d:", len(a.Filename), a.Filename, len(a.Content))
		h.Write(a.Content)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
