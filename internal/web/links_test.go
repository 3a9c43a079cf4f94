package web

import (
	"net/url"
	"strings"
	"testing"

	nethtml "golang.org/x/net/html"

	"github.com/mailsink/mailsink/internal/testenv/scaling"
)

func linked(src string) string {
	var b strings.Builder
	rewriteLinks(&b, src)
	return b.String()
}

func away(to, text string) string {
	u := "/ui/away?to=" + url.QueryEscape(to)
	if text != "" {
		u += "&amp;text=" + url.QueryEscape(text)
	}
	return u
}

const newTab = ` target="_blank" rel="noopener noreferrer"`

func TestRewriteLinks(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"web link", `<p><a href="https://shop.example/confirm?t=1&amp;u=2" class=b>Confirm</a></p>`,
			`<p><a href="https://shop.example/confirm?t=1&amp;u=2" class="b"` + newTab + `>Confirm</a></p>`},
		{"target and rel replaced", `<a href="http://x.example/" target="_top" rel="opener">x</a>`,
			`<a href="http://x.example/"` + newTab + `>x</a>`},
		{"text that shows the same host", `<a href="https://www.shop.example/a">shop.example</a>`,
			`<a href="https://www.shop.example/a"` + newTab + `>shop.example</a>`},
		{"text that shows another host", `<a href="https://evil.example/login">https://bank.example/login</a>`,
			`<a href="` + away("https://evil.example/login", "https://bank.example/login") + `"` + newTab + `>https://bank.example/login</a>`},
		{"another host in a sentence", `<a href="https://evil.example/">Log in at <b>www.bank.example</b> now</a>`,
			`<a href="` + away("https://evil.example/", "Log in at www.bank.example now") + `"` + newTab + `>Log in at <b>www.bank.example</b> now</a>`},
		{"a mail address shown", `<a href="https://evil.example/">help@bank.example</a>`,
			`<a href="` + away("https://evil.example/", "help@bank.example") + `"` + newTab + `>help@bank.example</a>`},
		{"mailto asks", `<a href="mailto:ada@acme.test?subject=hi">Write</a>`,
			`<a href="` + away("mailto:ada@acme.test?subject=hi", "Write") + `"` + newTab + `>Write</a>`},
		{"tel asks", `<a href=" tel:+15550100 ">Call</a>`, `<a href="` + away("tel:+15550100", "Call") + `"` + newTab + `>Call</a>`},
		{"javascript", `<a href="javascript:alert(1)">x</a>`, `<a data-blocked-href="javascript:alert(1)">x</a>`},
		{"javascript, disguised", "<a href=\"java\tscript&colon;alert(1)\">x</a>", "<a data-blocked-href=\"java\tscript:alert(1)\">x</a>"},
		{"data", `<a href="data:text/html,<script>alert(1)</script>">x</a>`, `<a data-blocked-href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">x</a>`},
		{"relative", `<a href="/ui/a/x/session">x</a>`, `<a data-blocked-href="/ui/a/x/session">x</a>`},
		{"other scheme", `<a href="ms-msdt:/id">x</a>`, `<a data-blocked-href="ms-msdt:/id">x</a>`},
		{"protocol-relative", `<a href="//x.example/p">x</a>`, `<a href="https://x.example/p"` + newTab + `>x</a>`},
		{"in the page", `<a href="#top">Top</a>`, `<a href="#top">Top</a>`},
		{"no href", `<a name="top">Top</a>`, `<a name="top">Top</a>`},
		{"area", `<map><area href="javascript:x()" shape=rect><area href="https://x.example/"/></map>`,
			`<map><area data-blocked-href="javascript:x()" shape="rect"><area href="https://x.example/"` + newTab + `/></map>`},
		{"svg", `<svg><a xlink:href="javascript:x()"><text>t</text></a></svg>`, `<svg><a data-blocked-href="javascript:x()"><text>t</text></a></svg>`},
		{"in noscript, which a scriptless frame reads as markup", `<noscript><a href="javascript:x()">x</a></noscript>`,
			`<noscript><a data-blocked-href="javascript:x()">x</a></noscript>`},
		{"in svg style, which is markup", `<svg><style><a href="javascript:x()">x</a></style></svg>`,
			`<svg><style><a data-blocked-href="javascript:x()">x</a></style></svg>`},
		{"in a style sheet, which is text", `<style>a[href="javascript:x"] { color: red }</style>`, `<style>a[href="javascript:x"] { color: red }</style>`},
		{"in a comment", `<!-- <a href="javascript:x()"> -->`, `<!-- <a href="javascript:x()"> -->`},
		{"unclosed at the end", `<a href="https://evil.example/">bank.example`,
			`<a href="` + away("https://evil.example/", "bank.example") + `"` + newTab + `>bank.example`},
		{"a link ends the one before", `<a href="https://a.example/">a.example<a href="https://b.example/">b.example</a>`,
			`<a href="https://a.example/"` + newTab + `>a.example<a href="https://b.example/"` + newTab + `>b.example</a>`},
		{"junk attribute names left out", `<a "onclick=x href="https://x.example/">x</a>`, `<a href="https://x.example/"` + newTab + `>x</a>`},
		{"a tag cut off", `<p>hi</p><a href="javascript:x()"`, `<p>hi</p><a href="javascript:x()"`},
		{"nothing to do", "<p>caf\xc3\xa9 \xff & <b>bold</b></p>\r\n", "<p>caf\xc3\xa9 \xff & <b>bold</b></p>\r\n"},
	} {
		if got := linked(tc.in); got != tc.want {
			t.Errorf("%s: rewriteLinks(%s)\n got %s\nwant %s", tc.name, tc.in, got, tc.want)
		}
	}
}

// linksOf returns the href-like attributes of the a and area elements of
// src as a browser's parser finds them.
func linksOf(t *testing.T, src string) []string {
	t.Helper()
	doc, err := nethtml.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n *nethtml.Node)
	walk = func(n *nethtml.Node) {
		if n.Type == nethtml.ElementNode && (n.Data == "a" || n.Data == "area") {
			for _, a := range n.Attr {
				if a.Key == "href" {
					out = append(out, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// checkLinks fails unless every link the rewritten src holds, as a parser
// reads it, leads to the web, the away page or within the page.
func checkLinks(t *testing.T, src string) {
	t.Helper()
	for _, href := range linksOf(t, linked(src)) {
		if _, kind, _ := classify(href); kind != linkWeb && kind != linkInPage && !strings.HasPrefix(href, awayPath+"?") {
			t.Errorf("rewriteLinks(%q) keeps a link to %q", src, href)
		}
	}
}

func FuzzRewriteLinks(f *testing.F) {
	for _, s := range []string{
		`<a href="javascript:x()">x</a>`, `<svg><a xlink:href="data:x">`, `<noscript><a href=vbscript:x>`,
		`<a href="https://e.example/">bank.example</a>`, `<area href=javascript:x>`, `<a href=#x>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		checkLinks(t, src)
		// The bytes outside links are written as they are.
		if !strings.Contains(strings.ToLower(src), "<a") && linked(src) != src {
			t.Errorf("rewriteLinks changed %q, which has no link", src)
		}
	})
}

// The link rewrite's time is linear in the HTML, whatever it holds: many
// links, one long link text, links never closed.
func TestRewriteLinksScales(t *testing.T) {
	build := func(n int) string {
		return strings.Repeat(`<a href="https://x.example/">bank.example</a>`, n/3/44) +
			`<a href="https://x.example/">` + strings.Repeat("www.bank.example ", n/3/17) + `</a>` +
			strings.Repeat(`<a href="mailto:a@b.example">`, n/3/29)
	}
	scaling.Linear(t, 48<<10, build, func(src string) { linked(src) })
}
