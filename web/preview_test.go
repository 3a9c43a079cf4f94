package web

import (
	"fmt"
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
	want := inlineImages(html, atts)
	if len(want) != 1 || !want[0] {
		t.Fatalf("inlineImages = %v, want only the PNG (0)", want)
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
	if n := len(inlineImages(html, many)); n != maxInlineTotal/maxInlineImage {
		t.Errorf("%d images of the largest size inline, want %d", n, maxInlineTotal/maxInlineImage)
	}
}
