package htmlcompat

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func newChecker(t testing.TB) *Checker {
	t.Helper()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A newsletter laid out with flex and showing a video is told that both
// fail in some clients, with the clients, their notes and a summary.
func TestNewsletterWarnings(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	doc, err := os.ReadFile("testdata/newsletter.html")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Check(context.Background(), string(doc))
	if err != nil {
		t.Fatal(err)
	}
	byFeature := map[string]Warning{}
	for _, w := range r.Warnings {
		byFeature[w.Feature] = w
	}
	for _, slug := range []string{"css-display-flex", "html-video", "css-gap", "css-pseudo-class-hover", "css-at-media-prefers-color-scheme", "css-box-shadow"} {
		w, ok := byFeature[slug]
		if !ok {
			t.Errorf("no warning for %s; warnings: %v", slug, features(r.Warnings))
			continue
		}
		if len(w.Unsupported)+len(w.Partial) == 0 || w.Score.Supported >= 100 {
			t.Errorf("%s: warned with no client that lacks it: %+v", slug, w)
		}
		if w.Title == "" || !strings.HasPrefix(w.URL, "https://www.caniemail.com/features/") {
			t.Errorf("%s: title %q, url %q", slug, w.Title, w.URL)
		}
	}
	flex := byFeature["css-display-flex"]
	if !slices.ContainsFunc(flex.Unsupported, func(c Client) bool { return c.Family == "outlook" && c.Platform == "windows" }) {
		t.Errorf("display:flex is not reported unsupported in Outlook on Windows: %+v", flex.Unsupported)
	}
	// Gmail on iOS supports flex in part, with the data's note.
	gmail := slices.IndexFunc(flex.Partial, func(c Client) bool { return c.Family == "gmail" && c.Platform == "ios" })
	if gmail < 0 || len(flex.Partial[gmail].Notes) == 0 || flex.Partial[gmail].FamilyName != "Gmail" || flex.Partial[gmail].PlatformName != "iOS" {
		t.Errorf("display:flex in Gmail on iOS: %+v", flex.Partial)
	}
	if flex.Occurrences != 1 {
		t.Errorf("display:flex occurrences = %d, want 1", flex.Occurrences)
	}
	// Supported everywhere the data knows: no warning.
	for _, slug := range []string{"html-p", "css-padding", "css-selector-class"} {
		if _, ok := byFeature[slug]; ok && byFeature[slug].Score.Unsupported == 0 && byFeature[slug].Score.Partial == 0 {
			t.Errorf("%s is warned about with every client supporting it", slug)
		}
	}
	if r.Total.Nodes < 10 || r.Total.Features <= len(r.Warnings) || r.Total.Clients < 20 {
		t.Errorf("total = %+v with %d warnings", r.Total, len(r.Warnings))
	}
	if sum := r.Total.Supported + r.Total.Partial + r.Total.Unsupported; sum < 99.9 || sum > 100.1 || r.Total.Unsupported <= 0 {
		t.Errorf("total score %+v does not add up to 100 with something unsupported", r.Total.Score)
	}
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(r.Data.Updated) || !strings.Contains(r.Data.Source, "caniemail") {
		t.Errorf("data = %+v", r.Data)
	}
	for i := 1; i < len(r.Warnings); i++ {
		if worse(r.Warnings[i], r.Warnings[i-1], r.Total.Nodes) {
			t.Errorf("warnings not worst first: %s before %s", r.Warnings[i-1].Feature, r.Warnings[i].Feature)
		}
	}
}

func worse(a, b Warning, nodes int) bool {
	w := func(x Warning) float64 {
		return (x.Score.Unsupported + x.Score.Partial/2) * min(1, float64(x.Occurrences)/float64(nodes))
	}
	return w(a) > w(b)
}

func features(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Feature)
	}
	sort.Strings(out)
	return out
}

// found runs the detector alone: every feature the data set has, warned
// about or not.
func found(t *testing.T, c *Checker, doc string) []string {
	t.Helper()
	got, _, err := detect(context.Background(), doc, c.has, func(s string) bool { return c.values[s] })
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for s := range got {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Each construct of HTML and CSS is found as the data set's feature.
func TestDetection(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	tests := []struct {
		doc  string
		want []string
		not  []string
	}{
		{`<h3>x</h3><ul><li>a</li></ul><section>s</section>`, []string{"html-h1-h6", "html-lists", "html-semantics"}, []string{"html-h3", "html-ul"}},
		{`<table cellpadding="0" cellspacing="0" align="center"><tr><td valign="top" bgcolor="#fff">x</td></tr></table>`,
			[]string{"html-table", "html-cellpadding", "html-cellspacing", "html-align", "html-valign"}, nil},
		{`<a href="#top">up</a><a href="MAILTO:x@example.com">m</a>`, []string{"html-anchor-links", "html-mailto-links"}, nil},
		{`<form><input type="checkbox"><input><button type="reset">r</button><button>s</button></form>`,
			[]string{"html-form", "html-input-checkbox", "html-input-text", "html-button-reset", "html-button-submit"}, nil},
		{`<div aria-label="x" role="note" lang="fr" dir="rtl" hidden>x</div>`,
			[]string{"html-div", "html-aria-label", "html-role", "html-lang", "html-dir", "html-hidden"}, nil},
		{`<img src="a.WEBP?x=1"><img src="b.jpeg"><img src="data:image/svg+xml;base64,PHN2Zz4=" loading="lazy" srcset="c.avif 2x">`,
			[]string{"html-img", "image-webp", "image-jpg", "image-base64", "image-svg", "html-loading-attribute", "html-srcset", "image-avif"}, nil},
		{`<!DOCTYPE html><!-- hi --><p>x</p>`, []string{"html-doctype", "html-comments", "html-p"}, nil},
		{`<p style="display:grid; margin-top:4px; border-left-width:1pt; color: rgb(1,2,3); width: calc(100% - 2rem)">x</p>`,
			[]string{"css-display-grid", "css-display", "css-margin", "css-border", "css-rgb", "css-unit-calc", "css-unit-px", "css-unit-pt", "css-unit-percent", "css-unit-rem", "css-width"}, []string{"css-margin-top"}},
		{`<p style="display: inline-flex; --brand: red; color: var(--brand); font-family: system-ui; width: max-content">x</p>`,
			[]string{"css-display-flex", "css-variables", "css-sytem-ui", "css-intrinsic-size"}, nil},
		{`<p style="width: clamp(1px, 2vw, 3px); color: light-dark(#000, #fff); background: url(x.gif)">x</p>`,
			[]string{"css-function-clamp", "css-function-light-dark", "css-unit-vw", "css-background", "image-gif"}, nil},
		{`<style>@import url("x.css"); @font-face { font-family: X; src: url(x.woff) } @keyframes spin { from { transform: rotate(0deg) } to { transform: rotate(360deg) } }</style>`,
			[]string{"css-at-import", "css-at-font-face", "css-at-keyframes", "css-transform"}, []string{"css-selector-type"}},
		{`<style>@media (prefers-reduced-motion: reduce) and (orientation: landscape) { a { color: red } } @supports (display: grid) { p { color: red } }</style>`,
			[]string{"css-at-media", "css-at-media-prefers-reduced-motion", "css-at-media-orientation", "css-at-supports", "css-selector-type"}, nil},
		{`<style>ul > li + li ~ li, a[href] p .x#y *::before:first-child { color: red }</style>`,
			[]string{"css-selector-child", "css-selector-adjacent-sibling", "css-selector-general-sibling", "css-selector-grouping",
				"css-selector-attribute", "css-selector-descendant", "css-selector-class", "css-selector-id", "css-selector-universal",
				"css-selector-chaining", "css-pseudo-element-before", "css-pseudo-class-first-child", "css-selector-type"}, nil},
		{`<style>li:nth-child(2n+1):not(.a) { color: red } a:after { content: "" }</style>`,
			[]string{"css-pseudo-class-nth-child", "css-pseudo-class-not", "css-pseudo-element-after"}, []string{"css-selector-adjacent-sibling", "css-selector-class"}},
		{`<style>.card { color: red; &:hover { color: blue } .title { font-weight: bold } }</style>`,
			[]string{"css-nesting", "css-pseudo-class-hover", "css-font-weight"}, nil},
		{`<style>p { color: red !important; /* note */ }</style>`, []string{"css-important", "css-comments"}, nil},
		{`<p style="-webkit-border-radius: 4px; border-top-left-radius: 2px">x</p>`, []string{"css-border-radius"}, nil},
	}
	for _, tt := range tests {
		got := found(t, c, tt.doc)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s\n  does not find %s; found %v", tt.doc, w, got)
			}
		}
		for _, n := range tt.not {
			if slices.Contains(got, n) {
				t.Errorf("%s\n  finds %s", tt.doc, n)
			}
		}
	}
}

// Broken HTML and CSS give an answer, not a panic.
func FuzzCheck(f *testing.F) {
	c := newChecker(f)
	doc, _ := os.ReadFile("testdata/newsletter.html")
	f.Add(string(doc))
	f.Add(`<style>a{{{{{{b:c}}`)
	f.Add(`<p style="a:url(">`)
	f.Add(`<style>@media (`)
	f.Fuzz(func(t *testing.T, doc string) {
		if _, err := c.Check(context.Background(), doc); err != nil {
			t.Fatal(err)
		}
	})
}

// Time is linear in the HTML's length, however it nests: doubling the
// input about doubles the time.
func TestLinearTime(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	hostile := map[string]string{
		"braces":       "<style>" + strings.Repeat("a{", 1) + "%s</style>",
		"open braces":  "<style>%s</style>",
		"style attrs":  "<p style=\"%s\">",
		"many tags":    "%s",
		"deep nesting": "<style>%s</style>",
	}
	unit := map[string]string{
		"braces":       "b{c:d}",
		"open braces":  "{",
		"style attrs":  "color:red;(",
		"many tags":    "<div style='display:flex'><img src=x.png>",
		"deep nesting": "&{",
	}
	for name, tmpl := range hostile {
		cost := func(n int) time.Duration {
			doc := strings.Replace(tmpl, "%s", strings.Repeat(unit[name], n), 1)
			start := time.Now()
			if _, err := c.Check(context.Background(), doc); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		small, large := cost(20000), cost(80000)
		if large > 12*small+50*time.Millisecond {
			t.Errorf("%s: 4 times the input took %s against %s", name, large, small)
		}
	}
}

// A check stops when its context ends.
func TestCancelled(t *testing.T) {
	t.Parallel()
	c := newChecker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, strings.Repeat("<p style='color:red'>x</p>", 10000)); err == nil {
		t.Error("a cancelled check answered")
	}
}
