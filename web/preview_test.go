package web

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/store"
)

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
		if got := rewriteHTML(tc.in, "ID", atts, nil); got != tc.want {
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
	got := rewriteHTML(html, "ID", atts, map[int][]byte{0: []byte("PNG")})
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
	got = rewriteHTML(html, "ID", one, map[int][]byte{0: bytes.Repeat([]byte("x"), 1<<20)})
	if n := strings.Count(got, "data:image/png"); n != maxInlineTotal/(1<<20) {
		t.Errorf("the image is inline %d times, want %d", n, maxInlineTotal/(1<<20))
	}
	if n := strings.Count(got, "/ui/emails/ID/attachments/0"); n != 100-maxInlineTotal/(1<<20) {
		t.Errorf("%d references point at the attachment, want the other %d", n, 100-maxInlineTotal/(1<<20))
	}
}
