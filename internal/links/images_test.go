package links

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The images of an HTML part are its img src and srcset candidates that a
// reader's client would fetch, in order and each once.
func TestImages(t *testing.T) {
	t.Parallel()
	doc := `<img src="https://cdn.example/a.png"><picture><source srcset="https://cdn.example/b.webp 1x, https://cdn.example/b2.webp 2x">` +
		`<img src=" https://cdn.example/a.png " srcset="/relative.png 2x"></picture>` +
		`<img src="cid:logo@x"><img src="data:image/gif;base64,R0lGOD"><img src="javascript:x">` +
		`<a href="https://shop.example/">not an image</a><img SRC="http://cdn.example/c.jpg?x=1&amp;y=2">`
	got, err := Images(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://cdn.example/a.png", "https://cdn.example/b.webp", "https://cdn.example/b2.webp", "http://cdn.example/c.jpg?x=1&y=2"}
	if !slices.Equal(got, want) {
		t.Errorf("Images =\n%q\nwant\n%q", got, want)
	}
}

// Images lists at most MaxLinks, and stops when its context ends.
func TestImagesBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range MaxLinks + 10 {
		fmt.Fprintf(&b, `<img src="https://cdn.example/%d.png">`, i)
	}
	got, err := Images(context.Background(), b.String())
	if err != nil || len(got) != MaxLinks {
		t.Errorf("%d images: got %d (err %v), want %d", MaxLinks+10, len(got), err, MaxLinks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Images(ctx, b.String()); err == nil {
		t.Error("a cancelled Images answered")
	}
}
