package search

import (
	"net/mail"
	"strings"
	"unicode"

	"github.com/mailsink/mailsink/internal/htmltext"
	"github.com/mailsink/mailsink/internal/runecut"
)

// Bounds of a Digest, so that what search keeps of a message does not grow
// with it: the words of its text's first MaxTextBytes, a snippet of
// SnippetRunes characters, and MaxAddresses addresses and names of each
// header.
const (
	MaxTextBytes = 32 << 10
	SnippetRunes = 160
	MaxAddresses = 50
)

// Digest is what reading an email's body adds to it for search and for the
// message list: the header's addresses and display names, a snippet of
// its text, how many attachments it has, and the words of its text.
type Digest struct {
	FromAddresses []string `json:"fa,omitempty"`
	FromNames     []string `json:"fn,omitempty"`
	// ToAddresses and ToNames are those of the To and Cc headers.
	ToAddresses []string `json:"ta,omitempty"`
	ToNames     []string `json:"tn,omitempty"`
	Snippet     string   `json:"s,omitempty"`
	Attachments int      `json:"a,omitempty"`
	// Text is the words of the body text (the text part, else the HTML
	// part read as text), lower-cased, separated by single spaces.
	Text string `json:"t,omitempty"`
}

// Content is what a Digest is made from: a parsed body's decoded header
// values (lower-case names), its text and HTML parts, and its attachments'
// count.
type Content struct {
	Headers     map[string]string
	Text, HTML  *string
	Attachments int
}

// MakeDigest returns the digest of c. Its cost is linear in the size of
// the text, of which it reads at most a few times MaxTextBytes.
func MakeDigest(c Content) *Digest {
	d := &Digest{Attachments: c.Attachments}
	d.FromAddresses, d.FromNames = addressesAndNames(c.Headers["from"])
	ta, tn := addressesAndNames(c.Headers["to"])
	ca, cn := addressesAndNames(c.Headers["cc"])
	d.ToAddresses, d.ToNames = bound(append(ta, ca...)), bound(append(tn, cn...))
	var text string
	switch {
	case c.Text != nil && strings.TrimSpace(*c.Text) != "":
		text = runecut.Prefix(*c.Text, 4*MaxTextBytes)
	case c.HTML != nil:
		text = htmltext.Text(runecut.Prefix(*c.HTML, 16*MaxTextBytes))
	}
	d.Snippet = snippet(text)
	d.Text = joinWords(text, MaxTextBytes)
	return d
}

// joinWords returns the words of text (WordsOf) separated by single spaces,
// as many whole words as fit in max bytes.
func joinWords(text string, max int) string {
	var b strings.Builder
	b.Grow(min(len(text), max))
	for w := range WordsOf(text) {
		n := len(w)
		if b.Len() > 0 {
			n++
		}
		if b.Len()+n > max {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// addressesAndNames reads an address list header value (decoded), as
// leniently as it can: what net/mail cannot read is split at commas.
func addressesAndNames(v string) (addrs, names []string) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	list, err := mail.ParseAddressList(v)
	if err != nil {
		// net/mail reads comments between words but not next to an
		// addr-spec's @ or a group's name.
		if bare, ok := withoutComments(v); ok {
			list, err = mail.ParseAddressList(bare)
		}
	}
	if err == nil {
		for _, a := range list {
			addrs = append(addrs, a.Address)
			if a.Name != "" {
				names = append(names, a.Name)
			}
		}
		return bound(addrs), bound(names)
	}
	for _, box := range strings.Split(v, ",") {
		name, addr, ok := strings.Cut(box, "<")
		if ok {
			addr, _, _ = strings.Cut(addr, ">")
			if n := strings.Trim(strings.TrimSpace(name), `"`); n != "" {
				names = append(names, n)
			}
		} else {
			addr = box
		}
		if addr = strings.TrimSpace(addr); addr != "" {
			addrs = append(addrs, addr)
		}
	}
	return bound(addrs), bound(names)
}

// withoutComments returns v without its RFC 5322 comments: parenthesised
// text outside quoted strings, which may nest and hold quoted pairs. A
// comment between two words stands for the space it is (Mary(x)Smith is
// Mary Smith); next to an address's punctuation it is dropped, since
// net/mail reads no space there. It returns false when a comment or a
// quoted string is not closed: what it left would lose the rest of v.
func withoutComments(v string) (string, bool) {
	var b strings.Builder
	depth, quoted := 0, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && (quoted || depth > 0):
			if depth == 0 && i+1 < len(v) {
				b.WriteString(v[i : i+2])
			}
			i++
		case depth > 0:
			switch c {
			case '(':
				depth++
			case ')':
				depth--
				if s := b.String(); depth == 0 && s != "" && i+1 < len(v) &&
					!strings.ContainsRune(addressPunct, rune(s[len(s)-1])) && !strings.ContainsRune(addressPunct, rune(v[i+1])) {
					b.WriteByte(' ')
				}
			}
		case c == '(' && !quoted:
			depth++
		default:
			if c == '"' {
				quoted = !quoted
			}
			b.WriteByte(c)
		}
	}
	return b.String(), depth == 0 && !quoted
}

// addressPunct is the bytes next to which a comment is dropped rather
// than read as a space: the punctuation of addresses and lists, and
// spaces.
const addressPunct = " \t@.<>,;:"

func bound(list []string) []string {
	if len(list) > MaxAddresses {
		list = list[:MaxAddresses]
	}
	for i, s := range list {
		list[i] = runecut.Prefix(s, 256)
	}
	return list
}

// snippet is the start of text, white space collapsed, at most
// SnippetRunes characters.
func snippet(text string) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range runecut.Prefix(text, 8*SnippetRunes) {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= SnippetRunes {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
