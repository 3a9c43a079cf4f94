package mailparse

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
)

// Content-Transfer-Encoding decoding. The decoders are deliberately more
// forgiving than mime/quotedprintable and encoding/base64: real mail contains
// stray characters, missing padding and lower-case hex, and a decoding error
// must never lose the rest of a part.

const (
	b64Invalid = 0xff
	b64Pad     = 0xfe
)

// b64Value maps a byte to its value in the standard base64 alphabet, to
// b64Pad for '=' and to b64Invalid for anything else.
var b64Value = func() (t [256]byte) {
	for i := range t {
		t[i] = b64Invalid
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	t['='] = b64Pad
	return t
}()

// decodeBase64 appends the bytes encoded in src to dst. Bytes outside the
// alphabet (line breaks, stray characters) are skipped; '=' ends the current
// quantum, so concatenated padded blocks decode as they were meant to; a
// final quantum without padding is decoded as far as it goes.
func decodeBase64(dst, src []byte) []byte {
	var acc uint32
	n := 0
	for _, c := range src {
		v := b64Value[c]
		if v < 64 {
			acc = acc<<6 | uint32(v)
			n++
			if n == 4 {
				dst = append(dst, byte(acc>>16), byte(acc>>8), byte(acc))
				acc, n = 0, 0
			}
			continue
		}
		if v == b64Pad && n > 0 {
			dst = flushBase64(dst, acc, n)
			acc, n = 0, 0
		}
	}
	return flushBase64(dst, acc, n)
}

func flushBase64(dst []byte, acc uint32, n int) []byte {
	switch n {
	case 2:
		return append(dst, byte(acc>>4))
	case 3:
		return append(dst, byte(acc>>10), byte(acc>>2))
	}
	return dst
}

// base64Size returns len(decodeBase64(nil, src)) without decoding.
//
// It is on the path of every attachment, so the common case is one pass
// that only counts alphabet characters: when no '=' is followed by more
// alphabet characters, every quantum before the padding is whole and the
// size follows from the count. Other input takes base64SizeSlow.
func base64Size(src []byte) int {
	end := bytes.IndexByte(src, '=')
	if end < 0 {
		end = len(src)
	}
	valid := countAlphabet(src[:end])
	for _, c := range src[end:] {
		if b64Alphabet[c] != 0 {
			return base64SizeSlow(src)
		}
	}
	return valid/4*3 + partialQuantum[valid%4]
}

// countAlphabet counts the bytes of s in the base64 alphabet, eight at a
// time into four sums, so that the table lookups do not wait on one
// another: about twice as fast as one byte at a time.
func countAlphabet(s []byte) int {
	var a, b, c, d int
	for len(s) >= 8 {
		_ = s[7]
		a += int(b64Alphabet[s[0]]) + int(b64Alphabet[s[4]])
		b += int(b64Alphabet[s[1]]) + int(b64Alphabet[s[5]])
		c += int(b64Alphabet[s[2]]) + int(b64Alphabet[s[6]])
		d += int(b64Alphabet[s[3]]) + int(b64Alphabet[s[7]])
		s = s[8:]
	}
	for _, x := range s {
		a += int(b64Alphabet[x])
	}
	return a + b + c + d
}

// b64Alphabet is 1 for the bytes of the standard base64 alphabet, else 0.
var b64Alphabet = func() (t [256]uint8) {
	for i, v := range b64Value {
		if v < 64 {
			t[i] = 1
		}
	}
	return t
}()

// base64SizeSlow is base64Size for any input: it follows decodeBase64's
// quanta, where a '=' ends the current one.
func base64SizeSlow(src []byte) int {
	size, n := 0, 0
	for _, c := range src {
		v := b64Value[c]
		if v < 64 {
			n++
			if n == 4 {
				size += 3
				n = 0
			}
			continue
		}
		if v == b64Pad && n > 0 {
			size += partialQuantum[n]
			n = 0
		}
	}
	return size + partialQuantum[n]
}

// partialQuantum is the number of bytes a quantum of n < 4 characters holds.
var partialQuantum = [4]int{0, 0, 1, 2}

// decodeQP appends the quoted-printable decoding of src to dst (RFC 2045
// section 6.7). Trailing white space on a line is transport padding and is
// dropped; "=" at the end of a line is a soft line break; an "=" that does
// not start a valid escape is kept as it is. Line breaks are kept as written.
func decodeQP(dst, src []byte) []byte {
	for len(src) > 0 {
		line, eol := src, []byte(nil)
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i], src[i+1:]
			eol = crlf[1:]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
				eol = crlf
			}
		} else {
			src = nil
		}
		line = bytes.TrimRight(line, " \t")
		soft := false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != '=' {
				dst = append(dst, c)
				continue
			}
			if i == len(line)-1 {
				soft = true
				break
			}
			if i+2 < len(line) && isHex(line[i+1]) && isHex(line[i+2]) {
				dst = append(dst, unhex(line[i+1])<<4|unhex(line[i+2]))
				i += 2
				continue
			}
			dst = append(dst, '=')
		}
		if !soft {
			dst = append(dst, eol...)
		}
	}
	return dst
}

var crlf = []byte("\r\n")

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// transferEncoding names how a part body is encoded.
type transferEncoding int

const (
	encIdentity transferEncoding = iota // 7bit, 8bit, binary, absent or unknown
	encBase64
	encQP
)

// parseTransferEncoding reads a Content-Transfer-Encoding value. Unknown
// encodings are taken as identity: the bytes are used as they are.
func parseTransferEncoding(v []byte) transferEncoding {
	v = bytes.TrimSpace(v)
	if i := bytes.IndexAny(v, " \t;("); i >= 0 {
		v = v[:i]
	}
	switch {
	case bytes.EqualFold(v, []byte("base64")):
		return encBase64
	case bytes.EqualFold(v, []byte("quoted-printable")):
		return encQP
	}
	return encIdentity
}

// decodeTransfer returns the decoded body. For identity encodings it returns
// body itself, not a copy.
func decodeTransfer(enc transferEncoding, body []byte) []byte {
	switch enc {
	case encBase64:
		return decodeBase64(make([]byte, 0, len(body)*3/4+3), body)
	case encQP:
		return decodeQP(make([]byte, 0, len(body)), body)
	}
	return body
}

// decodedSize returns len(decodeTransfer(enc, body)), without allocating
// for the common encodings.
func decodedSize(enc transferEncoding, body []byte) int {
	switch enc {
	case encBase64:
		return base64Size(body)
	case encQP:
		return len(decodeQP(nil, body))
	}
	return len(body)
}

// Character sets.

// charsetAliases holds labels that the WHATWG and IANA indexes do not know
// or map differently from what mail means by them.
var charsetAliases = map[string]encoding.Encoding{
	// RFC 2781: UTF-16 without a byte order mark is big-endian (the WHATWG
	// index says little-endian, which is right for the web only).
	"utf-16":        unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
	"utf16":         unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
	"ucs-2":         unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
	"cp932":         japanese.ShiftJIS,
	"ms932":         japanese.ShiftJIS,
	"sjis":          japanese.ShiftJIS,
	"shift-jis":     japanese.ShiftJIS,
	"x-sjis-open":   japanese.ShiftJIS,
	"iso-2022-jp-1": japanese.ISO2022JP,
	"iso-2022-jp-2": japanese.ISO2022JP,
	"iso-2022-jp-3": japanese.ISO2022JP,
	"cp936":         simplifiedchinese.GBK,
	"ms936":         simplifiedchinese.GBK,
	"cp949":         korean.EUCKR,
	"ms949":         korean.EUCKR,
	"uhc":           korean.EUCKR,
	"ks_c_5601":     korean.EUCKR,
}

// lookupCharset returns the encoding a charset label names, or nil when the
// text is to be taken as UTF-8: for UTF-8 and US-ASCII (mail labelled
// US-ASCII often carries UTF-8), and for labels no index knows.
func lookupCharset(label string) encoding.Encoding {
	label = strings.Trim(label, " \t\r\n\"'")
	if i := strings.IndexAny(label, " \t(;"); i >= 0 {
		label = label[:i]
	}
	if label == "" || len(label) > 64 {
		return nil
	}
	label = strings.ToLower(label)
	switch label {
	case "utf-8", "utf8", "us-ascii", "ascii", "x-unknown", "unknown", "unknown-8bit", "x-user-defined", "default":
		return nil
	}
	if i := strings.IndexByte(label, '*'); i >= 0 { // RFC 2231 language suffix
		label = label[:i]
	}
	if enc, ok := charsetAliases[label]; ok {
		return enc
	}
	if enc, err := htmlindex.Get(label); err == nil && enc != nil {
		return usable(enc)
	}
	if enc, err := ianaindex.MIME.Encoding(label); err == nil && enc != nil {
		return usable(enc)
	}
	if enc, err := ianaindex.IANA.Encoding(label); err == nil && enc != nil {
		return usable(enc)
	}
	return nil
}

// usable turns encodings that would throw the text away (the WHATWG
// "replacement" encoding for ISO-2022-KR and friends) and those that are UTF-8
// anyway into nil, so the bytes are read as UTF-8 instead.
func usable(enc encoding.Encoding) encoding.Encoding {
	if enc == encoding.Replacement || enc == unicode.UTF8 || enc == encoding.Nop {
		return nil
	}
	return enc
}

// decodeCharset converts b from the encoding enc to UTF-8. A nil enc means
// UTF-8. The result may contain invalid UTF-8 only if the decoder produced
// it; callers make it valid.
func decodeCharset(enc encoding.Encoding, b []byte) []byte {
	if enc == nil || len(b) == 0 {
		return b
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return b
	}
	return out
}

// textString returns b as valid UTF-8 with CRLF line breaks turned into LF,
// in one allocation when b is already valid.
func textString(b []byte) string {
	if bytes.IndexByte(b, '\r') < 0 {
		return validString(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for len(b) > 0 {
		i := bytes.Index(b, crlf)
		if i < 0 {
			sb.Write(b)
			break
		}
		sb.Write(b[:i])
		sb.WriteByte('\n')
		b = b[i+2:]
	}
	s := sb.String()
	if !utf8.ValidString(s) {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// validString returns b as a string, with invalid UTF-8 sequences replaced
// by U+FFFD.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
