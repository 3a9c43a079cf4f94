package loadgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Message shapes.
const (
	// ShapePlain is a text/plain message of the requested size.
	ShapePlain = "plain"
	// ShapeAttachment is a multipart/mixed message with a short text part
	// and a base64 attachment that fills it up to the requested size.
	ShapeAttachment = "attachment"
)

// Messages builds the messages of one run. Each message is the same body
// under its own headers: a recipient and a subject that carry the run's
// token and the message's number, so that every stored email can be found
// and told apart through the API.
type Messages struct {
	Run        string // token of the run, in every recipient and subject
	Recipients int    // distinct recipients the messages cycle through
	PerMessage int    // RCPTs (so stored emails) per message
	body       []byte
	headerLen  int
}

// NewMessages prepares messages of about size bytes in the given shape.
func NewMessages(run string, recipients, perMessage, size int, shape string) (*Messages, error) {
	if recipients < 1 || perMessage < 1 || perMessage > recipients {
		return nil, fmt.Errorf("need 1 <= recipients per message (%d) <= recipients (%d)", perMessage, recipients)
	}
	m := &Messages{Run: run, Recipients: recipients, PerMessage: perMessage}
	m.headerLen = len(m.header(0, nil))
	bodySize := max(size-m.headerLen, 64)
	switch shape {
	case ShapePlain:
		m.body = plainBody(bodySize)
	case ShapeAttachment:
		m.body = attachmentBody(bodySize)
	default:
		return nil, fmt.Errorf("unknown message shape %q", shape)
	}
	return m, nil
}

// Size returns the size in bytes of message 0.
func (m *Messages) Size() int { return len(m.Build(0, nil)) }

// Recipient returns the address of recipient k.
func (m *Messages) Recipient(k int) string {
	return fmt.Sprintf("r%d.%s@bench.test", k, m.Run)
}

// RecipientsOf returns the recipient numbers of message i.
func (m *Messages) RecipientsOf(i int) []int {
	out := make([]int, m.PerMessage)
	for j := range out {
		out[j] = (i*m.PerMessage + j) % m.Recipients
	}
	return out
}

// Subject returns the subject of message i.
func (m *Messages) Subject(i int) string { return fmt.Sprintf("bench %s m%d", m.Run, i) }

// Build appends message i to dst.
func (m *Messages) Build(i int, dst []byte) []byte {
	dst = m.header(i, dst)
	return append(dst, m.body...)
}

func (m *Messages) header(i int, dst []byte) []byte {
	b := bytes.NewBuffer(dst)
	fmt.Fprintf(b, "From: Load Tool <sender@bench.test>\r\n")
	fmt.Fprintf(b, "To: %s\r\n", m.Recipient(m.RecipientsOf(i)[0]))
	fmt.Fprintf(b, "Subject: %s\r\n", m.Subject(i))
	fmt.Fprintf(b, "Date: %s\r\n", time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Format(time.RFC1123Z))
	fmt.Fprintf(b, "Message-ID: <m%d.%s@bench.test>\r\n", i, m.Run)
	b.WriteString("MIME-Version: 1.0\r\n")
	return b.Bytes()
}

// plainBody is a text/plain part of n bytes: headers, blank line, lines of
// text.
func plainBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	const line = "The quick brown fox jumps over the lazy dog; a load test line.\r\n"
	for b.Len()+len(line) <= n {
		b.WriteString(line)
	}
	b.WriteString(strings.Repeat("x", max(n-b.Len()-2, 0)) + "\r\n")
	return b.Bytes()
}

// attachmentBody is a multipart/mixed part of about n bytes with a base64
// attachment of pseudo-random bytes.
func attachmentBody(n int) []byte {
	const boundary = "bench-boundary-7f3a"
	var b bytes.Buffer
	b.WriteString("Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n")
	b.WriteString("--" + boundary + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe report is attached.\r\n")
	b.WriteString("--" + boundary + "\r\nContent-Type: application/pdf\r\n" +
		"Content-Disposition: attachment; filename=\"report.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	tail := "--" + boundary + "--\r\n"
	// Base64 lines of 76 characters plus CRLF carry 57 bytes.
	lines := max((n-b.Len()-len(tail))/78, 1)
	raw := make([]byte, lines*57)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	enc := base64.StdEncoding.EncodeToString(raw)
	for i := 0; i < len(enc); i += 76 {
		b.WriteString(enc[i:min(i+76, len(enc))])
		b.WriteString("\r\n")
	}
	b.WriteString(tail)
	return b.Bytes()
}
