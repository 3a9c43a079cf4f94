package web

import (
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
		if got := rewriteHTML(tc.in, "ID", atts); got != tc.want {
			t.Errorf("rewriteHTML(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}
