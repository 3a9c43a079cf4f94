package links

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv/scaling"
)

// The hostile shapes of the hardening review: each builds a part of about
// n bytes.
var hostile = []struct {
	name       string
	html, text func(n int) string
}{
	{"closing parentheses after a URL", nil, func(n int) string { return "http://a.example/" + strings.Repeat(")", n) }},
	{"closing brackets after a URL", nil, func(n int) string { return "see https://a.example/x" + strings.Repeat("]", n) }},
	{"one long URL", nil, func(n int) string { return "https://a.example/" + strings.Repeat("a", n) }},
	{"many URLs", nil, func(n int) string { return strings.Repeat("http://a.example/x ", n/19) }},
	{"many anchors", func(n int) string { return strings.Repeat(`<a href="http://a.example/">x</a>`, n/32) }, nil},
	{"one huge anchor text", func(n int) string { return `<a href="http://a.example/">` + strings.Repeat("word ", n/5) + "</a>" }, nil},
	{"many attributes", func(n int) string {
		var b strings.Builder
		b.WriteString("<a ")
		for i := 0; b.Len() < n; i++ {
			b.WriteString("x")
			b.WriteString(strings.Repeat("y", i%50))
			b.WriteString("=1 ")
		}
		b.WriteString(`href="http://a.example/">x</a>`)
		return b.String()
	}, nil},
	{"many images in an anchor", func(n int) string {
		return `<a href="http://a.example/">` + strings.Repeat(`<img alt="picture">`, n/19) + "</a>"
	}, nil},
}

func build(f func(int) string, n int) string {
	if f == nil {
		return ""
	}
	return f(n)
}

func TestHostileShapesScale(t *testing.T) {
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			type part struct{ html, text string }
			scaling.Linear(t, 32<<10, func(n int) part { return part{build(h.html, n), build(h.text, n)} },
				func(p part) { extract(p.html, p.text) })
		})
	}
}

func TestHostileShapesBounded(t *testing.T) {
	t.Parallel()
	for _, h := range hostile {
		got := extract(build(h.html, 1<<20), build(h.text, 1<<20))
		for _, lk := range got {
			if len(lk.URL) > MaxURLBytes || lk.Text != nil && len(*lk.Text) > MaxTextBytes {
				t.Errorf("%s: a link over the bounds: URL %d bytes", h.name, len(lk.URL))
			}
		}
	}
	// The URL before a run of brackets is still found, without them.
	if got := extract("", "http://a.example/"+strings.Repeat(")", 100000)); len(got) != 1 || got[0].URL != "http://a.example/" {
		t.Errorf("got %s, want http://a.example/", show(got))
	}
}

func TestExtractStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := Extract(ctx, strings.Repeat(`<a href="http://a.example/">x</a>`, 10000), "http://b.example/")
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Errorf("Extract after cancel: %d links, err %v; want none and context.Canceled", len(got), err)
	}
}
