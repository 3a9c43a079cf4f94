package links

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mailsink/mailsink/internal/mailparse"
)

// extract is Extract with a context that does not end.
func extract(htmlPart, textPart string) []Link {
	out, _ := Extract(context.Background(), htmlPart, textPart)
	return out
}

// l is a link with text; u is one without.
func l(url, text string) Link { return Link{URL: url, Text: &text} }
func u(url string) Link       { return Link{URL: url} }

func show(links []Link) string {
	var b strings.Builder
	for _, lk := range links {
		if lk.Text == nil {
			fmt.Fprintf(&b, "\n  %q (no text)", lk.URL)
		} else {
			fmt.Fprintf(&b, "\n  %q %q", lk.URL, *lk.Text)
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

func same(a, b []Link) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].URL != b[i].URL || (a[i].Text == nil) != (b[i].Text == nil) ||
			a[i].Text != nil && *a[i].Text != *b[i].Text {
			return false
		}
	}
	return true
}

func TestExtract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		html, text string
		want       []Link
	}{
		{"nothing", "", "", nil},
		{"one anchor", `<p>Hi <a href="https://example.com/a">Open</a></p>`, "", []Link{l("https://example.com/a", "Open")}},
		{"document order", `<a href="http://b.io/">B</a><a href="http://a.io/">A</a>`, "",
			[]Link{l("http://b.io/", "B"), l("http://a.io/", "A")}},
		{"text collapsed", "<a href='https://x.io'>\n  Confirm\t your <b>address</b>\n</a>", "",
			[]Link{l("https://x.io", "Confirm your address")}},
		{"br is a space", `<a href="https://x.io">one<br>two</a>`, "", []Link{l("https://x.io", "one two")}},
		{"empty text is null", `<a href="https://x.io"> </a>`, "", []Link{u("https://x.io")}},
		{"image alt when no text", `<a href="https://x.io"><img src="cid:logo" alt="Acme  logo"></a>`, "",
			[]Link{l("https://x.io", "Acme logo")}},
		{"text wins over alt", `<a href="https://x.io"><img alt="logo"> Home</a>`, "", []Link{l("https://x.io", "Home")}},
		{"script and style are not text", `<a href="https://x.io"><style>p{}</style>Go<script>x()</script></a>`, "",
			[]Link{l("https://x.io", "Go")}},
		{"entities decoded", `<a href="https://x.io/?a=1&amp;b=2&lt;">Tom &amp; Jerry&nbsp;&#x21;</a>`, "",
			[]Link{l("https://x.io/?a=1&b=2<", "Tom & Jerry !")}},
		{"area", `<map><area href="https://x.io/n" alt="North"><area href="https://x.io/s"></map>`, "",
			[]Link{l("https://x.io/n", "North"), u("https://x.io/s")}},
		{"mailto", `<a href="mailto:help@acme.test?subject=Hi">Write</a>`, "",
			[]Link{l("mailto:help@acme.test?subject=Hi", "Write")}},
		{"upper-case scheme kept as written", `<A HREF="HTTPS://X.IO/">x</A>`, "", []Link{l("HTTPS://X.IO/", "x")}},
		{"spaces, tabs and newlines removed", "<a href=\" https://x.io/a\n/b\t \">x</a>", "", []Link{l("https://x.io/a/b", "x")}},
		{"other schemes left out", `<a href="javascript:alert(1)">j</a><a href="data:text/html,x">d</a>` +
			`<a href="ftp://x.io/">f</a><a href="tel:+1">t</a><a href="java&#x0A;script:x">n</a>` +
			`<a href="  JavaScript:x">s</a><a href="https://ok.io">ok</a>`, "", []Link{l("https://ok.io", "ok")}},
		{"relative and broken left out", `<a href="/path">r</a><a href="#top">f</a><a href="">e</a><a>none</a>` +
			`<a href="http:/x.io">one slash</a><a href="https://">no host</a><a href="http://:80/">port only</a>` +
			`<a href="mailto:">no address</a><a href="mailto:?subject=x">no address</a>`, "", nil},
		{"repeat with same text listed once", `<a href="https://x.io">A</a><a href="https://x.io">A</a>`, "",
			[]Link{l("https://x.io", "A")}},
		{"same URL, other text kept", `<a href="https://x.io"><img alt=""></a><a href="https://x.io">Read more</a><a href="https://x.io"></a>`, "",
			[]Link{u("https://x.io"), l("https://x.io", "Read more")}},
		{"nested anchor ends the first", `<a href="https://a.io">A <a href="https://b.io">B</a> tail</a>`, "",
			[]Link{l("https://a.io", "A"), l("https://b.io", "B")}},
		{"unclosed anchor", `<a href="https://a.io">A`, "", []Link{l("https://a.io", "A")}},
		{"first of repeated attributes", `<a href="https://a.io" href="https://b.io">A</a>`, "", []Link{l("https://a.io", "A")}},
		{"href in comment or script ignored", `<!-- <a href="https://c.io">c</a> --><script>"<a href='https://s.io'>"</script>`, "", nil},
		{"text part", "", "Confirm: https://x.io/confirm?t=1.\nOr write to mailto:help@acme.test, thanks",
			[]Link{u("https://x.io/confirm?t=1"), u("mailto:help@acme.test")}},
		{"text after HTML, not repeated", `<a href="https://x.io/a">A</a>`, "See https://x.io/a and https://x.io/b and https://x.io/b",
			[]Link{l("https://x.io/a", "A"), u("https://x.io/b")}},
		{"text brackets", "", "(see https://x.io/a_(b)) <https://y.io/q> [https://z.io]",
			[]Link{u("https://x.io/a_(b)"), u("https://y.io/q"), u("https://z.io")}},
		{"text scheme case and boundary", "", "HTTPS://X.IO/A xhttp://no.io ahttps://no.io http://ok.io/'quoted'",
			[]Link{u("HTTPS://X.IO/A"), u("http://ok.io/'quoted")}},
		{"text without host", "", "http:// and https:/// and mailto: alone", nil},
		{"text stops at quotes and controls", "", "href=\"https://x.io/a\" and https://y.io/b\x00c",
			[]Link{u("https://x.io/a"), u("https://y.io/b")}},
		{"non-ASCII", `<a href="https://exämple.io/päth">Grüße</a>`, "https://例え.jp/パス。",
			[]Link{l("https://exämple.io/päth", "Grüße"), u("https://例え.jp/パス。")}},
	}
	for _, tt := range tests {
		if got := extract(tt.html, tt.text); !same(got, tt.want) {
			t.Errorf("%s: extract(%q, %q):\ngot  %s\nwant %s", tt.name, tt.html, tt.text, show(got), show(tt.want))
		}
	}
}

func TestExtractIsBounded(t *testing.T) {
	t.Parallel()
	var h, txt strings.Builder
	for i := range MaxLinks + 10 {
		fmt.Fprintf(&h, `<a href="https://x.io/%d">%d</a>`, i, i)
		fmt.Fprintf(&txt, "https://y.io/%d\n", i)
	}
	if got := extract(h.String(), txt.String()); len(got) != MaxLinks {
		t.Errorf("Extract of %d links: got %d, want %d", 2*(MaxLinks+10), len(got), MaxLinks)
	}
	if got := extract("", txt.String()); len(got) != MaxLinks {
		t.Errorf("Extract of %d text links: got %d, want %d", MaxLinks+10, len(got), MaxLinks)
	}
}

// TestCorpus extracts the links of the parser's corpus messages: it must
// not fail on any, and finds what a reader of a few known ones sees.
func TestCorpus(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../mailparse/testdata/corpus/*/*")
	if err != nil || len(files) == 0 {
		t.Skipf("no corpus: %v", err)
	}
	known := map[string][]Link{
		"plain_emails/raw_email_bad_time.eml":         {l("http://www.mailscanner.info/", "MailScanner")},
		"multi_charset/japanese.eml":                  {u("http://lindsaar.net/")},
		"plain_emails/raw_email_incorrect_header.eml": {u("http://xxx.xxx.info?aid=3D13&?stat=3D4327kdzt"), u("http://xxx.xxx.info/discon/?xxx@xxx.com")},
		"attachment_emails/attachment_pdf.eml":        nil,
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := mailparse.Parse(raw)
		var h, txt string
		if msg.Body.HTML != nil {
			h = *msg.Body.HTML
		}
		if msg.Body.Text != nil {
			txt = *msg.Body.Text
		}
		got := extract(h, txt)
		name := filepath.ToSlash(strings.TrimPrefix(f, "../mailparse/testdata/corpus/"))
		if want, ok := known[name]; ok && !same(got, want) {
			t.Errorf("%s: got %s\nwant %s", name, show(got), show(want))
		}
		for _, lk := range got {
			if _, ok := keep(lk.URL); !ok || lk.URL != strings.TrimSpace(lk.URL) {
				t.Errorf("%s: link %q should have been left out", filepath.Base(f), lk.URL)
			}
			if lk.Text != nil && (*lk.Text == "" || *lk.Text != collapse(*lk.Text)) {
				t.Errorf("%s: link text %q is not collapsed", filepath.Base(f), *lk.Text)
			}
		}
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(`<a href="https://x.io">x</a>`, "see https://y.io.")
	f.Add(`<map><area href="mailto:a@b.io" alt="a"></map><a href=" http://x.io/&amp;">`, "mailto:x@y.io)")
	f.Add("<a href=\"java\nscript:x\"><img alt=x></a><script><a href=https://s.io>", "(https://x.io/(a)]")
	f.Fuzz(func(t *testing.T, h, txt string) {
		got := extract(h, txt)
		if len(got) > MaxLinks {
			t.Fatalf("%d links, more than %d", len(got), MaxLinks)
		}
		seen := map[string]bool{}
		for i, lk := range got {
			lower := strings.ToLower(lk.URL)
			if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "mailto:") {
				t.Fatalf("link %d %q has another scheme", i, lk.URL)
			}
			if strings.ContainsAny(lk.URL, "\t\n\r") {
				t.Fatalf("link %d %q holds a tab or newline", i, lk.URL)
			}
			if lk.Text != nil && (*lk.Text == "" || *lk.Text != collapse(*lk.Text)) {
				t.Fatalf("link %d text %q is empty or not collapsed", i, *lk.Text)
			}
			if len(lk.URL) > MaxURLBytes || lk.Text != nil && len(*lk.Text) > MaxTextBytes {
				t.Fatalf("link %d is over the bounds: URL %d bytes, text %d", i, len(lk.URL), len(*lk.Text))
			}
			if lk.Text == nil && seen[lk.URL] && !strings.Contains(h, "<") {
				t.Fatalf("text link %q listed twice", lk.URL)
			}
			seen[lk.URL] = true
			if utf8.ValidString(h) && utf8.ValidString(txt) && !utf8.ValidString(lk.URL) {
				t.Fatalf("link %q is not valid UTF-8 though the input is", lk.URL)
			}
		}
	})
}

// BenchmarkExtract extracts the links of a 1 MB HTML part (a newsletter-like
// mix of text, anchors and images) and a 100 KB text part.
func BenchmarkExtract(b *testing.B) {
	var h, txt strings.Builder
	for i := 0; h.Len() < 1<<20; i++ {
		fmt.Fprintf(&h, `<p style="margin:0">Paragraph %d with <b>bold</b> text &amp; an <a href="https://news.example.com/item/%d?utm_source=mail&amp;utm_medium=email">article link</a>`+
			` and a <a href="https://news.example.com/item/%d"><img src="cid:img%d" alt="thumbnail"></a>.</p>`+"\n", i, i%500, i%500, i)
	}
	for i := 0; txt.Len() < 100<<10; i++ {
		fmt.Fprintf(&txt, "Paragraph %d: read https://news.example.com/item/%d?utm_source=mail.\n", i, i%700)
	}
	b.SetBytes(int64(h.Len() + txt.Len()))
	b.ReportAllocs()
	for b.Loop() {
		extract(h.String(), txt.String())
	}
}
