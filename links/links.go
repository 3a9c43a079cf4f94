// Package links finds the links of an email: the http, https and mailto
// URLs a reader could follow, from its HTML part and its text part. It is
// pure: no I/O, and any input, however broken, gives an answer.
//
// The rules (the README's API table; the OpenAPI document, getEmailLinks):
//
//   - HTML links come first, in document order: the href of every a and area
//     element, with HTML entities decoded (by the tokenizer of
//     golang.org/x/net/html, as a browser would). Their text is what a reader
//     sees: the anchor's text with runs of white space collapsed to one
//     space and trimmed, leaving out script and style; an anchor without
//     text takes the alt text of its images, an area its own alt. Empty text
//     is nil. A link repeated with the same URL and text is listed once; the
//     same URL with other text (a logo and a "Read more" to one page) is
//     listed each time.
//   - Then the URLs written out in the text part that the list does not
//     hold yet, in order and each once, with nil text. A URL there starts
//     with http://, https:// or mailto: (not inside a word) and runs to
//     white space, a control character or one of < > " ` { } | \ ^;
//     trailing punctuation that usually ends a sentence (. , ; : ! ? ' * and
//     an unmatched closing bracket) is not part of it.
//   - Only absolute http and https URLs with a host, and mailto URLs with an
//     address, are kept: relative, javascript:, data: and other URLs are
//     left out. Tabs and newlines inside a URL and spaces around it are
//     removed, as browsers do; otherwise the URL is given as written.
package links

import (
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Link is one link of an email. Text is nil for links of the text part and
// anchors without text.
type Link struct {
	URL  string
	Text *string
}

// MaxLinks bounds the links Extract returns, so that a message built to
// hold millions of them costs a bounded answer.
const MaxLinks = 1000

// Extract returns the links of an email whose HTML part is htmlPart and
// text part is textPart (either may be empty), at most MaxLinks of them.
func Extract(htmlPart, textPart string) []Link {
	var out []Link
	listed := map[string]bool{}   // URLs listed
	pairs := map[[2]string]bool{} // (URL, text) pairs of the HTML part
	fromHTML(htmlPart, func(l Link) bool {
		key := [2]string{l.URL, ""}
		if l.Text != nil {
			key[1] = "\x00" + *l.Text // apart from nil text
		}
		if !pairs[key] {
			pairs[key] = true
			listed[l.URL] = true
			out = append(out, l)
		}
		return len(out) < MaxLinks
	})
	for _, u := range fromText(textPart) {
		if len(out) == MaxLinks {
			break
		}
		if !listed[u] {
			listed[u] = true
			out = append(out, Link{URL: u})
		}
	}
	return out
}

// fromHTML calls add with the links of an HTML document in document order
// until it returns false.
func fromHTML(doc string, add func(Link) bool) {
	if doc == "" {
		return
	}
	var (
		z    = html.NewTokenizer(strings.NewReader(doc))
		open bool // inside an a element with a kept href
		href string
		text strings.Builder
		alt  strings.Builder // alt texts of the images in the anchor
		skip int             // depth of script and style elements
	)
	// end ends the open anchor, if any, and reports whether to go on.
	end := func() bool {
		if !open {
			return true
		}
		open = false
		t := collapse(text.String())
		if t == "" {
			t = collapse(alt.String())
		}
		return add(Link{URL: href, Text: optional(t)})
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			end()
			return
		case html.TextToken:
			if open && skip == 0 {
				text.Write(z.Text())
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.A:
				if !end() {
					return
				}
			case atom.Script, atom.Style:
				skip = max(skip-1, 0)
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch atom.Lookup(name) {
			case atom.Script, atom.Style:
				if tt == html.StartTagToken {
					skip++
				}
			case atom.A:
				// An a inside an a ends the first, as in a browser.
				if !end() {
					return
				}
				if u, ok := keep(attrs(z, hasAttr)["href"]); ok {
					open, href = true, u
					text.Reset()
					alt.Reset()
				}
			case atom.Area:
				a := attrs(z, hasAttr)
				if u, ok := keep(a["href"]); ok && !add(Link{URL: u, Text: optional(collapse(a["alt"]))}) {
					return
				}
			case atom.Img:
				if open {
					alt.WriteString(" " + attrs(z, hasAttr)["alt"] + " ")
				}
			case atom.Br:
				if open {
					text.WriteByte(' ')
				}
			}
		}
	}
}

// attrs returns the current tag's attributes; the first of repeated names
// counts, as in a browser.
func attrs(z *html.Tokenizer, more bool) map[string]string {
	m := map[string]string{}
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		if _, dup := m[string(k)]; !dup {
			m[string(k)] = string(v)
		}
	}
	return m
}

// urlPattern finds URLs written out in plain text: a scheme at the start or
// after a character that cannot be part of a word or URL, then everything
// up to white space or a character that cannot be in a URL unescaped.
var urlPattern = regexp.MustCompile("(?i)(?:^|[^a-z0-9+.-])((?:https?://|mailto:)[^\\s<>\"`{}|\\\\^\\x00-\\x1f\\x7f]+)")

// fromText returns the URLs written out in plain text, in order.
func fromText(text string) []string {
	var out []string
	for _, m := range urlPattern.FindAllStringSubmatchIndex(text, -1) {
		if u, ok := keep(trimPunctuation(text[m[2]:m[3]])); ok {
			out = append(out, u)
		}
	}
	return out
}

// trimPunctuation removes what usually ends the sentence around a URL
// rather than the URL: trailing . , ; : ! ? ' and closing brackets that
// have no opening one in the URL.
func trimPunctuation(u string) string {
	for u != "" {
		c := u[len(u)-1]
		switch {
		case strings.IndexByte(".,;:!?'*", c) >= 0:
		case c == ')' && strings.Count(u, "(") < strings.Count(u, ")"):
		case c == ']' && strings.Count(u, "[") < strings.Count(u, "]"):
		default:
			return u
		}
		u = u[:len(u)-1]
	}
	return u
}

// keep cleans a URL as a browser does (spaces around it, tabs and newlines
// inside it removed) and reports whether it is an absolute http or https
// URL with a host or a mailto URL with an address.
func keep(raw string) (string, bool) {
	u := strings.Trim(raw, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	if strings.ContainsAny(u, "\t\n\r") {
		u = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(u)
	}
	scheme, rest, ok := strings.Cut(u, ":")
	if !ok {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "http", "https":
		// A host: something between "//" and the path, query or
		// fragment, past any user information.
		authority, ok := strings.CutPrefix(rest, "//")
		if i := strings.IndexAny(authority, "/?#\\"); i >= 0 {
			authority = authority[:i]
		}
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:]
		}
		if !ok || authority == "" || authority[0] == ':' {
			return "", false
		}
	case "mailto":
		if strings.TrimLeft(rest, "/") == "" || strings.HasPrefix(rest, "?") {
			return "", false
		}
	default:
		return "", false
	}
	return u, true
}

// collapse replaces each run of white space in s by one space and trims
// it.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
