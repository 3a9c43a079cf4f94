package loadgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"

	"github.com/mailsink/mailsink/internal/mailparse"
)

// HostileShape is a message built to make reading it expensive: each one
// aims at one part of the read path (the parser, an extractor, the detail's
// JSON, the preview).
type HostileShape struct {
	Name string
	// What says how the message is built, for the report.
	What string
	// Attachment is the index that the attachment endpoints ask for: the
	// last attachment the parser lists, so a download reads as far into
	// the message as it can; a shape without attachments asks for 0, which
	// is answered 404 after the whole message was read.
	Attachment int
	// Build returns the message, at most size bytes and within 1 KiB of
	// it, with CRLF line ends and no line over 998 bytes (so that SMTP
	// takes it as it is), and a count of what it holds for the report.
	Build func(size int) (raw []byte, count string)
}

// HostileShapes returns the messages the reads benchmark stores and reads:
// an ordinary large message first, as the control, then the hostile ones.
func HostileShapes() []HostileShape {
	return []HostileShape{
		{Name: "large-attachment", What: "ordinary: a short text and HTML part, then one base64 attachment that fills the message", Build: largeAttachment},
		{Name: "preview-image-bomb", What: "multipart/related: an HTML part of nothing but `<img src=cid:img>`, 50 to a line, and one 96 KiB image with that Content-ID", Build: imageBomb},
		{Name: "header-bomb", What: "a message header of tiny `X-Bomb: abcde` fields, then a one-line body", Build: headerBomb},
		{Name: "part-header-bomb", What: "multipart/mixed: a text part, then an attachment whose own header has tiny `X-Part-Field: abcdefghi` fields", Build: partHeaderBomb},
		{Name: "many-parts", What: "multipart/mixed: a text part, then tiny attachments (one byte each)",
			// The root and the text part count among the parser's
			// MaxParts: the attachments it lists are the rest.
			Attachment: mailparse.MaxParts - 3, Build: manyParts},
		{Name: "links-parens", What: "one text/plain part, base64: `http://a.example/` then `)` to the end", Build: linksParens},
		{Name: "invalid-utf8", What: "one text/plain part, charset utf-8, 8bit: lines of 898 bytes 0xFF (none of them UTF-8; each is `\\ufffd` in the detail's raw)", Build: invalidUTF8},
	}
}

// hostileBoundary is the multipart boundary of the hostile messages.
const hostileBoundary = "hostile-b"

// hostileHeader starts a message: its top-level fields, without the
// blank line that ends them.
func hostileHeader(b *bytes.Buffer, subject string) {
	b.WriteString("From: Hostile Sender <hostile@bench.test>\r\n")
	b.WriteString("To: <hostile@bench.test>\r\n")
	b.WriteString("Subject: " + subject + "\r\n")
	b.WriteString("Date: Sun, 22 Nov 2026 12:00:00 +0000\r\n")
	b.WriteString("Message-ID: <" + subject + "@bench.test>\r\n")
	b.WriteString("MIME-Version: 1.0\r\n")
}

// fill writes unit to b as many times as fits before size bytes, leaving
// room for tail, then tail; it returns how many units it wrote.
func fill(b *bytes.Buffer, size int, unit, tail string) int {
	n := max((size-b.Len()-len(tail))/len(unit), 0)
	b.Grow(n*len(unit) + len(tail))
	for range n {
		b.WriteString(unit)
	}
	b.WriteString(tail)
	return n
}

// writeBase64 writes data base64-encoded in lines of 76 characters.
func writeBase64(b *bytes.Buffer, data []byte) {
	enc := base64.StdEncoding.EncodeToString(data)
	for i := 0; i < len(enc); i += 76 {
		b.WriteString(enc[i:min(i+76, len(enc))])
		b.WriteString("\r\n")
	}
}

// base64Fits returns how many bytes, base64-encoded in lines of 76
// characters plus CRLF, fit in room bytes: 57 for each line.
func base64Fits(room int) int { return max(room/78, 0) * 57 }

// randomBytes returns n pseudo-random bytes, the same on every run.
func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}

func largeAttachment(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "large-attachment")
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + hostileBoundary + "\"\r\n\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe report is attached: https://example.com/reports/1, code 482913.\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>The report is <a href=\"https://example.com/reports/1\">attached</a>, code 482913.</p>\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"report.pdf\"\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n")
	tail := "--" + hostileBoundary + "--\r\n"
	n := base64Fits(size - b.Len() - len(tail))
	writeBase64(&b, randomBytes(n))
	b.WriteString(tail)
	return b.Bytes(), fmt.Sprintf("an attachment of %d bytes decoded", n)
}

// imageBombImage is the decoded size of the image the image bomb shows.
const imageBombImage = 96 << 10

func imageBomb(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "preview-image-bomb")
	b.WriteString("Content-Type: multipart/related; boundary=\"" + hostileBoundary + "\"\r\n\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>\r\n")
	var image bytes.Buffer
	image.WriteString("</body></html>\r\n--" + hostileBoundary + "\r\nContent-Type: image/png\r\nContent-ID: <img>\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n")
	writeBase64(&image, randomBytes(imageBombImage))
	image.WriteString("--" + hostileBoundary + "--\r\n")
	const ref, perLine = "<img src=cid:img>", 50
	line := string(bytes.Repeat([]byte(ref), perLine)) + "\r\n"
	lines := fill(&b, size-image.Len()-len(ref)-2, line, "")
	// One line of as many references as still fit, then the image.
	rest := max((size-b.Len()-image.Len()-2)/len(ref), 0)
	b.WriteString(string(bytes.Repeat([]byte(ref), rest)) + "\r\n")
	b.Write(image.Bytes())
	return b.Bytes(), fmt.Sprintf("%d references to one image of %d bytes", lines*perLine+rest, imageBombImage)
}

func headerBomb(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "header-bomb")
	n := fill(&b, size, "X-Bomb: abcde\r\n", "\r\nThe body.\r\n")
	return b.Bytes(), fmt.Sprintf("%d header fields", n+6)
}

func partHeaderBomb(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "part-header-bomb")
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + hostileBoundary + "\"\r\n\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe attachment's header is long.\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: application/octet-stream\r\n" +
		"Content-Disposition: attachment; filename=\"fields.bin\"\r\nContent-Transfer-Encoding: base64\r\n")
	n := fill(&b, size, "X-Part-Field: abcdefghi\r\n", "\r\naGVsbG8=\r\n--"+hostileBoundary+"--\r\n")
	return b.Bytes(), fmt.Sprintf("%d fields in one part's header", n+3)
}

func manyParts(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "many-parts")
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + hostileBoundary + "\"\r\n\r\n")
	b.WriteString("--" + hostileBoundary + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nMany parts.\r\n")
	unit := "--" + hostileBoundary + "\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment\r\n\r\nx\r\n"
	n := fill(&b, size, unit, "--"+hostileBoundary+"--\r\n")
	return b.Bytes(), fmt.Sprintf("%d parts", n+1)
}

func linksParens(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "links-parens")
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	const url = "http://a.example/"
	n := base64Fits(size - b.Len())
	text := append([]byte(url), bytes.Repeat([]byte(")"), n-len(url))...)
	writeBase64(&b, text)
	return b.Bytes(), fmt.Sprintf("a URL then %d `)`", n-len(url))
}

func invalidUTF8(size int) ([]byte, string) {
	var b bytes.Buffer
	hostileHeader(&b, "invalid-utf8")
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	n := fill(&b, size, string(bytes.Repeat([]byte{0xff}, 898))+"\r\n", "")
	return b.Bytes(), fmt.Sprintf("%d bytes that are not UTF-8", n*898)
}
