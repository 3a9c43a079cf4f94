package web

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv/scaling"
	"github.com/mailsink/mailsink/store"
)

// preview is the HTML the preview answers for src.
func preview(src, id string, atts []store.Attachment, inline map[int][]byte) string {
	var b strings.Builder
	rewriteHTML(&b, disarm(src), "/ui/emails/"+id+"/attachments/", atts, inline)
	return b.String()
}

func TestRewriteHTML(t *testing.T) {
	str := func(s string) *string { return &s }
	atts := []store.Attachment{
		{Filename: str("no-cid.pdf")},
		{ContentID: str("<Logo@Shop>")},
		{ContentID: str("chart 1@shop")},
		{ContentID: str("<logo@shop>")}, // a repeat: the first one wins
	}
	for _, tc := range []struct{ in, want string }{
		{`<img src="cid:logo@shop">`, `<img src="/ui/emails/ID/attachments/1">`},
		{`<img src='CID:LOGO@SHOP'>`, `<img src='/ui/emails/ID/attachments/1'>`},
		{`<img src=cid:chart%201@shop>`, `<img src=/ui/emails/ID/attachments/2>`},
		{`<td style="background:url(cid:logo@shop)">`, `<td style="background:url(/ui/emails/ID/attachments/1)">`},
		{`<img src="cid:unknown@shop">`, `<img src="cid:unknown@shop">`},
		{`<p>a cid: in text</p>`, `<p>a cid: in text</p>`},
		{`<meta http-equiv="refresh" content="0;url=http://evil.example/">`, `<meta data-blocked-http-equiv="refresh" content="0;url=http://evil.example/">`},
		{`<META HTTP-EQUIV = refresh>`, `<META data-blocked-http-equiv= refresh>`},
		{`<link rel="prefetch" href="http://evil.example/">`, `<blocked-link rel="prefetch" href="http://evil.example/">`},
		{`<LINK rel=stylesheet><linkage>`, `<blocked-link rel=stylesheet><linkage>`},
	} {
		if got := preview(tc.in, "ID", atts, nil); got != tc.want {
			t.Errorf("rewriteHTML(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// The images a preview carries inline: those its HTML shows by cid:, of an
// image type, within the bounds; rewriteHTML makes them data: URLs.
func TestInlineImages(t *testing.T) {
	str := func(s string) *string { return &s }
	atts := []store.Attachment{
		{ContentID: str("<logo@shop>"), ContentType: str(`image/PNG; name="logo.png"`), Size: 3},
		{ContentID: str("<doc@shop>"), ContentType: str("application/pdf"), Size: 3},
		{ContentID: str("<big@shop>"), ContentType: str("image/jpeg"), Size: maxInlineImage + 1},
		{ContentID: str("<odd@shop>"), ContentType: str(`image/svg+xml"onload=x`), Size: 3},
		{ContentID: str("<unused@shop>"), ContentType: str("image/gif"), Size: 3},
	}
	html := `<img src="cid:logo@shop"><img src="cid:LOGO@shop"><a href="cid:doc@shop"></a><img src="cid:big@shop"><img src="cid:odd@shop">`
	want, total := inlineImages(html, atts)
	if len(want) != 1 || !want[0] || total != 6 {
		t.Fatalf("inlineImages = %v, %d bytes; want only the PNG (0), twice", want, total)
	}
	got := preview(html, "ID", atts, map[int][]byte{0: []byte("PNG")})
	wantHTML := `<img src="data:image/png;base64,UE5H"><img src="data:image/png;base64,UE5H"><a href="/ui/emails/ID/attachments/1"></a>` +
		`<img src="/ui/emails/ID/attachments/2"><img src="/ui/emails/ID/attachments/3">`
	if got != wantHTML {
		t.Errorf("rewriteHTML\n got %s\nwant %s", got, wantHTML)
	}

	// All together they stay within maxInlineTotal.
	many := make([]store.Attachment, 10)
	html = ""
	for i := range many {
		many[i] = store.Attachment{ContentID: str(fmt.Sprintf("<%d@shop>", i)), ContentType: str("image/png"), Size: maxInlineImage}
		html += fmt.Sprintf(`<img src="cid:%d@shop">`, i)
	}
	if want, total := inlineImages(html, many); len(want) != maxInlineTotal/maxInlineImage || total != maxInlineTotal {
		t.Errorf("%d images of the largest size inline (%d bytes), want %d", len(want), total, maxInlineTotal/maxInlineImage)
	}

	// One image referenced many times is inlined only until the total
	// is spent: each reference carries its own copy.
	one := []store.Attachment{{ContentID: str("<i@shop>"), ContentType: str("image/png"), Size: 1 << 20}}
	html = strings.Repeat(`<img src="cid:i@shop">`, 100)
	if want, total := inlineImages(html, one); !want[0] || total != maxInlineTotal {
		t.Errorf("inlineImages of one image 100 times: %v, %d bytes; want it, %d bytes", want, total, maxInlineTotal)
	}
	got = preview(html, "ID", one, map[int][]byte{0: bytes.Repeat([]byte("x"), 1<<20)})
	if n := strings.Count(got, "data:image/png"); n != maxInlineTotal/(1<<20) {
		t.Errorf("the image is inline %d times, want %d", n, maxInlineTotal/(1<<20))
	}
	if n := strings.Count(got, "/ui/emails/ID/attachments/0"); n != 100-maxInlineTotal/(1<<20) {
		t.Errorf("%d references point at the attachment, want the other %d", n, 100-maxInlineTotal/(1<<20))
	}
}

// cidRefPattern is what cidRefs finds, as a regular expression.
var cidRefPattern = regexp.MustCompile(`(?i)\bcid:[^\s"'()<>\\]+`)

// checkCIDRefs fails t unless cidRefs finds in src what cidRefPattern
// finds.
func checkCIDRefs(t *testing.T, src string) {
	t.Helper()
	var got [][]int
	for start, end := range cidRefs(src) {
		got = append(got, []int{start, end})
	}
	if want := cidRefPattern.FindAllStringIndex(src, -1); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cidRefs(%q) = %v, want %v", src, got, want)
	}
}

func TestCIDRefsFindWhatTheExpressionFinds(t *testing.T) {
	for _, src := range []string{
		`<img src="cid:logo@shop">`, `CID:X`, `cId:a`, `xcid:a cid:b`, `_cid:a 9cid:b`, `écid:a`, `cid:cid:x`,
		`cid:"cid:a`, `cid:`, `:cid:a`, `ci:d:a`, `cıd:a`, "cid:\xffé\x80", "cid:a\tcid:b\ncid:c\fcid:d\rcid:e",
		`url(cid:a)`, `cid:a\b`, `cid:a<b`, `cid:a>b`, `cid:a'b`, `cid:a=b:c`, "\x00cid:a", ``,
	} {
		checkCIDRefs(t, src)
	}
	// Random strings of the characters that matter.
	const alphabet = "cCiIdD:_x9 \"'()<>\\\t\xc4\xb1"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		checkCIDRefs(t, string(b))
	}
}

func FuzzCIDRefs(f *testing.F) {
	for _, s := range []string{`<img src="cid:logo@shop">`, `xcid:a CID:b`, `cid:"cid:a`, "cid:\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) { checkCIDRefs(t, src) })
}

// imageBombHTML is the HTML part of the preview image bomb: n bytes of
// references to one image.
func imageBombHTML(n int) string { return strings.Repeat(`<img src=cid:img>`, n/17) }

// The preview of the image bomb costs time linear in its HTML.
func TestPreviewOfImageBombScales(t *testing.T) {
	str := func(s string) *string { return &s }
	atts := []store.Attachment{{ContentID: str("<img>"), ContentType: str("image/png"), Size: 96 << 10}}
	image := bytes.Repeat([]byte{0x89}, 96<<10)
	scaling.Linear(t, 256<<10, imageBombHTML, func(src string) {
		src = disarm(src)
		inlineImages(src, atts)
		rewriteHTML(io.Discard, src, "/ui/a/YWNtZQ/emails/01a21dd3-fd6a-749b-8432-17621a72b9af/attachments/", atts, map[int][]byte{0: image})
	})
}

// BenchmarkCIDRefs compares cidRefs with cidRefPattern on 1 MiB of the
// image bomb's HTML.
func BenchmarkCIDRefs(b *testing.B) {
	src := imageBombHTML(1 << 20)
	b.Run("cidRefs", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			for range cidRefs(src) {
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			cidRefPattern.FindAllStringIndex(src, -1)
		}
	})
}
