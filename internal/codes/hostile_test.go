package codes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv/scaling"
)

// TestHostileShapesScale runs shapes built to make a careless extractor
// quadratic at n and 8n bytes, both under MaxScan so that the clip does not
// hide the growth.
func TestHostileShapesScale(t *testing.T) {
	shapes := []struct {
		name string
		text func(n int) string
		html func(n int) string
	}{
		{"one long line of keywords and codes", func(n int) string { return strings.Repeat("code 123456 ", n/12) }, nil},
		{"many short lines", func(n int) string { return strings.Repeat("your code\n123456\n", n/17) }, nil},
		{"one long word", func(n int) string { return strings.Repeat("a", n) }, nil},
		{"digit groups", func(n int) string { return "code " + strings.Repeat("12 ", n/3) }, nil},
		{"table cells", nil, func(n int) string { return "<table><tr>" + strings.Repeat("<td>1</td>", n/10) + "</tr></table>" }},
		{"nested blocks", nil, func(n int) string { return strings.Repeat("<div>", n/5) }},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			type part struct{ text, html string }
			build := func(n int) part {
				var p part
				if s.text != nil {
					p.text = s.text(n)
				}
				if s.html != nil {
					p.html = s.html(n)
				}
				return p
			}
			scaling.Linear(t, 4<<10, build, func(p part) { extract("", p.text, p.html) })
		})
	}
}

func TestExtractStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := Extract(ctx, "", strings.Repeat("your code is 123456\n", 1000), "")
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Errorf("Extract after cancel: %q, err %v; want none and context.Canceled", got, err)
	}
}
