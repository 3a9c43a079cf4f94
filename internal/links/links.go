// Package links finds the links of an email: the http, https and mailto
// URLs a reader could follow, from its HTML part and its text part. It is
// pure: no I/O, and any input, however broken, gives an answer.
//
// The rules (docs/api.md; the OpenAPI document, getEmailLinks):
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
//   - Bounds (docs/operations.md, "Limits"): the first MaxScan bytes of each part are
//     read, a URL longer than MaxURLBytes is left out, a link's text is cut
//     to MaxTextBytes, and at most MaxLinks links are listed. Its time is
//     linear in the parts' length.
package links

import (
	"context"
	"regexp"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/mailsink/mailsink/internal/runecut"
)

// Link is one link of an email. Text is nil for links of the text part and
// anchors without text.
type Link struct {
	URL  string
	Text *string
}

// The bounds of Extract, so that a message built to hold millions of links,
// or one huge one, costs a bounded answer.
const (
	MaxLinks     = 1000
	MaxURLBytes  = 8 << 10
	MaxTextBytes = 1 << 10
	MaxScan      = 8 << 20
)

// checkEvery is how many tokens or matches Extract reads between two looks
// at its context.
const checkEvery = 1024

// Extract returns the links of an email whose HTML part is htmlPart and
// text part is textPart (either may be empty), at most MaxLinks of them.
// It stops with ctx's error when ctx ends first.
func Extract(ctx context.Context, htmlPart, textPart string) ([]Link, error) {
	var out []Link
	listed := map[string]bool{}   // URLs listed
	pairs := map[[2]string]bool{} // (URL, text) pairs of the HTML part
	fromHTML(ctx, clip(htmlPart), func(l Link) bool {
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
	fromText(ctx, clip(textPart), func(u string) bool {
		if len(out) == MaxLinks {
			return false
		}
		if !listed[u] {
			listed[u] = true
			out = append(out, Link{URL: u})
		}
		return len(out) < MaxLinks
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// clip cuts s to at most MaxScan bytes, on a rune boundary.
func clip(s string) string { return runecut.Prefix(s, MaxScan) }

// fromHTML calls add with the links of an HTML document in document order
// until it returns false or ctx ends.
func fromHTML(ctx context.Context, doc string, add func(Link) bool) {
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
		return add(Link{URL: href, Text: optional(cut(t))})
	}
	for n := 0; ; n++ {
		if n%checkEvery == 0 && ctx.Err() != nil {
			return
		}
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			end()
			return
		case html.TextToken:
			if open && skip == 0 {
				collect(&text, z.Text())
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
				h, _ := attrs(z, hasAttr)
				if u, ok := keep(h); ok {
					open, href = true, u
					text.Reset()
					alt.Reset()
				}
			case atom.Area:
				h, a := attrs(z, hasAttr)
				if u, ok := keep(h); ok && !add(Link{URL: u, Text: optional(cut(collapse(a)))}) {
					return
				}
			case atom.Img:
				if open {
					_, a := attrs(z, hasAttr)
					collect(&alt, []byte(" "+a+" "))
				}
			case atom.Br:
				if open {
					collect(&text, []byte(" "))
				}
			}
		}
	}
}

// attrs returns the current tag's href and alt attributes, "" for those it
// has not; the first of repeated names counts, as in a browser. Other
// attributes are passed over without being kept.
func attrs(z *html.Tokenizer, more bool) (href, alt string) {
	var seenHref, seenAlt bool
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch {
		case string(k) == "href" && !seenHref:
			href, seenHref = string(v), true
		case string(k) == "alt" && !seenAlt:
			alt, seenAlt = string(v), true
		}
	}
	return href, alt
}

// collect appends p to b, up to what a link text can show before it is
// collapsed and cut (a few times MaxTextBytes).
func collect(b *strings.Builder, p []byte) {
	if room := 4*MaxTextBytes - b.Len(); room > 0 {
		b.Write(p[:min(len(p), room)])
	}
}

// cut cuts a link text to at most MaxTextBytes, on a rune boundary.
func cut(s string) string {
	if len(s) <= MaxTextBytes {
		return s
	}
	return strings.TrimRight(runecut.Prefix(s, MaxTextBytes), " ")
}

// urlPattern finds URLs written out in plain text: a scheme at the start or
// after a character that cannot be part of a word or URL, then everything
// up to white space or a character that cannot be in a URL unescaped.
var urlPattern = regexp.MustCompile("(?i)(?:^|[^a-z0-9+.-])((?:https?://|mailto:)[^\\s<>\"`{}|\\\\^\\x00-\\x1f\\x7f]+)")

// fromText calls add with the URLs written out in plain text, in order,
// until it returns false or ctx ends.
func fromText(ctx context.Context, text string, add func(string) bool) {
	for n, off := 0, 0; off < len(text); n++ {
		if n%checkEvery == 0 && ctx.Err() != nil {
			return
		}
		m := urlPattern.FindStringSubmatchIndex(text[off:])
		if m == nil {
			return
		}
		if u, ok := keep(trimPunctuation(text[off+m[2] : off+m[3]])); ok && !add(u) {
			return
		}
		off += m[1]
	}
}

// trimPunctuation removes what usually ends the sentence around a URL
// rather than the URL: trailing . , ; : ! ? ' and closing brackets that
// have no opening one in the URL.
func trimPunctuation(u string) string {
	// The brackets are counted once, and the counts kept as they are
	// trimmed: counting again for each would be quadratic in a URL
	// followed by many of them.
	openRound, closeRound := strings.Count(u, "("), strings.Count(u, ")")
	openSquare, closeSquare := strings.Count(u, "["), strings.Count(u, "]")
	for u != "" {
		c := u[len(u)-1]
		switch {
		case strings.IndexByte(".,;:!?'*", c) >= 0:
		case c == ')' && openRound < closeRound:
			closeRound--
		case c == ']' && openSquare < closeSquare:
			closeSquare--
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
	if len(raw) > MaxURLBytes+64 {
		return "", false // too long even before cleaning
	}
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
	if len(u) > MaxURLBytes {
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

// Images returns the URLs of the images an email's HTML part shows, in
// document order and each once: the src of every img element and the
// srcset candidates of img and source elements that are absolute http or
// https URLs (data: and cid: images are part of the message), at most
// MaxLinks of them, from the first MaxScan bytes. It stops with ctx's
// error when ctx ends first.
func Images(ctx context.Context, htmlPart string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(raw string) bool {
		u, ok := keep(raw)
		if ok && !strings.HasPrefix(strings.ToLower(u), "mailto:") && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
		return len(out) < MaxLinks
	}
	z := html.NewTokenizer(strings.NewReader(clip(htmlPart)))
	for n := 0; ; n++ {
		if n%checkEvery == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch z.Next() {
		case html.ErrorToken:
			return out, nil
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			tag := atom.Lookup(name)
			if tag != atom.Img && tag != atom.Source {
				continue
			}
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch {
				case string(k) == "src" && tag == atom.Img:
					if !add(string(v)) {
						return out, nil
					}
				case string(k) == "srcset":
					for _, c := range strings.Split(string(v), ",") {
						if f := strings.Fields(c); len(f) > 0 && !add(f[0]) {
							return out, nil
						}
					}
				}
			}
		}
	}
}
