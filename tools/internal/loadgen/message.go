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

// plainBody is a text/plain part of n bytes: headers, blank line, then
// prose of pseudo-random words (see prose), so that compressing the stored
// message is not flattered by repeated lines.
func plainBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
	text := prose(max(n-b.Len()-2, 0))
	b.Write(text)
	b.WriteString("\r\n")
	return b.Bytes()
}

// Vocabulary and text of prose: fixed seeds, so every run sends the same
// bytes.
const (
	vocabularySize = 4000
	vocabularySeed = 17
	proseSeed      = 2026
)

// vocabulary returns vocabularySize distinct words of one to three
// syllables, made from seeded random syllables, shorter ones first (the
// common words of a language are short).
func vocabulary() []string {
	onsets := []string{"", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "y", "z",
		"br", "ch", "cl", "cr", "dr", "fl", "fr", "gr", "pl", "pr", "sh", "sl", "sp", "st", "th", "tr", "wh"}
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "oo", "ou", "y"}
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "st", "ck", "rt", "ll", "x"}
	r := rand.New(rand.NewPCG(vocabularySeed, 1))
	seen := map[string]bool{}
	words := make([]string, 0, vocabularySize)
	for len(words) < vocabularySize {
		syllables := 1
		switch {
		case len(words) >= 2500:
			syllables = 2 + r.IntN(2)
		case len(words) >= 500:
			syllables = 1 + r.IntN(2)
		}
		var w strings.Builder
		for range syllables {
			w.WriteString(onsets[r.IntN(len(onsets))])
			w.WriteString(vowels[r.IntN(len(vowels))])
			w.WriteString(codas[r.IntN(len(codas))])
		}
		if s := w.String(); len(s) > 1 && !seen[s] {
			seen[s] = true
			words = append(words, s)
		}
	}
	return words
}

// prose returns n bytes of text like a written message: sentences of 4 to
// 22 words drawn from the vocabulary with Zipf frequencies (the few common
// words most of the time, as in English), commas now and then, paragraphs
// of 3 to 6 sentences, lines wrapped before 76 characters with CRLF.
func prose(n int) []byte {
	words := vocabulary()
	r := rand.New(rand.NewPCG(proseSeed, 3))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(words)-1))
	var out, line bytes.Buffer
	flush := func() {
		out.Write(line.Bytes())
		out.WriteString("\r\n")
		line.Reset()
	}
	for out.Len()+line.Len() < n {
		for range 3 + r.IntN(4) {
			count := 4 + r.IntN(19)
			for i := range count {
				w := words[zipf.Uint64()]
				if i == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				switch {
				case i == count-1:
					w += "."
				case i > 2 && r.IntN(9) == 0:
					w += ","
				}
				if line.Len()+1+len(w) > 75 {
					flush()
				}
				if line.Len() > 0 {
					line.WriteByte(' ')
				}
				line.WriteString(w)
			}
		}
		flush()
		out.WriteString("\r\n")
	}
	out.Write(line.Bytes())
	b := out.Bytes()
	if len(b) > n {
		b = b[:n]
	}
	// A cut line must not end in a bare CR or leave trailing space.
	return bytes.TrimRight(b, "\r ")
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
