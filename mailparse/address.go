package mailparse

import "bytes"

// appendAddresses appends the bare addresses of an address-list header
// (RFC 5322 section 3.4) to out. It is lenient where net/mail is strict, so one
// odd mailbox does not lose the others:
//   - "Name <addr>" yields addr; comments, white space and an obsolete route
//     ("<@host:addr>") inside the angle brackets are dropped;
//   - group syntax ("Team: a@x, b@y;") yields the members;
//   - outside angle brackets, every word that contains "@" is an address,
//     so "a@x b@y" without a comma yields two; words are joined across white
//     space next to "." or "@" ("jdoe@test . example");
//   - quoted strings are kept as written.
//
// Display names are not decoded: addresses are taken from the raw value.
func appendAddresses(out []string, v []byte) []string {
	var (
		words  [][]byte // words of the current mailbox outside <>
		cur    []byte   // word being built
		space  bool     // white space or a comment since the last token
		angles []string // addresses in <> in the current mailbox
	)
	endWord := func() {
		if len(cur) > 0 {
			words = append(words, cur)
			cur = nil
		}
	}
	addToken := func(tok []byte, special bool) {
		if space && len(cur) > 0 && !special && !joins(cur[len(cur)-1]) {
			endWord()
		}
		cur = append(cur, tok...)
		space = false
	}
	endMailbox := func() {
		endWord()
		if len(angles) > 0 {
			out = append(out, angles...)
		} else {
			for _, w := range words {
				if bytes.IndexByte(w, '@') >= 0 {
					out = append(out, validString(w))
				}
			}
		}
		words, angles, space = words[:0], angles[:0], false
	}
	for i := 0; i < len(v); {
		c := v[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			space = true
			i++
		case '(':
			i = skipComment(v, i)
			space = true
		case '"', '[':
			j := skipQuoted(v, i)
			addToken(v[i:j], false)
			i = j
		case '<':
			addr, j := angleAddr(v, i)
			if addr != "" {
				angles = append(angles, addr)
			}
			endWord()
			i = j
		case ',', ';':
			endMailbox()
			i++
		case ':':
			// The display name of a group.
			endWord()
			words = words[:0]
			i++
		case '.', '@':
			addToken(v[i:i+1], true)
			i++
		case '>', ')', ']':
			i++ // stray closers
		default:
			j := i
			for j < len(v) && !isAddrSpecial(v[j]) {
				j++
			}
			addToken(v[i:j], false)
			i = j
		}
	}
	endMailbox()
	return out
}

// joins reports whether a word ending in c continues across white space.
func joins(c byte) bool { return c == '.' || c == '@' }

func isAddrSpecial(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '(', ')', '"', '[', ']', '<', '>', ',', ';', ':', '.', '@':
		return true
	}
	return false
}

// skipComment returns the index after the (possibly nested) comment at v[i].
func skipComment(v []byte, i int) int {
	depth := 0
	for ; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(v)
}

// skipQuoted returns the index after the quoted string or domain literal at
// v[i], or len(v) when it is not closed.
func skipQuoted(v []byte, i int) int {
	closer := byte('"')
	if v[i] == '[' {
		closer = ']'
	}
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case closer:
			return i + 1
		}
	}
	return len(v)
}

// angleAddr reads the address in the angle brackets at v[i], without white
// space, comments and source route, and returns it with the index after '>'.
func angleAddr(v []byte, i int) (string, int) {
	var addr []byte
	for i++; i < len(v); {
		switch c := v[i]; c {
		case '>':
			return validString(addr), i + 1
		case ' ', '\t', '\r', '\n':
			i++
		case '(':
			i = skipComment(v, i)
		case '"', '[':
			j := skipQuoted(v, i)
			addr = append(addr, v[i:j]...)
			i = j
		case ':':
			addr = addr[:0] // "@route:" before the address
			i++
		default:
			addr = append(addr, c)
			i++
		}
	}
	return validString(addr), len(v)
}

// cleanID returns a Message-ID without angle brackets, white space and
// comments: "<1234 @ local(blah) .example>" gives "1234@local.example".
func cleanID(v []byte) string {
	v = bytes.TrimSpace(v)
	if i := bytes.IndexByte(v, '<'); i >= 0 {
		id, _ := angleAddrKeepColon(v, i)
		return id
	}
	if bytes.IndexAny(v, " \t\r\n(") < 0 {
		return validString(v)
	}
	var out []byte
	for i := 0; i < len(v); {
		switch c := v[i]; c {
		case ' ', '\t', '\r', '\n':
			i++
		case '(':
			i = skipComment(v, i)
		default:
			out = append(out, c)
			i++
		}
	}
	return validString(out)
}

// angleAddrKeepColon is angleAddr for message ids, where ':' is not a route.
func angleAddrKeepColon(v []byte, i int) (string, int) {
	var id []byte
	for i++; i < len(v); {
		switch c := v[i]; c {
		case '>':
			return validString(id), i + 1
		case ' ', '\t', '\r', '\n':
			i++
		case '(':
			i = skipComment(v, i)
		default:
			id = append(id, c)
			i++
		}
	}
	return validString(id), len(v)
}
