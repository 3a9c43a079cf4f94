package htmltext

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, want string }{
		{"paragraphs", "<p>Hello</p><p>World</p>", "\nHello\nWorld\n"},
		{"table cells on one line", "<table><tr><td>Code</td><td>123 456</td></tr></table>", "\nCode 123 456\n"},
		{"script, style and head left out", "<head><title>t</title></head><style>p{}</style><script>x()</script>Hi", "Hi"},
		{"entities decoded", "Tom &amp; Jerry&nbsp;&lt;3", "Tom & Jerry <3"},
		{"white space collapsed", "a   b\n\n c", "a b c"},
		{"line breaks", "one<br>two", "one\ntwo"},
	} {
		got, cut, err := Text(context.Background(), tc.doc, 0)
		if err != nil || cut || got != tc.want {
			t.Errorf("%s: got %q, %v, %v; want %q", tc.name, got, cut, err, tc.want)
		}
	}
}

func TestTextStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("<p>ééééé</p>", 1000)
	got, cut, err := Text(context.Background(), doc, 101)
	if err != nil || !cut {
		t.Fatalf("got cut %v, err %v; want cut", cut, err)
	}
	if len(got) > 101 || len(got) < 95 || !strings.HasPrefix(got, "\nééééé\n") {
		t.Errorf("got %d bytes %q, want the first 101 bytes or a little less on a rune boundary", len(got), got)
	}
	if _, cut, _ := Text(context.Background(), "<p>short</p>", 100); cut {
		t.Error("a short text was reported cut")
	}
}

func TestTextStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Text(ctx, strings.Repeat("<b>x</b>", 10000), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestTextIsLinear: twice the input costs about twice the time, not four
// times, for markup built to be slow.
func TestTextIsLinear(t *testing.T) {
	t.Parallel()
	timeOf := func(n int) time.Duration {
		doc := strings.Repeat("<td> a", n) + strings.Repeat("<script>", n)
		best := time.Hour
		for range 3 {
			start := time.Now()
			if _, _, err := Text(context.Background(), doc, 0); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := timeOf(20000), timeOf(40000)
	if large > 4*small && large > 20*time.Millisecond {
		t.Errorf("twice the input took %v against %v: not linear", large, small)
	}
}

func FuzzText(f *testing.F) {
	f.Add("<p>a</p><td>b</td>", 10)
	f.Fuzz(func(t *testing.T, doc string, limit int) {
		got, cut, err := Text(context.Background(), doc, limit)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(got) > limit {
			t.Errorf("%d bytes of text over the limit of %d", len(got), limit)
		}
		if cut && limit <= 0 {
			t.Error("cut without a limit")
		}
	})
}
