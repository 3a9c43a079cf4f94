package mailparse

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
)

// headerDecoder turns header text into valid UTF-8: it decodes RFC 2047
// encoded words, and reads 8-bit text that is not UTF-8 in the charset the
// message declares for its body (raw Shift_JIS or Latin-1 headers are common
// in the wild), or replaces it with U+FFFD when there is none.
type headerDecoder struct {
	raw8 encoding.Encoding // nil: replace invalid UTF-8
}

// plain returns text that holds no encoded words as valid UTF-8.
func (d *headerDecoder) plain(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	if d.raw8 != nil {
		if out, err := d.raw8.NewDecoder().Bytes(b); err == nil {
			return validString(out)
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// charset returns b, written in the charset label, as valid UTF-8. Unknown
// labels are read as UTF-8.
func (d *headerDecoder) charset(label string, b []byte) string {
	if label == "" {
		return d.plain(b)
	}
	return validString(decodeCharset(lookupCharset(label), b))
}

// words decodes the RFC 2047 encoded words in an unfolded header value
// (RFC 2047 section 6.2). White space between two adjacent encoded words is
// dropped, and adjacent words in the same charset are decoded together, so a
// multi-byte character split across two words survives. Encoded words are
// also recognised inside quoted strings and next to other text, as mail
// programs do. Something that only looks like an encoded word stays as
// written.
func (d *headerDecoder) words(v []byte) string {
	first := bytes.Index(v, []byte("=?"))
	if first < 0 {
		return d.plain(v)
	}
	var sb strings.Builder
	sb.Grow(len(v))
	var (
		pending   []byte // decoded bytes of adjacent words in pendingCS
		pendingCS string
		plainFrom int  // start of text not yet written
		afterWord bool // v[plainFrom:] follows an encoded word
	)
	flush := func() {
		if pendingCS != "" || len(pending) > 0 {
			sb.WriteString(validString(decodeCharset(lookupCharset(pendingCS), pending)))
			pending, pendingCS = pending[:0], ""
		}
	}
	for search := first; search < len(v); {
		i := bytes.Index(v[search:], []byte("=?"))
		if i < 0 {
			break
		}
		start := search + i
		cs, enc, text, end, ok := encodedWord(v, start)
		if end < 0 {
			break // no "?=" in the rest: no later word can end either
		}
		if !ok {
			search = start + 2
			continue
		}
		between := v[plainFrom:start]
		if !afterWord || len(bytes.Trim(between, " \t")) > 0 {
			flush()
			sb.WriteString(d.plain(between))
		}
		if !strings.EqualFold(cs, pendingCS) {
			flush()
			pendingCS = cs
		}
		if enc == 'B' {
			pending = decodeBase64(pending, text)
		} else {
			pending = decodeQEncoding(pending, text)
		}
		plainFrom, search, afterWord = end, end, true
	}
	flush()
	sb.WriteString(d.plain(v[plainFrom:]))
	return sb.String()
}

// encodedWord parses "=?charset?B?text?=" at v[start:]. The charset may
// carry an RFC 2231 language ("utf-8*en"), which is dropped. When there is
// no "?=" after start at all, end is -1, so callers can stop looking: each
// failed look costs a scan to the end of v.
func encodedWord(v []byte, start int) (charset string, enc byte, text []byte, end int, ok bool) {
	rest := v[start+2:]
	q := bytes.IndexByte(rest[:min(len(rest), 65)], '?')
	if q <= 0 || len(rest) < q+3 || rest[q+2] != '?' {
		return "", 0, nil, 0, false
	}
	cs := rest[:q]
	for _, c := range cs {
		if c <= ' ' || c >= 0x7f || c == '=' {
			return "", 0, nil, 0, false
		}
	}
	switch rest[q+1] {
	case 'B', 'b':
		enc = 'B'
	case 'Q', 'q':
		enc = 'Q'
	default:
		return "", 0, nil, 0, false
	}
	body := rest[q+3:]
	e := bytes.Index(body, []byte("?="))
	if e < 0 {
		return "", 0, nil, -1, false
	}
	if i := bytes.IndexByte(cs, '*'); i >= 0 {
		cs = cs[:i]
	}
	end = start + 2 + q + 3 + e + 2
	return string(cs), enc, body[:e], end, true
}

// decodeQEncoding appends the RFC 2047 "Q" decoding of text to dst: "_" is a
// space and =XX a byte; anything else is taken as written.
func decodeQEncoding(dst, text []byte) []byte {
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '_':
			dst = append(dst, ' ')
		case c == '=' && i+2 < len(text) && isHex(text[i+1]) && isHex(text[i+2]):
			dst = append(dst, unhex(text[i+1])<<4|unhex(text[i+2]))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
