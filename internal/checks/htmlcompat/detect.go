package htmlcompat

import (
	"context"
	"strings"

	"golang.org/x/net/html"
)

// checkEvery is how many tokens detect reads between two looks at its
// context.
const checkEvery = 1024

// finder counts the features of the data set that a document uses.
type finder struct {
	ctx context.Context
	has func(slug string) bool
	// isValue says whether a slug is a property's value ("css-display-flex").
	isValue func(slug string) bool
	found   map[string]int
}

// add counts slug when the data set has it.
func (f *finder) add(slug string) {
	if f.has(slug) {
		f.found[slug]++
	}
}

// addValue counts slug when the data set has it as a property's value.
func (f *finder) addValue(slug string) {
	if f.isValue(slug) {
		f.found[slug]++
	}
}

// detect returns the features of the data set that doc uses, with how many
// times each, and the number of its elements.
func detect(ctx context.Context, doc string, has, isValue func(string) bool) (map[string]int, int, error) {
	f := &finder{ctx: ctx, has: has, isValue: isValue, found: map[string]int{}}
	nodes := 0
	z := html.NewTokenizer(strings.NewReader(doc))
	for n := 0; ; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		switch z.Next() {
		case html.ErrorToken:
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			return f.found, nodes, nil
		case html.DoctypeToken:
			if strings.EqualFold(strings.TrimSpace(string(z.Text())), "html") {
				f.add("html-doctype")
			}
		case html.CommentToken:
			f.add("html-comments")
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			var attrs []html.Attribute
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				attrs = append(attrs, html.Attribute{Key: string(k), Val: string(v)})
			}
			if !structural[tag] {
				nodes++
			}
			f.element(tag, attrs)
			if tag == "style" {
				// The tokenizer gives a style element's content as one
				// raw text token.
				if z.Next() == html.TextToken {
					scanCSS(string(z.Text()), f, false)
				}
			}
		}
	}
}

// structural elements are not counted as the document's nodes, as in
// Mailpit, which counts what is in the body.
var structural = map[string]bool{"html": true, "head": true, "meta": true, "title": true, "base": true}

// Elements whose feature is not "html-" and their name.
var elementFeature = map[string]string{
	"h1": "html-h1-h6", "h2": "html-h1-h6", "h3": "html-h1-h6", "h4": "html-h1-h6", "h5": "html-h1-h6", "h6": "html-h1-h6",
	"ul": "html-lists", "ol": "html-lists", "dl": "html-lists",
	"map": "html-image-maps", "area": "html-image-maps",
	// HTML5 semantics (the data set's keywords).
	"article": "html-semantics", "aside": "html-semantics", "details": "html-semantics", "figcaption": "html-semantics",
	"figure": "html-semantics", "footer": "html-semantics", "header": "html-semantics", "main": "html-semantics",
	"mark": "html-semantics", "nav": "html-semantics", "section": "html-semantics", "summary": "html-semantics",
	"time": "html-semantics",
}

// attributeFeatures are the attributes whose feature is "html-" and their
// name. An element of the same name (the obsolete <dir>) is not one of
// them.
var attributeFeatures = map[string]bool{
	"align": true, "background": true, "cellpadding": true, "cellspacing": true, "dir": true, "height": true,
	"width": true, "lang": true, "valign": true, "hidden": true, "target": true, "required": true, "role": true,
	"popover": true,
}

// Attributes whose feature is not "html-" and their name.
var attributeFeature = map[string]string{
	"loading": "html-loading-attribute",
	"srcset":  "html-srcset",
	"sizes":   "html-srcset",
	"usemap":  "html-image-maps",
	"inert":   "css-inert-attribute",
}

// element counts the features of one start tag.
func (f *finder) element(tag string, attrs []html.Attribute) {
	switch {
	case tag == "input":
		f.add("html-input-" + strings.ToLower(strings.TrimSpace(attrValue(attrs, "type", "text"))))
	case tag == "button":
		f.add("html-button-" + strings.ToLower(strings.TrimSpace(attrValue(attrs, "type", "submit"))))
	case tag == "a":
		href := strings.TrimSpace(attrValue(attrs, "href", ""))
		switch {
		case strings.HasPrefix(href, "#"):
			f.add("html-anchor-links")
		case len(href) >= 7 && strings.EqualFold(href[:7], "mailto:"):
			f.add("html-mailto-links")
		}
	case tag == "meta":
		if n := strings.ToLower(attrValue(attrs, "name", "")); n == "color-scheme" || n == "supported-color-schemes" {
			f.add("html-meta-color-scheme")
		}
	case elementFeature[tag] != "":
		f.add(elementFeature[tag])
	case !attributeFeatures[tag]:
		f.add("html-" + tag)
	}
	for _, a := range attrs {
		switch k := a.Key; {
		case k == "style":
			scanCSS(a.Val, f, true)
		case strings.HasPrefix(k, "aria-"):
			f.add("html-" + k)
		case attributeFeature[k] != "":
			f.add(attributeFeature[k])
		case attributeFeatures[k]:
			f.add("html-" + k)
		}
		switch {
		case a.Key == "background", a.Key == "src" && (tag == "img" || tag == "input"):
			f.image(a.Val)
		case a.Key == "srcset" && (tag == "img" || tag == "source"):
			for _, c := range strings.Split(a.Val, ",") {
				if fields := strings.Fields(c); len(fields) > 0 {
					f.image(fields[0])
				}
			}
		}
	}
}

// attrValue returns the value of the attribute key, or def.
func attrValue(attrs []html.Attribute, key, def string) string {
	for _, a := range attrs {
		if a.Key == key {
			return a.Val
		}
	}
	return def
}

// imageFormats maps file extensions and image media subtypes to the data
// set's image formats.
var imageFormats = map[string]string{
	"png": "image-png", "jpg": "image-jpg", "jpeg": "image-jpg", "pjpeg": "image-jpg", "gif": "image-gif",
	"webp": "image-webp", "svg": "image-svg", "svg+xml": "image-svg", "avif": "image-avif", "bmp": "image-bmp",
	"ico": "image-ico", "x-icon": "image-ico", "vnd.microsoft.icon": "image-ico", "tif": "image-tiff",
	"tiff": "image-tiff", "heif": "image-heif", "heic": "image-heif", "apng": "image-apng", "hdr": "image-hdr",
	"mp4": "image-mp4",
}

// image counts the format of an image's URL: a data: URL's media type, or
// the extension of its path.
func (f *finder) image(u string) {
	u = strings.TrimSpace(u)
	if len(u) > 5 && strings.EqualFold(u[:5], "data:") {
		meta, _, _ := strings.Cut(u[5:], ",")
		mediaType, params, _ := strings.Cut(meta, ";")
		if strings.Contains(strings.ToLower(params), "base64") {
			f.add("image-base64")
		}
		if sub, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(mediaType)), "image/"); ok {
			if slug := imageFormats[sub]; slug != "" {
				f.add(slug)
			}
		}
		return
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	slash := strings.LastIndexByte(u, '/')
	dot := strings.LastIndexByte(u, '.')
	if dot <= slash || dot == len(u)-1 {
		return
	}
	if slug := imageFormats[strings.ToLower(u[dot+1:])]; slug != "" {
		f.add(slug)
	}
}
