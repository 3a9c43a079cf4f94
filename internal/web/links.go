package web

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	nethtml "golang.org/x/net/html"
)

// The links of a captured message's preview. The preview frame is
// sandboxed without scripts, and with popups allowed to escape the sandbox
// so that a link can open in a new tab. The frame cannot run a
// confirmation, so everything is decided here, as the preview is made:
//
//   - http and https links open in a new tab (target=_blank, rel=noopener
//     noreferrer), as written;
//   - mail, phone and SMS links (mailto:, tel:, sms:), and http links whose
//     text shows another address than they lead to, open mailsink's page at
//     /ui/away in a new tab, which says where the link leads and offers it;
//   - every other link (javascript:, data:, relative, any other scheme) is
//     no link any more: its href is renamed data-blocked-href;
//   - links within the page (#name) stay as they are.

// awayPath is the page that asks before a link is followed.
const awayPath = Prefix + "away"

// maxLinkText bounds the text of a link that is compared with its target.
const maxLinkText = 1024

// rewriteLinks writes src to w with the links of its a and area elements
// rewritten as above; every other byte is written as it is. It reads src
// once with x/net/html's tokenizer, which splits it as a browser does, and
// writes from src by offsets, so it holds nothing but one link's text at a
// time; the time it takes is linear in src.
func rewriteLinks(w io.Writer, src string) {
	z := nethtml.NewTokenizer(strings.NewReader(src))
	var (
		last, pos int // written up to last; the current token starts at pos
		foreign   int // depth of svg and math elements
		open      *pendingLink
	)
	flush := func() {
		if open == nil {
			return
		}
		io.WriteString(w, src[last:open.start])
		io.WriteString(w, open.tag(open.text.String()))
		last = open.end
		open = nil
	}
	for {
		tt := z.Next()
		if tt == nethtml.ErrorToken {
			break
		}
		end := pos + len(z.Raw())
		switch tt {
		case nethtml.TextToken:
			if open != nil && open.text.Len() < maxLinkText {
				open.text.Write(z.Text())
			}
		case nethtml.StartTagToken, nethtml.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "a", "area":
				flush()
				if !hasAttr {
					break
				}
				p := &pendingLink{name: string(name), start: pos, end: end, selfClosing: tt == nethtml.SelfClosingTagToken}
				for more := true; more; {
					var k, v []byte
					k, v, more = z.TagAttr()
					p.attrs = append(p.attrs, nethtml.Attribute{Key: string(k), Val: string(v)})
				}
				open = p
				if p.name != "a" || tt != nethtml.StartTagToken {
					flush() // no text: area, <a/>
				}
			case "svg", "math":
				if tt == nethtml.StartTagToken {
					foreign++
				}
			case "noscript":
				// The frame runs no script, so a browser reads what
				// noscript holds as markup.
				z.NextIsNotRawText()
			default:
				if foreign > 0 {
					// In svg and math, style and the like hold markup.
					z.NextIsNotRawText()
				}
			}
		case nethtml.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "a":
				flush()
			case "svg", "math":
				foreign = max(foreign-1, 0)
			}
		}
		pos = end
	}
	flush()
	io.WriteString(w, src[last:])
}

// pendingLink is an a or area start tag whose rewrite waits for its text.
type pendingLink struct {
	name        string
	attrs       []nethtml.Attribute
	start, end  int
	selfClosing bool
	text        strings.Builder
}

// attrName reports whether an attribute name is written back: letters,
// digits and -_:. not starting with a digit, - or .; others are left out
// (a browser would read them as junk).
func attrName(s string) bool {
	for i, c := range []byte(s) {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// tag returns the rewritten start tag of the link, whose text is text.
func (p *pendingLink) tag(text string) string {
	var b strings.Builder
	b.WriteString("<" + p.name)
	newTab := false
	for _, a := range p.attrs {
		key := strings.ToLower(a.Key)
		if !attrName(key) || key == "target" || key == "rel" {
			continue
		}
		val := a.Val
		if key == "href" || key == "xlink:href" {
			href, ok := linkTarget(val, text)
			if !ok {
				key = "data-blocked-href"
			} else {
				val = href
				newTab = newTab || !strings.HasPrefix(href, "#")
			}
		}
		b.WriteString(" " + key + `="` + html.EscapeString(val) + `"`)
	}
	if newTab {
		b.WriteString(` target="_blank" rel="noopener noreferrer"`)
	}
	if p.selfClosing {
		b.WriteString("/")
	}
	b.WriteString(">")
	return b.String()
}

// linkTarget returns where a link with href and text goes in the preview,
// and false when it goes nowhere.
func linkTarget(href, text string) (string, bool) {
	u, kind, host := classify(href)
	switch kind {
	case linkInPage:
		return u, true
	case linkWeb:
		if shown := shownAddress(text); shown != "" && !sameHost(shown, host) {
			return awayURL(u, text), true
		}
		return u, true
	case linkAsk:
		return awayURL(u, text), true
	}
	return "", false
}

type linkKind int

const (
	linkBlocked linkKind = iota
	linkInPage
	linkWeb
	linkAsk
)

// askSchemes open another program; they are offered on the away page.
var askSchemes = map[string]bool{"mailto": true, "tel": true, "sms": true}

// classify cleans href as a browser does (no tabs or newlines, no
// surrounding controls or spaces) and says what kind of link it is; for a
// web link, it also returns its host, in lower case.
func classify(href string) (clean string, kind linkKind, host string) {
	if strings.ContainsAny(href, "\t\n\r") {
		href = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, href)
	}
	href = strings.TrimFunc(href, func(r rune) bool { return r <= ' ' })
	if strings.HasPrefix(href, "#") {
		return href, linkInPage, ""
	}
	if strings.HasPrefix(href, "//") {
		href = "https:" + href
	}
	scheme, _, ok := strings.Cut(href, ":")
	if !ok || !validScheme(scheme) {
		return "", linkBlocked, "" // relative: it would lead into mailsink
	}
	switch scheme = strings.ToLower(scheme); {
	case scheme == "http" || scheme == "https":
		u, err := url.Parse(href)
		if err != nil || u.Host == "" {
			return "", linkBlocked, ""
		}
		return href, linkWeb, strings.ToLower(u.Hostname())
	case askSchemes[scheme]:
		return href, linkAsk, ""
	}
	return "", linkBlocked, ""
}

func validScheme(s string) bool {
	for i, c := range []byte(s) {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// awayURL is the away page's address for a link to target whose text is
// text.
func awayURL(target, text string) string {
	u := awayPath + "?to=" + url.QueryEscape(target)
	if t := strings.Join(strings.Fields(truncate(text, 400)), " "); t != "" {
		u += "&text=" + url.QueryEscape(truncate(t, 200))
	}
	return u
}

// truncate cuts s to at most n bytes, on a character boundary, marking the
// cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// shownAddress returns the host that a link's text shows (the domain of a
// mail address), or "" when it shows none: the whole text as a host name
// (perhaps with a path), or a word of it that starts with http://,
// https:// or www., or a mail address.
func shownAddress(text string) string {
	if !strings.ContainsAny(text, ".@") {
		return ""
	}
	text = strings.TrimSpace(text)
	if host, _, _ := strings.Cut(text, "/"); hostName(host) {
		return strings.ToLower(host)
	}
	for word := range strings.FieldsSeq(text) {
		word = strings.Trim(word, `.,;:!?()[]<>"'`)
		lower := strings.ToLower(word)
		for _, p := range []string{"http://", "https://"} {
			lower = strings.TrimPrefix(lower, p)
		}
		if lower != strings.ToLower(word) || strings.HasPrefix(lower, "www.") {
			host, _, _ := strings.Cut(lower, "/")
			host = host[strings.LastIndexByte(host, '@')+1:] // user info is not the host
			host, _, _ = strings.Cut(host, ":")
			return host
		}
		if local, domain, ok := strings.Cut(lower, "@"); ok && local != "" && hostName(domain) {
			return domain
		}
	}
	return ""
}

// hostName reports whether s is a DNS name of at least two labels whose
// last is letters only: shop.example, www.bank.example.
func hostName(s string) bool {
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for i, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
			if !letter && (i == len(labels)-1 || !(c >= '0' && c <= '9' || c == '-')) {
				return false
			}
		}
	}
	return len(labels[len(labels)-1]) >= 2
}

// sameHost reports whether a link shown as host a leads to host b: the
// same host, or one within the other (shop.example and www.shop.example).
func sameHost(a, b string) bool {
	a, b = strings.TrimPrefix(a, "www."), strings.TrimPrefix(b, "www.")
	return a == b || strings.HasSuffix(a, "."+b) || strings.HasSuffix(b, "."+a)
}

// maxAwayTarget bounds the link the away page shows.
const maxAwayTarget = 8 << 10

// away is the page a link from a captured message opens when it should be
// looked at first: it says where the link leads, and what its text
// showed, and offers it as an ordinary link. It runs no script and needs
// no session; a link of any other kind is shown and not offered.
func (h *Handler) away(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target, text := q.Get("to"), truncate(q.Get("text"), 300)
	u, kind, host := classify(truncate(target, maxAwayTarget))
	var b strings.Builder
	b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
		`<meta name="referrer" content="no-referrer"><title>Open this link? · mailsink</title>` +
		`<link rel="icon" href="/ui/icon.svg" type="image/svg+xml"><link rel="stylesheet" href="/ui/style.css"></head>` +
		`<body><main class="away" id="main"><h1>Open this link?</h1>`)
	e := html.EscapeString
	scheme, rest, _ := strings.Cut(u, ":")
	switch {
	case kind == linkAsk && strings.EqualFold(scheme, "mailto"):
		addr, _, _ := strings.Cut(rest, "?")
		if a, err := url.PathUnescape(addr); err == nil {
			addr = a
		}
		b.WriteString(`<p>A link in a captured message wants your mail program to write to <strong id="away-target">` + e(addr) + `</strong>.</p>`)
	case kind == linkAsk:
		b.WriteString(`<p>A link in a captured message wants another program (` + e(strings.ToLower(scheme)) + `:) to open <strong id="away-target">` + e(rest) + `</strong>.</p>`)
	case kind == linkWeb:
		b.WriteString(`<p>A link in a captured message leads to</p><p class="away-url" id="away-target">` + e(u) + `</p>`)
	default:
		b.WriteString(`<p>mailsink does not open links of this kind (only web, mail, phone and SMS links):</p><p class="away-url" id="away-target">` +
			e(truncate(target, 2000)) + `</p></main></body></html>`)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, b.String())
		return
	}
	if text != "" {
		warn := ""
		if kind == linkWeb {
			if shown := shownAddress(text); shown != "" && !sameHost(shown, host) {
				warn = ` class="away-warning"`
				text += " — another address than the link leads to"
			}
		}
		b.WriteString(`<p` + warn + ` id="away-text">The link's text: ` + e(text) + `</p>`)
	}
	b.WriteString(`<p><a class="button primary" id="away-open" rel="noopener noreferrer" href="` + e(u) + `">Open the link</a></p>` +
		`<p class="hint">Or close this tab. Whoever sent the message may learn that the link was opened.</p></main></body></html>`)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, b.String())
}
