// Package htmltext turns an HTML part into the text a reader sees, for the
// extractors and search that read a message's words, and the email view of
// the MCP tools. It is pure and linear in its input.
package htmltext

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/mailsink/mailsink/internal/runecut"
)

// checkEvery is how many tokens Prefix reads between two looks at its
// context.
const checkEvery = 1024

// Text converts an HTML document to text: one line per block element
// and table row, the cells of a row on one line, white space collapsed,
// script, style, head and template content left out, entities decoded.
func Text(doc string) string {
	s, _, _ := Prefix(context.Background(), doc, 0)
	return s
}

// Prefix is Text that stops once the text is limit bytes long (limit > 0),
// cuts it there on a rune boundary and reports cut; it stops with ctx's
// error when ctx ends first.
func Prefix(ctx context.Context, doc string, limit int) (text string, cut bool, err error) {
	if doc == "" {
		return "", false, nil
	}
	var b []byte
	z := html.NewTokenizer(strings.NewReader(doc))
	skip := 0
	for n := 1; ; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return "", false, err
			}
		}
		if limit > 0 && len(b) > limit {
			return runecut.Prefix(string(b), limit), true, nil
		}
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return string(b), false, nil
		case html.TextToken:
			if skip == 0 {
				// White space at either end of a text separates it from
				// the text around it (entities such as &nbsp; included).
				t := string(z.Text())
				if r, _ := utf8.DecodeRuneInString(t); unicode.IsSpace(r) {
					b = space(b, ' ')
				}
				b = append(b, strings.Join(strings.Fields(t), " ")...)
				if r, _ := utf8.DecodeLastRuneInString(t); unicode.IsSpace(r) {
					b = space(b, ' ')
				}
			}
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch a {
			case atom.Script, atom.Style, atom.Head, atom.Template, atom.Noscript:
				if tt == html.StartTagToken {
					skip++
				} else if tt == html.EndTagToken {
					skip = max(skip-1, 0)
				}
			case atom.Td, atom.Th:
				b = space(b, ' ')
			case atom.Br, atom.P, atom.Div, atom.Tr, atom.Table, atom.Li, atom.Ul, atom.Ol, atom.H1, atom.H2,
				atom.H3, atom.H4, atom.H5, atom.H6, atom.Hr, atom.Blockquote, atom.Pre, atom.Section,
				atom.Article, atom.Header, atom.Footer, atom.Center, atom.Tbody, atom.Thead, atom.Tfoot:
				b = space(b, '\n')
			}
		}
	}
}

// space ends the text with one separator: a line break replaces a space
// before it, and a space after a separator is left out, so that the cells
// of "<td>1</td><td>2</td>" read "1 2".
func space(b []byte, sep byte) []byte {
	if n := len(b); n > 0 && (b[n-1] == ' ' || b[n-1] == '\n') {
		if sep == ' ' || b[n-1] == '\n' {
			return b
		}
		b = b[:n-1]
	}
	return append(b, sep)
}
