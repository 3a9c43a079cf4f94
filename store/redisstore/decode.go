package redisstore

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Listing decodes four JSON values per email (the fixed part, subject,
// notes and labels). With json.Unmarshal alone a page of 25 costs about
// 90 µs more (BenchmarkDecodePage 15 -> 92 µs, BenchmarkListPage 115 ->
// 320 µs, best of six runs each): most of a list request on Redis. The fast
// paths below read the values as record.values writes them (json.Marshal's
// output: no spaces, fields in order) and leave everything else to
// encoding/json: each either returns exactly what json.Unmarshal would, or
// reports that it cannot. TestFastDecodeMatchesEncodingJSON and
// FuzzDecodeFields check that, and that what the store writes takes them.

// jsonScanner reads a JSON text of a known shape from the front of s; the
// first mismatch clears ok, and later reads return zero values.
type jsonScanner struct {
	s  string
	ok bool
}

// lit consumes l.
func (p *jsonScanner) lit(l string) {
	if !p.ok || !strings.HasPrefix(p.s, l) {
		p.ok = false
		return
	}
	p.s = p.s[len(l):]
}

// plainByte[c] reports whether c stands for itself in a JSON string: ASCII
// other than control characters, quote and backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str consumes a string literal and returns its value. It takes the
// escapes encoding/json writes; literals with invalid UTF-8 or escaped
// surrogates, which encoding/json reads with replacements, fail.
func (p *jsonScanner) str() string {
	if !p.ok || len(p.s) == 0 || p.s[0] != '"' {
		p.ok = false
		return ""
	}
	escaped, ascii := false, true
	i := 1
	for ; i < len(p.s); i++ {
		c := p.s[i]
		if plainByte[c] {
			continue
		}
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			escaped = true
			i++ // the escaped byte is checked by unescape
		case c < 0x20:
			p.ok = false
			return ""
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if i >= len(p.s) {
		p.ok = false
		return ""
	}
	v := p.s[1:i]
	p.s = p.s[i+1:]
	if !ascii && !utf8.ValidString(v) {
		p.ok = false
		return ""
	}
	if escaped {
		v, p.ok = unescape(v)
	}
	return v
}

// unescape returns the value of v, the valid UTF-8 between the quotes of
// a JSON string with escapes in it.
func unescape(v string) (string, bool) {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); {
		if v[i] != '\\' {
			b.WriteByte(v[i])
			i++
			continue
		}
		if i+1 == len(v) {
			return "", false
		}
		switch c := v[i+1]; c {
		case '"', '\\', '/':
			b.WriteByte(c)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(v[i+2:])
			if !ok || utf16.IsSurrogate(r) {
				return "", false
			}
			b.WriteRune(r)
			i += 4
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// hex4 reads four hexadecimal digits from the front of s.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// optStr consumes null or a string literal.
func (p *jsonScanner) optStr() *string {
	if strings.HasPrefix(p.s, "null") {
		p.s = p.s[4:]
		return nil
	}
	v := p.str()
	return &v
}

// int consumes a JSON integer (no fraction, no exponent) that fits int64.
func (p *jsonScanner) int() int64 {
	if !p.ok {
		return 0
	}
	i := 0
	if i < len(p.s) && p.s[i] == '-' {
		i++
	}
	digits := i
	for i < len(p.s) && p.s[i] >= '0' && p.s[i] <= '9' {
		i++
	}
	// JSON allows no leading zero; the text after the number is checked by
	// the caller's next lit, so "1.5" or "1e3" fail there.
	if i == digits || (p.s[digits] == '0' && i > digits+1) {
		p.ok = false
		return 0
	}
	n, err := strconv.ParseInt(p.s[:i], 10, 64)
	if err != nil {
		p.ok = false
		return 0
	}
	p.s = p.s[i:]
	return n
}

// end reports whether everything was read as expected.
func (p *jsonScanner) end() bool { return p.ok && p.s == "" }

// fastFixed decodes fixed's JSON as record.values writes it: the fields in
// declaration order, no spaces.
func fastFixed(s string) (fixed, bool) {
	p := jsonScanner{s: s, ok: true}
	var f fixed
	p.lit(`{"b":`)
	f.Body = p.str()
	// Records of the records hash leave the id and the account out.
	if strings.HasPrefix(p.s, `,"id":`) {
		p.lit(`,"id":`)
		f.ID = p.str()
	}
	if strings.HasPrefix(p.s, `,"acc":`) {
		p.lit(`,"acc":`)
		f.AccountID = p.str()
	}
	p.lit(`,"mid":`)
	f.MessageID = p.optStr()
	p.lit(`,"from":`)
	f.Sender = p.str()
	p.lit(`,"to":`)
	f.Recipient = p.str()
	p.lit(`,"size":`)
	f.RawSize = p.int()
	p.lit(`,"recv":`)
	f.ReceivedAt = p.int()
	p.lit(`,"created":`)
	f.CreatedAt = p.int()
	p.lit(`}`)
	return f, p.end()
}

// fastOptString decodes null or a string.
func fastOptString(s string) (*string, bool) {
	p := jsonScanner{s: s, ok: true}
	v := p.optStr()
	return v, p.end()
}

// fastStrings decodes null or an array of strings, with no spaces.
func fastStrings(s string) ([]string, bool) {
	switch s {
	case "null":
		return nil, true
	case "[]":
		return []string{}, true
	}
	p := jsonScanner{s: s, ok: true}
	p.lit("[")
	out := make([]string, 0, 1+strings.Count(s, ","))
	for p.ok {
		out = append(out, p.str())
		if strings.HasPrefix(p.s, ",") {
			p.s = p.s[1:]
			continue
		}
		p.lit("]")
		break
	}
	return out, p.end()
}
