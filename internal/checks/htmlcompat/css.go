package htmlcompat

import (
	"context"
	"strings"
)

// The CSS of a document is read by a small scanner (the tokens of CSS
// Syntax Level 3, simplified) and a parser that walks rules, at-rules,
// selectors and declarations as the tokens come, keeping nothing but the
// counts: linear in the CSS's length, with nesting deeper than maxDepth
// read as if flat.

type tokenKind int

const (
	tEOF tokenKind = iota
	tIdent
	tFunction // an identifier followed by "(": text is the name
	tAtKeyword
	tHash
	tString
	tURL // url(...) without quotes: text is the URL
	tNumber
	tPercentage
	tDimension // text is the unit
	tWhitespace
	tColon
	tSemicolon
	tComma
	tOpenBrace
	tCloseBrace
	tOpenParen
	tCloseParen
	tOpenBracket
	tCloseBracket
	tDelim // text is the character
)

type token struct {
	kind tokenKind
	text string
}

// maxDepth bounds the nesting of blocks the parser follows.
const maxDepth = 16

// scanner reads the tokens of a style sheet or a style attribute.
type scanner struct {
	ctx     context.Context // the finder's
	s       string
	pos     int
	n       int // tokens read, to look at ctx now and then
	f       *finder
	peeked  *token
	stopped bool
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isName(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' || c == '-' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func (sc *scanner) peek() token {
	if sc.peeked == nil {
		t := sc.read()
		sc.peeked = &t
	}
	return *sc.peeked
}

func (sc *scanner) next() token {
	t := sc.peek()
	sc.peeked = nil
	return t
}

// read returns the next token, counting comments as they are passed.
func (sc *scanner) read() token {
	if sc.n++; sc.n%checkEvery == 0 && sc.ctx.Err() != nil {
		sc.stopped = true
	}
	for !sc.stopped && sc.pos < len(sc.s) {
		s, i := sc.s, sc.pos
		c := s[i]
		switch {
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			sc.f.add("css-comments")
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				sc.pos = len(s)
			} else {
				sc.pos = i + 2 + end + 2
			}
			continue
		case isSpace(c):
			for sc.pos < len(s) && isSpace(s[sc.pos]) {
				sc.pos++
			}
			return token{kind: tWhitespace}
		case c == '"' || c == '\'':
			sc.pos++
			start := sc.pos
			for sc.pos < len(s) && s[sc.pos] != c && s[sc.pos] != '\n' {
				if s[sc.pos] == '\\' {
					sc.pos++
				}
				sc.pos++
			}
			text := s[start:min(sc.pos, len(s))]
			sc.pos = min(sc.pos+1, len(s))
			return token{kind: tString, text: text}
		case c == '#':
			sc.pos++
			start := sc.pos
			sc.name()
			if sc.pos == start {
				return token{kind: tDelim, text: "#"}
			}
			return token{kind: tHash, text: s[start:sc.pos]}
		case c == '@':
			sc.pos++
			start := sc.pos
			sc.name()
			return token{kind: tAtKeyword, text: strings.ToLower(s[start:sc.pos])}
		case isDigit(c) || (c == '.' || c == '+' || c == '-') && startsNumber(s[i:]):
			return sc.number()
		case isNameStart(c) || c == '-' && i+1 < len(s) && (isNameStart(s[i+1]) || s[i+1] == '-') || c == '\\':
			start := sc.pos
			sc.name()
			name := s[start:sc.pos]
			if sc.pos < len(s) && s[sc.pos] == '(' {
				sc.pos++
				if strings.EqualFold(name, "url") {
					return sc.url()
				}
				return token{kind: tFunction, text: strings.ToLower(name)}
			}
			return token{kind: tIdent, text: name}
		}
		sc.pos++
		switch c {
		case ':':
			return token{kind: tColon}
		case ';':
			return token{kind: tSemicolon}
		case ',':
			return token{kind: tComma}
		case '{':
			return token{kind: tOpenBrace}
		case '}':
			return token{kind: tCloseBrace}
		case '(':
			return token{kind: tOpenParen}
		case ')':
			return token{kind: tCloseParen}
		case '[':
			return token{kind: tOpenBracket}
		case ']':
			return token{kind: tCloseBracket}
		}
		return token{kind: tDelim, text: string(c)}
	}
	return token{kind: tEOF}
}

// name advances over a name, escapes included.
func (sc *scanner) name() {
	for sc.pos < len(sc.s) {
		c := sc.s[sc.pos]
		switch {
		case c == '\\' && sc.pos+1 < len(sc.s):
			sc.pos += 2
		case isName(c):
			sc.pos++
		default:
			return
		}
	}
}

func startsNumber(s string) bool {
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	if s != "" && s[0] == '.' {
		s = s[1:]
	}
	return s != "" && isDigit(s[0])
}

func (sc *scanner) number() token {
	s := sc.s
	if s[sc.pos] == '+' || s[sc.pos] == '-' {
		sc.pos++
	}
	for sc.pos < len(s) && isDigit(s[sc.pos]) {
		sc.pos++
	}
	if sc.pos+1 < len(s) && s[sc.pos] == '.' && isDigit(s[sc.pos+1]) {
		sc.pos++
		for sc.pos < len(s) && isDigit(s[sc.pos]) {
			sc.pos++
		}
	}
	if sc.pos < len(s) && s[sc.pos] == '%' {
		sc.pos++
		return token{kind: tPercentage}
	}
	if sc.pos < len(s) && (isNameStart(s[sc.pos]) || s[sc.pos] == '-' && sc.pos+1 < len(s) && isNameStart(s[sc.pos+1])) {
		start := sc.pos
		sc.name()
		return token{kind: tDimension, text: strings.ToLower(s[start:sc.pos])}
	}
	return token{kind: tNumber}
}

// url reads the rest of url( as one token; a quoted URL is a function
// whose argument is a string.
func (sc *scanner) url() token {
	s := sc.s
	for sc.pos < len(s) && isSpace(s[sc.pos]) {
		sc.pos++
	}
	if sc.pos < len(s) && (s[sc.pos] == '"' || s[sc.pos] == '\'') {
		return token{kind: tFunction, text: "url"}
	}
	start := sc.pos
	for sc.pos < len(s) && s[sc.pos] != ')' {
		sc.pos++
	}
	text := strings.TrimSpace(s[start:sc.pos])
	sc.pos = min(sc.pos+1, len(s))
	return token{kind: tURL, text: text}
}

// scanCSS counts the features of css: a style element's style sheet, or,
// with inline, a style attribute's declarations.
func scanCSS(css string, f *finder, inline bool) {
	sc := &scanner{ctx: f.ctx, s: css, f: f}
	if inline {
		sc.declarations(0, false)
		return
	}
	sc.rules(0, false)
}

// rules reads rules and at-rules up to the end of their block (a closing
// brace, which it reads) or of the input; in keyframes their preludes
// are not selectors.
func (sc *scanner) rules(depth int, keyframes bool) {
	for {
		switch t := sc.peek(); t.kind {
		case tEOF:
			return
		case tCloseBrace:
			sc.next()
			if depth > 0 {
				return
			}
		case tWhitespace, tSemicolon:
			sc.next()
		case tAtKeyword:
			sc.next()
			sc.atRule(t.text, depth)
		default:
			sel := selector{f: sc.f, keyframes: keyframes}
			if !sc.prelude(&sel) {
				return
			}
			sel.end()
			sc.block(depth, sc.nestedDeclarations)
		}
	}
}

// prelude reads a rule's prelude up to its block's opening brace, which
// it reads, giving each token to sel; it reports false at the end of the
// input.
func (sc *scanner) prelude(sel *selector) bool {
	for {
		t := sc.next()
		switch t.kind {
		case tEOF:
			return false
		case tOpenBrace:
			return true
		}
		sel.token(t, sc)
	}
}

// Media features whose feature is not "css-at-media-" and their name.
var mediaFeature = map[string]string{
	"any-hover":                  "css-at-media-hover",
	"-webkit-device-pixel-ratio": "css-at-media-device-pixel-ratio",
	"device-pixel-ratio":         "css-at-media-device-pixel-ratio",
	"resolution":                 "css-at-media-device-pixel-ratio",
}

// atRule reads an at-rule after its keyword.
func (sc *scanner) atRule(name string, depth int) {
	name = unprefixed(name)
	sc.f.add("css-at-" + name)
	for {
		t := sc.next()
		switch t.kind {
		case tEOF, tSemicolon:
			return
		case tIdent:
			if name == "media" {
				feat := strings.ToLower(t.text)
				for _, p := range []string{"min-", "max-"} {
					feat = strings.TrimPrefix(feat, p)
				}
				feat = strings.TrimPrefix(feat, "-webkit-min-")
				feat = strings.TrimPrefix(feat, "-webkit-max-")
				if s := mediaFeature[feat]; s != "" {
					sc.f.add(s)
				} else if sc.peekPast(tWhitespace).kind == tColon || sc.peek().kind == tCloseParen {
					sc.f.add("css-at-media-" + feat)
				}
			}
		case tOpenBrace:
			switch name {
			case "media", "supports", "document", "layer", "container", "scope", "starting-style":
				sc.block(depth, func(d int) { sc.rules(d, false) })
			case "keyframes":
				sc.block(depth, func(d int) { sc.rules(d, true) })
			default: // font-face, page and the like hold declarations
				sc.block(depth, sc.nestedDeclarations)
			}
			return
		}
	}
}

// peekPast returns the next token that is not of kind skip, reading the
// ones before it.
func (sc *scanner) peekPast(skip tokenKind) token {
	for sc.peek().kind == skip {
		sc.next()
	}
	return sc.peek()
}

// declarations reads declarations up to the end of their block (a closing
// brace, which it reads, when block) or of the input. A nested rule in
// them is CSS nesting.
func (sc *scanner) declarations(depth int, block bool) {
	for {
		t := sc.peek()
		switch t.kind {
		case tEOF:
			return
		case tCloseBrace:
			sc.next()
			if block {
				return
			}
		case tWhitespace, tSemicolon:
			sc.next()
		case tAtKeyword:
			sc.next()
			sc.atRule(t.text, depth)
		case tIdent:
			sc.declaration(depth)
		default:
			// A nested rule (&, ., #, :, [ ...).
			sc.f.add("css-nesting")
			sel := selector{f: sc.f}
			if !sc.prelude(&sel) {
				return
			}
			sel.end()
			sc.block(depth, sc.nestedDeclarations)
		}
	}
}

// nestedDeclarations reads a block of declarations.
func (sc *scanner) nestedDeclarations(depth int) { sc.declarations(depth, true) }

// block reads a block whose opening brace was read, with read, one level
// deeper; past maxDepth it skips it, so that nesting costs no more stack
// than maxDepth levels.
func (sc *scanner) block(depth int, read func(depth int)) {
	if depth < maxDepth {
		read(depth + 1)
		return
	}
	for open := 1; open > 0; {
		switch sc.next().kind {
		case tEOF:
			return
		case tOpenBrace:
			open++
		case tCloseBrace:
			open--
		}
	}
}

// declaration reads one declaration, "name: value", up to its semicolon or
// the block's closing brace (left for the caller). A block opening in it
// makes it a nested rule, and an identifier not followed by a colon
// starts one (a type selector) or is garbage up to the next semicolon.
func (sc *scanner) declaration(depth int) {
	name := sc.next().text
	if sc.peekPast(tWhitespace).kind != tColon {
		sel := selector{f: sc.f}
		sel.token(token{kind: tIdent, text: name}, sc)
		for {
			switch t := sc.peek(); t.kind {
			case tEOF, tSemicolon, tCloseBrace:
				return
			case tOpenBrace:
				sc.next()
				sc.f.add("css-nesting")
				sel.end()
				sc.block(depth, sc.nestedDeclarations)
				return
			}
			sel.token(sc.next(), sc)
		}
	}
	sc.next() // ':'
	prop := strings.ToLower(name)
	if strings.HasPrefix(prop, "--") {
		sc.f.add("css-variables")
	} else {
		sc.f.property(prop)
	}
	v := value{f: sc.f, prop: unprefixed(prop)}
	parens := 0
	for {
		switch t := sc.peek(); t.kind {
		case tEOF, tCloseBrace:
			return
		case tSemicolon:
			if parens == 0 {
				return
			}
		case tOpenBrace:
			sc.next()
			sc.block(depth, sc.nestedDeclarations)
			return
		case tOpenParen, tFunction:
			parens++
		case tCloseParen:
			parens = max(parens-1, 0)
		}
		v.token(sc.next())
	}
}

// unprefixed is a property or keyword without its vendor prefix.
func unprefixed(s string) string {
	for _, p := range []string{"-webkit-", "-moz-", "-ms-", "-o-"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest
		}
	}
	return s
}

// Properties whose feature is not "css-" and their name (the data set's
// keywords and titles say which properties a feature covers).
var propertyFeature = map[string]string{
	"margin-left": "css-margin", "margin-right": "css-margin", "margin-top": "css-margin", "margin-bottom": "css-margin",
	"padding-left": "css-padding", "padding-right": "css-padding", "padding-top": "css-padding", "padding-bottom": "css-padding",
	"margin-block-start": "css-margin-block-start-end", "margin-block-end": "css-margin-block-start-end",
	"margin-inline-start": "css-margin-inline-start-end", "margin-inline-end": "css-margin-inline-start-end",
	"margin-inline": "css-margin-inline-block", "margin-block": "css-margin-inline-block",
	"padding-block-start": "css-padding-block-start-end", "padding-block-end": "css-padding-block-start-end",
	"padding-inline-start": "css-padding-inline-start-end", "padding-inline-end": "css-padding-inline-start-end",
	"padding-inline": "css-padding-inline-block", "padding-block": "css-padding-inline-block",
	"border-width": "css-border", "border-style": "css-border", "border-color": "css-border",
	"border-top": "css-border", "border-bottom": "css-border", "border-left": "css-border", "border-right": "css-border",
	"border-top-width": "css-border", "border-top-style": "css-border", "border-top-color": "css-border",
	"border-bottom-width": "css-border", "border-bottom-style": "css-border", "border-bottom-color": "css-border",
	"border-left-width": "css-border", "border-left-style": "css-border", "border-left-color": "css-border",
	"border-right-width": "css-border", "border-right-style": "css-border", "border-right-color": "css-border",
	"border-top-left-radius": "css-border-radius", "border-top-right-radius": "css-border-radius",
	"border-bottom-left-radius": "css-border-radius", "border-bottom-right-radius": "css-border-radius",
	"border-start-start-radius": "css-border-radius-logical", "border-start-end-radius": "css-border-radius-logical",
	"border-end-start-radius": "css-border-radius-logical", "border-end-end-radius": "css-border-radius-logical",
	"border-inline": "css-border-inline-block", "border-block": "css-border-inline-block",
	"border-inline-color": "css-border-inline-block-individual", "border-block-color": "css-border-inline-block-individual",
	"border-inline-style": "css-border-inline-block-individual", "border-block-style": "css-border-inline-block-individual",
	"border-inline-width": "css-border-inline-block-individual", "border-block-width": "css-border-inline-block-individual",
	"border-inline-start": "css-border-inline-block-individual", "border-inline-end": "css-border-inline-block-individual",
	"border-block-start": "css-border-inline-block-individual", "border-block-end": "css-border-inline-block-individual",
	"border-inline-start-color": "css-border-inline-block-longhand", "border-block-start-color": "css-border-inline-block-longhand",
	"border-inline-start-style": "css-border-inline-block-longhand", "border-block-start-style": "css-border-inline-block-longhand",
	"border-inline-start-width": "css-border-inline-block-longhand", "border-block-start-width": "css-border-inline-block-longhand",
	"border-inline-end-color": "css-border-inline-block-longhand", "border-block-end-color": "css-border-inline-block-longhand",
	"border-inline-end-style": "css-border-inline-block-longhand", "border-block-end-style": "css-border-inline-block-longhand",
	"border-inline-end-width": "css-border-inline-block-longhand", "border-block-end-width": "css-border-inline-block-longhand",
	"border-image-source": "css-border-image", "border-image-slice": "css-border-image", "border-image-width": "css-border-image",
	"border-image-outset": "css-border-image", "border-image-repeat": "css-border-image",
	"block-size":  "css-block-inline-size",
	"column-fill": "css-column-layout-properties", "column-rule": "css-column-layout-properties",
	"column-rule-color": "css-column-layout-properties", "column-rule-style": "css-column-layout-properties",
	"column-rule-width": "css-column-layout-properties", "column-span": "css-column-layout-properties",
	"column-width": "css-column-layout-properties", "columns": "css-column-layout-properties",
	"row-gap": "css-gap", "column-gap": "css-gap",
	"grid-template-areas": "css-grid-template", "grid-template-columns": "css-grid-template",
	"grid-template-rows": "css-grid-template", "grid-template": "css-grid-template",
	"inset-block": "css-inset", "inset-inline": "css-inset", "inset-inline-start": "css-inset",
	"inset-inline-end": "css-inset", "inset-block-start": "css-inset", "inset-block-end": "css-inset",
	"left": "css-left-right-top-bottom", "right": "css-left-right-top-bottom", "top": "css-left-right-top-bottom",
	"bottom":     "css-left-right-top-bottom",
	"overflow-x": "css-overflow", "overflow-y": "css-overflow", "overflow-block": "css-overflow", "overflow-inline": "css-overflow",
	"background-position-x": "css-background-position", "background-position-y": "css-background-position",
	"outline-color": "css-outline", "outline-style": "css-outline", "outline-width": "css-outline",
	"text-emphasis-color": "css-text-emphasis", "text-emphasis-style": "css-text-emphasis",
	"animation-name": "css-animation", "animation-duration": "css-animation", "animation-timing-function": "css-animation",
	"animation-delay": "css-animation", "animation-iteration-count": "css-animation", "animation-direction": "css-animation",
	"animation-fill-mode": "css-animation", "animation-play-state": "css-animation",
	"transition-property": "css-transition", "transition-duration": "css-transition",
	"transition-timing-function": "css-transition", "transition-delay": "css-transition",
	"scroll-snap-type": "css-scroll-snap", "scroll-snap-align": "css-scroll-snap", "scroll-snap-stop": "css-scroll-snap",
	"mask": "css-mask-image",
}

// property counts the feature of a property.
func (f *finder) property(prop string) {
	p := unprefixed(prop)
	if s := propertyFeature[p]; s != "" {
		f.add(s)
		return
	}
	f.add("css-" + p)
}

// Keywords whose feature does not depend on the property.
var keywordFeature = map[string]string{
	"initial":     "css-unit-initial",
	"min-content": "css-intrinsic-size", "max-content": "css-intrinsic-size", "fit-content": "css-intrinsic-size",
	"system-ui": "css-sytem-ui", "ui-serif": "css-sytem-ui", "ui-sans-serif": "css-sytem-ui", "ui-rounded": "css-sytem-ui",
	"ui-monospace": "css-sytem-ui",
}

// Functions whose feature is not "css-" or "css-function-" and their name.
var functionFeature = map[string]string{
	"rgb": "css-rgb", "rgba": "css-rgba",
	"linear-gradient": "css-linear-gradient", "radial-gradient": "css-radial-gradient", "conic-gradient": "css-conic-gradient",
	"calc":                      "css-unit-calc",
	"var":                       "css-variables",
	"repeating-linear-gradient": "css-linear-gradient",
	"repeating-radial-gradient": "css-radial-gradient",
	"repeating-conic-gradient":  "css-conic-gradient",
	"lch":                       "css-modern-color", "oklch": "css-modern-color", "lab": "css-modern-color", "oklab": "css-modern-color",
}

// value counts the features of one declaration's value.
type value struct {
	f    *finder
	prop string
	bang bool // the last token was "!"
	url  bool // inside url("...")
}

func (v *value) token(t token) {
	f := v.f
	bang := v.bang
	v.bang = false
	switch t.kind {
	case tIdent:
		kw := strings.ToLower(t.text)
		switch {
		case bang && kw == "important":
			f.add("css-important")
		case keywordFeature[kw] != "":
			f.add(keywordFeature[kw])
		case v.prop == "display" && (kw == "inline-flex" || kw == "inline-grid"):
			f.add("css-display-" + strings.TrimPrefix(kw, "inline-"))
		default:
			f.addValue("css-" + v.prop + "-" + unprefixed(kw))
		}
	case tFunction:
		name := unprefixed(t.text)
		switch {
		case name == "url":
			v.url = true
		case functionFeature[name] != "":
			f.add(functionFeature[name])
		default:
			f.add("css-function-" + name)
		}
	case tString:
		if v.url {
			f.image(t.text)
			v.url = false
		}
	case tURL:
		f.image(t.text)
	case tDimension:
		f.add("css-unit-" + t.text)
	case tPercentage:
		f.add("css-unit-percent")
	case tDelim:
		v.bang = t.text == "!"
	case tWhitespace:
		v.bang = bang
	}
}

// Pseudo-classes written with one colon that are pseudo-elements.
var legacyPseudoElements = map[string]bool{"before": true, "after": true, "first-letter": true, "first-line": true}

// selector counts the features of one rule's selector list as its tokens
// come.
type selector struct {
	f         *finder
	keyframes bool
	// parens is the depth of parentheses and brackets, whose content is
	// not read for combinators; colons counts the colons just read.
	parens, colons int
	// simple counts the type, class, id and attribute selectors of the
	// compound selector being read; space is set after white space
	// between two compounds.
	simple     int
	inCompound bool
	space      bool
}

func (s *selector) token(t token, sc *scanner) {
	if s.keyframes {
		return
	}
	f := s.f
	if s.parens > 0 {
		switch t.kind {
		case tOpenParen, tFunction, tOpenBracket:
			s.parens++
		case tCloseParen, tCloseBracket:
			s.parens--
		}
		return
	}
	colons := s.colons
	s.colons = 0
	switch t.kind {
	case tColon:
		s.colons = colons + 1
		s.compound()
		return
	case tIdent, tFunction:
		if colons > 0 {
			name := strings.ToLower(t.text)
			if colons == 2 || legacyPseudoElements[name] {
				f.add("css-pseudo-element-" + unprefixed(name))
			} else {
				f.add("css-pseudo-class-" + name)
			}
			if t.kind == tFunction {
				s.parens = 1
			}
			return
		}
		if t.kind == tFunction {
			s.parens = 1
			return
		}
		s.compound()
		s.simple++
		f.add("css-selector-type")
	case tHash:
		s.compound()
		s.simple++
		f.add("css-selector-id")
	case tOpenBracket:
		s.compound()
		s.simple++
		f.add("css-selector-attribute")
		s.parens = 1
	case tWhitespace:
		if s.inCompound {
			s.space = true
		}
	case tComma:
		s.end()
		f.add("css-selector-grouping")
	case tDelim:
		switch t.text {
		case ".":
			if sc.peek().kind == tIdent {
				sc.next()
				s.compound()
				s.simple++
				f.add("css-selector-class")
			}
		case "*":
			s.compound()
			f.add("css-selector-universal")
		case "&":
			s.compound()
			f.add("css-nesting")
		case ">", "+", "~":
			s.combinator(map[string]string{">": "css-selector-child", "+": "css-selector-adjacent-sibling",
				"~": "css-selector-general-sibling"}[t.text])
		}
	}
}

// compound notes that a simple selector begins; after white space between
// compounds, that is a descendant combinator.
func (s *selector) compound() {
	if s.space {
		s.f.add("css-selector-descendant")
		s.endCompound()
	}
	s.inCompound = true
}

func (s *selector) combinator(slug string) {
	s.f.add(slug)
	s.endCompound()
}

func (s *selector) endCompound() {
	if s.simple >= 2 {
		s.f.add("css-selector-chaining")
	}
	s.simple, s.space, s.inCompound = 0, false, false
}

// end ends a selector of the list.
func (s *selector) end() {
	s.endCompound()
	s.parens, s.colons = 0, 0
}
