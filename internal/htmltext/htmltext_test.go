package htmltext

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"<p>Bonjour&nbsp;<b>Zoé</b></p>", "\nBonjour Zoé\n"},
		{"<b>Hello</b> world", "Hello world"},
		{"a<i>b</i>c", "abc"},
		{"<table><tr><td>1</td><td>2</td></tr></table>", "\n1 2\n"},
		{"<style>p { color: red }</style><script>x()</script><p>seen</p>", "\nseen\n"},
		{"line<br>next", "line\nnext"},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPrefixStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("<p>ééééé</p>", 1000)
	got, cut, err := Prefix(context.Background(), doc, 101)
	if err != nil || !cut {
		t.Fatalf("got cut %v, err %v; want cut", cut, err)
	}
	if len(got) > 101 || len(got) < 95 || !strings.HasPrefix(got, "\nééééé\n") {
		t.Errorf("got %d bytes %q, want the first 101 bytes or a little less on a rune boundary", len(got), got)
	}
	if _, cut, _ := Prefix(context.Background(), "<p>short</p>", 100); cut {
		t.Error("a short text was reported cut")
	}
}

func TestPrefixStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Prefix(ctx, strings.Repeat("<b>x</b>", 10000), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestPrefixIsLinear: twice the input costs about twice the time, not four
// times, for markup built to be slow.
func TestPrefixIsLinear(t *testing.T) {
	t.Parallel()
	timeOf := func(n int) time.Duration {
		doc := strings.Repeat("<td> a", n) + strings.Repeat("<script>", n)
		best := time.Hour
		for range 3 {
			start := time.Now()
			if _, _, err := Prefix(context.Background(), doc, 0); err != nil {
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

func FuzzPrefix(f *testing.F) {
	f.Add("<p>a</p><td>b</td>", 10)
	f.Fuzz(func(t *testing.T, doc string, limit int) {
		got, cut, err := Prefix(context.Background(), doc, limit)
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
