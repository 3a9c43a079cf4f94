package mailparse

import (
	"bytes"
	"strings"
)

// splitHeader splits an entity into its header block and its body. The
// header ends at the first empty line; without one, the whole entity is
// header. An entity whose first line cannot start a header field (a MIME part
// that goes straight into its content) has no header at all. For the
// top-level message (mbox is true) a leading UTF-8 byte order mark and mbox
// "From " line are skipped.
func splitHeader(b []byte, mbox bool) (hdr, body []byte) {
	if mbox {
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a byte order mark from an editor
	}
	line, rest := nextLine(b)
	if _, _, isField := fieldLine(line); mbox && !isField && bytes.HasPrefix(line, []byte("From ")) {
		b = rest // "From sender date", not "From : name <addr>"
		line, _ = nextLine(b)
	}
	if len(line) == 0 {
		return nil, b[lineLen(b):]
	}
	if _, _, ok := fieldLine(line); !ok {
		return nil, b
	}
	for off := 0; off < len(b); {
		n := lineLen(b[off:])
		line, _ := nextLine(b[off:])
		if len(line) == 0 {
			return b[:off], b[off+n:]
		}
		off += n
	}
	return b, nil
}

// nextLine returns the first line of b without its line break, and the rest.
func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return trimCR(b), nil
	}
	return trimCR(b[:i]), b[i+1:]
}

// lineLen returns the length of the first line of b including its line break.
func lineLen(b []byte) int {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return i + 1
	}
	return len(b)
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// fieldLine reports whether line starts a header field, "name: value", and
// returns its name and the rest of the line after the colon. The name is
// printable US-ASCII; white space before the colon (obsolete syntax) is
// allowed and dropped.
func fieldLine(line []byte) (name, value []byte, ok bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return nil, nil, false
	}
	name = bytes.TrimRight(line[:i], " \t")
	if len(name) == 0 {
		return nil, nil, false
	}
	for _, c := range name {
		if c <= ' ' || c > '~' {
			return nil, nil, false
		}
	}
	return name, line[i+1:], true
}

// fieldScanner walks the fields of a header block in order. A line that
// neither starts a field nor is indented is taken as a continuation of the
// field before it (a folding mistake), so no text is lost and a broken line
// does not end the header; lines before the first field are skipped.
type fieldScanner struct {
	rest []byte
}

// next returns the next field's name as written and its raw value: folded,
// with the line breaks of its continuation lines, without the final one.
func (s *fieldScanner) next() (name, value []byte, ok bool) {
	for len(s.rest) > 0 {
		b := s.rest
		n := lineLen(b)
		line, _ := nextLine(b)
		name, v, isField := fieldLine(line)
		if !isField {
			s.rest = b[n:]
			continue
		}
		start := len(line) - len(v) // offset of the value in b
		end := len(line)
		off := n
		for off < len(b) {
			c := b[off]
			cn := lineLen(b[off:])
			cline, _ := nextLine(b[off:])
			if c != ' ' && c != '\t' {
				if _, _, f := fieldLine(cline); f {
					break
				}
			}
			end = off + len(cline)
			off += cn
		}
		s.rest = b[off:]
		return name, b[start:end], true
	}
	return nil, nil, false
}

// unfold joins the lines of a folded value and trims it. Each line break,
// together with the white space around it, becomes one space, so indentation
// of continuation lines does not end up in the value. When there is nothing
// to join it returns a subslice of v.
func unfold(v []byte) []byte {
	v = bytes.Trim(v, " \t\r\n")
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return v
	}
	out := make([]byte, 0, len(v))
	for len(v) > 0 {
		i := bytes.IndexAny(v, "\r\n")
		if i < 0 {
			out = append(out, v...)
			break
		}
		out = append(out, bytes.TrimRight(v[:i], " \t")...)
		v = bytes.TrimLeft(v[i:], " \t\r\n")
		if len(v) > 0 {
			out = append(out, ' ')
		}
	}
	return out
}

// equalFold reports whether the ASCII bytes b equal the lower-case string s,
// ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// lowerASCII returns b lower-cased as a string.
func lowerASCII(b []byte) string {
	i := 0
	for i < len(b) && !('A' <= b[i] && b[i] <= 'Z') {
		i++
	}
	if i == len(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	sb.Write(b[:i])
	for _, c := range b[i:] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		sb.WriteByte(c)
	}
	return sb.String()
}
