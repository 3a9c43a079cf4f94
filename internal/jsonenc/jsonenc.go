// Package jsonenc appends JSON strings byte for byte as encoding/json
// writes them, without reflection: for the one hand-written encoder of a
// hot path, httpapi's email summaries.
package jsonenc

import (
	"io"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// plain[c] reports whether AppendString copies the byte c as it is: ASCII
// other than control characters, quote and backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string the way encoding/json does with
// HTML escaping off (Encoder.SetEscapeHTML(false)): quote, backslash and
// control characters escaped (\b, \f, \n, \r, \t by name), invalid UTF-8
// replaced by \ufffd, and U+2028 and U+2029 escaped; everything else as it
// is.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendContent(b, s)
	return append(b, '"')
}

// appendContent appends s escaped as AppendString does, without the
// quotes.
func appendContent(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// Writer writes JSON to an io.Writer piece by piece, so that an answer
// holding a large string (a 25 MB raw source, say) is encoded through a
// small buffer instead of being built whole: its strings are escaped as
// AppendString does, a chunk at a time. The first write error is kept and
// the writes after it do nothing.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
}

// chunk is how many bytes of a string Writer escapes at once.
const chunk = 16 << 10

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, 4*chunk)}
}

// Raw writes s as it is: JSON punctuation and literals.
func (w *Writer) Raw(s string) {
	w.buf = append(w.buf, s...)
	w.flushFull()
}

// String writes s as a JSON string.
func (w *Writer) String(s string) {
	w.buf = append(w.buf, '"')
	for len(s) > 0 {
		n := cut(s)
		w.buf = appendContent(w.buf, s[:n])
		s = s[n:]
		w.flushFull()
	}
	w.buf = append(w.buf, '"')
}

// Bytes writes b as a JSON string, as String(string(b)) would.
func (w *Writer) Bytes(b []byte) {
	w.buf = append(w.buf, '"')
	for len(b) > 0 {
		n := cut(b)
		w.buf = appendContent(w.buf, string(b[:n]))
		b = b[n:]
		w.flushFull()
	}
	w.buf = append(w.buf, '"')
}

// OptString writes s, or null when s is nil.
func (w *Writer) OptString(s *string) {
	if s == nil {
		w.Raw("null")
		return
	}
	w.String(*s)
}

// Flush writes what is buffered and returns the first error met.
func (w *Writer) Flush() error {
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
	return w.err
}

func (w *Writer) flushFull() {
	if len(w.buf) >= 3*chunk {
		w.Flush()
	}
}

// cut returns how many of s's first bytes to escape as one chunk: at most
// chunk, ending before a byte that does not continue a UTF-8 sequence, so
// that no sequence is split and escaping the chunks one by one gives what
// escaping s at once gives (an invalid byte is replaced on its own either
// way). Four continuation bytes in a row are invalid whatever follows, so
// the search looks back at most that far.
func cut[T string | []byte](s T) int {
	if len(s) <= chunk {
		return len(s)
	}
	for n := chunk; n > chunk-4; n-- {
		if !isContinuation(s[n]) {
			return n
		}
	}
	return chunk
}

func isContinuation(c byte) bool { return c&0xC0 == 0x80 }
