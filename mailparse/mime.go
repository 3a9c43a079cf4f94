package mailparse

import (
	"bytes"
	"strconv"
	"strings"
)

// headerValue is a parsed Content-Type or Content-Disposition value: a
// lower-case token and its parameters. mime.ParseMediaType is not used
// because it rejects whole values for one bad parameter, and real mail has
// unquoted spaces, "=?...?=" and missing semicolons in parameter values.
type headerValue struct {
	token  string // lower-case, e.g. "multipart/mixed" or "attachment"
	params []param
}

type param struct {
	name  string // lower-case, with any RFC 2231 "*n" or "*" suffix
	value []byte // unquoted, may alias the header
}

// parseHeaderValue parses `token; name=value; name="quoted value"`. v must be
// unfolded.
func parseHeaderValue(v []byte) headerValue {
	v = bytes.TrimSpace(v)
	tok, rest := v, []byte(nil)
	// The token ends at the semicolon, or at white space when the semicolon
	// is missing ("multipart/mixed boundary=x") or a comment follows.
	if i := bytes.IndexAny(v, "; \t("); i >= 0 {
		tok, rest = v[:i], v[i:]
	}
	return headerValue{token: lowerASCII(tok), params: parseParams(rest)}
}

// parseParams parses a parameter list after the first semicolon.
func parseParams(b []byte) []param {
	var ps []param
	for len(b) > 0 && len(ps) < 64 {
		b = bytes.TrimLeft(b, " \t;")
		seg := b
		semi := bytes.IndexByte(b, ';')
		if semi >= 0 {
			seg = b[:semi]
		}
		eq := bytes.IndexByte(seg, '=')
		if eq < 0 {
			if semi < 0 {
				break
			}
			b = b[semi+1:] // a parameter without a value
			continue
		}
		name := bytes.TrimSpace(b[:eq])
		b = bytes.TrimLeft(b[eq+1:], " \t")
		var value []byte
		if len(b) > 0 && b[0] == '"' {
			value, b = quotedString(b)
			if i := bytes.IndexByte(b, ';'); i >= 0 {
				b = b[i+1:]
			} else {
				b = nil
			}
		} else {
			value, b = unquotedValue(b)
		}
		if len(name) > 0 {
			ps = append(ps, param{name: lowerASCII(name), value: value})
		}
	}
	return ps
}

// quotedString reads a quoted string at the start of b and returns its
// content with escapes removed, and what follows the closing quote. An
// unterminated string runs to the end.
func quotedString(b []byte) (value, rest []byte) {
	b = b[1:]
	end := -1
	escaped := false
	for i, c := range b {
		if c == '\\' {
			escaped = true
			break
		}
		if c == '"' {
			end = i
			break
		}
	}
	if !escaped {
		if end < 0 {
			return b, nil
		}
		return b[:end], b[end+1:]
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\\' && i+1 < len(b):
			i++
			out = append(out, b[i])
		case c == '"':
			return out, b[i+1:]
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// unquotedValue reads a parameter value that is not quoted. It runs to the
// next semicolon, so unquoted spaces and "=?...?=" survive, except that a
// white-space separated "name=" starts the next parameter (a missing
// semicolon).
func unquotedValue(b []byte) (value, rest []byte) {
	end := len(b)
	if i := bytes.IndexByte(b, ';'); i >= 0 {
		end = i
	}
	v := b[:end]
	for i := 0; i < len(v); i++ {
		if v[i] != ' ' && v[i] != '\t' {
			continue
		}
		j := i + 1
		for j < len(v) && isTokenChar(v[j]) {
			j++
		}
		if j > i+1 && j < len(v) && v[j] == '=' {
			return bytes.TrimRight(v[:i], " \t"), b[i:]
		}
	}
	if end < len(b) {
		return bytes.TrimRight(v, " \t"), b[end+1:]
	}
	return bytes.TrimRight(v, " \t"), nil
}

// isTokenChar reports whether c may appear in an RFC 2045 token.
func isTokenChar(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	return !strings.ContainsRune(`()<>@,;:\"/[]?=`, rune(c))
}

// get returns the value of the parameter name, joining RFC 2231
// continuations and decoding RFC 2231 extended values and RFC 2047 encoded
// words into valid UTF-8.
func (hv *headerValue) get(name string, dec *headerDecoder) (string, bool) {
	if len(hv.params) == 0 {
		return "", false
	}
	// name*=charset'lang'value
	for _, p := range hv.params {
		if len(p.name) == len(name)+1 && strings.HasPrefix(p.name, name) && p.name[len(name)] == '*' {
			cs, v := split2231(p.value)
			return dec.charset(cs, percentDecode(nil, v)), true
		}
	}
	// name*0, name*1*, ...
	if s, ok := hv.continued(name, dec); ok {
		return s, true
	}
	for _, p := range hv.params {
		if p.name == name {
			return dec.words(p.value), true
		}
	}
	return "", false
}

// continued joins the RFC 2231 continuation parameters name*0, name*1, ...
// (each possibly extended, name*n*=) in index order, stopping at a gap.
func (hv *headerValue) continued(name string, dec *headerDecoder) (string, bool) {
	prefix := name + "*"
	var buf []byte
	cs := ""
	found := false
	extended := false
	for n := 0; n < len(hv.params); n++ {
		idx := strconv.Itoa(n)
		seg := -1
		segExt := false
		for i, p := range hv.params {
			if !strings.HasPrefix(p.name, prefix) {
				continue
			}
			suffix := p.name[len(prefix):]
			if suffix == idx {
				seg = i
				break
			}
			if len(suffix) == len(idx)+1 && strings.HasPrefix(suffix, idx) && suffix[len(idx)] == '*' {
				seg, segExt = i, true
				break
			}
		}
		if seg < 0 {
			break
		}
		found = true
		v := hv.params[seg].value
		if segExt {
			extended = true
			if n == 0 {
				cs, v = split2231(v)
			}
			buf = percentDecode(buf, v)
		} else {
			buf = append(buf, v...)
		}
	}
	if !found {
		return "", false
	}
	if extended {
		return dec.charset(cs, buf), true
	}
	return dec.words(buf), true
}

// split2231 splits an RFC 2231 extended value charset'language'text. A value
// without the two quotes is all text.
func split2231(v []byte) (charset string, text []byte) {
	i := bytes.IndexByte(v, '\'')
	if i < 0 {
		return "", v
	}
	j := bytes.IndexByte(v[i+1:], '\'')
	if j < 0 {
		return "", v
	}
	return string(v[:i]), v[i+1+j+1:]
}

// percentDecode appends v with %XX escapes decoded to dst; a '%' that does
// not start an escape is kept.
func percentDecode(dst, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '%' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]) {
			dst = append(dst, unhex(v[i+1])<<4|unhex(v[i+2]))
			i += 2
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// splitMultipart calls fn with each body part of a multipart body, in order,
// until fn returns false. The boundary delimiter is a line that starts with
// "--" boundary and continues with nothing but white space; the close
// delimiter adds "--" (a single "-" is tolerated). The line break before a
// delimiter belongs to it. The preamble and epilogue are dropped; a missing
// close delimiter ends the last part at the end of the body. It reports
// whether any delimiter was found.
func splitMultipart(body []byte, boundary string, fn func(part []byte) bool) bool {
	if boundary == "" {
		return false
	}
	delim := make([]byte, 0, len(boundary)+2)
	delim = append(append(delim, "--"...), boundary...)
	start := -1 // start of the current part, -1 before the first delimiter
	found := false
	for off := 0; off <= len(body); {
		i := bytes.Index(body[off:], delim)
		if i < 0 {
			break
		}
		pos := off + i
		off = pos + len(delim)
		if pos > 0 && body[pos-1] != '\n' {
			continue
		}
		closing, lineEnd, ok := delimiterLine(body[pos+len(delim):])
		if !ok {
			continue
		}
		found = true
		if start >= 0 {
			// Adjacent delimiters share the line break: an empty part.
			if !fn(body[start:max(start, trimLineBreak(body, pos))]) {
				return true
			}
		}
		if closing {
			return true
		}
		start = pos + len(delim) + lineEnd
		off = start
	}
	if start >= 0 {
		fn(body[start:])
	}
	return found
}

// delimiterLine checks what follows "--boundary": "--" or "-" for the close
// delimiter, then white space to the end of the line. It returns the length
// through the end of the line.
func delimiterLine(b []byte) (closing bool, n int, ok bool) {
	if len(b) > 0 && b[0] == '-' {
		closing = true
		n = 1
		if len(b) > 1 && b[1] == '-' {
			n = 2
		}
	}
	for ; n < len(b); n++ {
		switch b[n] {
		case ' ', '\t', '\r':
		case '\n':
			return closing, n + 1, true
		default:
			return false, 0, false
		}
	}
	return closing, n, true
}

// trimLineBreak returns the end of the part that precedes the delimiter at
// pos: the CRLF or LF before it belongs to the delimiter.
func trimLineBreak(body []byte, pos int) int {
	if pos > 0 && body[pos-1] == '\n' {
		pos--
		if pos > 0 && body[pos-1] == '\r' {
			pos--
		}
	}
	return pos
}

// guessBoundary finds a boundary in a multipart body whose Content-Type
// names none, or one that does not occur: the first line that looks like a
// delimiter, "--" followed by something.
func guessBoundary(body []byte) string {
	for len(body) > 0 {
		line, rest := nextLine(body)
		body = rest
		if len(line) > 2 && line[0] == '-' && line[1] == '-' {
			b := bytes.TrimRight(line[2:], " \t")
			if len(b) <= 200 && len(bytes.Trim(b, "-")) > 0 {
				return string(b)
			}
		}
	}
	return ""
}

// raw returns the value of the plain parameter name as written.
func (hv *headerValue) raw(name string) (string, bool) {
	for _, p := range hv.params {
		if p.name == name {
			return string(p.value), true
		}
	}
	return "", false
}
