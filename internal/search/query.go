// Package search is mailsink's search language: the q parameter of the
// list, count and bulk-delete endpoints and the dashboard's search box
// (CONTRACT.md, third round; docs/api.md). Parse turns a query into terms
// that combine by AND; Query.Match tells whether an email's Doc matches.
//
// The terms:
//
//	from:X, to:X       case-insensitive substring of the envelope address, a
//	                   header address (From; To and Cc) or its display name
//	subject:X          case-insensitive substring of the subject
//	label:X            an exact label
//	status:X           received, processed or archived
//	is:read, is:unread the email's read state
//	has:attachment     at least one attachment
//	before:D, after:D  received before D, after D (exclusive): D is a day
//	                   (YYYY-MM-DD, UTC: the whole day) or an RFC 3339 instant
//	larger:N, smaller:N rawSize over N, under N: 500, 10KB, 2MB, 1GB (KB = 1024)
//	message-id:X       the Message-ID, with or without its angle brackets
//	word, "two words"  whole words (a phrase when quoted) of the subject, the
//	                   addresses and names, and the decoded body text
//
// A term preceded by - is negated; X may be quoted ("Ada Lovelace"). A word
// with a colon that is not one of the operators above (a URL, "re:") is
// searched as words. Parsing is linear in the query's length, and a query
// holds at most MaxTerms terms.
package search

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mailsink/mailsink/store"
)

// Bounds of a query.
const (
	MaxQueryBytes = 1024
	MaxTerms      = 32
)

// Kind is what a term tests.
type Kind int

// The kinds of term.
const (
	Words Kind = iota
	From
	To
	Subject
	Label
	Status
	Read
	Unread
	HasAttachment
	Before
	After
	Larger
	Smaller
	MessageID
)

// Term is one condition of a query.
type Term struct {
	Kind Kind
	Not  bool
	// Text is the value of From, To, Subject and MessageID, lower-cased,
	// and of Label, as written.
	Text string
	// Words are the lower-cased words of a Words term, in order: one word,
	// or a phrase.
	Words []string
	// Time bounds Before and After; Size bounds Larger and Smaller.
	Time   time.Time
	Size   int64
	Status store.Status
}

// Query is a parsed query: its terms combine by AND. The zero Query
// matches every email.
type Query struct {
	Terms []Term
}

// Empty reports whether q has no terms.
func (q Query) Empty() bool { return len(q.Terms) == 0 }

// NeedsBody reports whether q has a Words term, which may match the body
// text.
func (q Query) NeedsBody() bool {
	for _, t := range q.Terms {
		if t.Kind == Words {
			return true
		}
	}
	return false
}

// Error is a query that does not parse: what is wrong, and where (a byte
// offset into the query).
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("at character %d: %s", e.Pos+1, e.Msg) }

// Parse parses q. It returns an *Error for a query that does not parse.
func Parse(q string) (Query, error) {
	if len(q) > MaxQueryBytes {
		return Query{}, &Error{Pos: MaxQueryBytes, Msg: fmt.Sprintf("the query is longer than %d bytes", MaxQueryBytes)}
	}
	if !utf8.ValidString(q) {
		return Query{}, &Error{Msg: "the query is not valid UTF-8"}
	}
	p := parser{s: q}
	var out Query
	dropped := -1 // where the first word with no letters or digits is
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			if len(out.Terms) == 0 && dropped >= 0 {
				// Dropped, it would leave no filter: every email would
				// match (and a wait for one would end at once).
				return Query{}, &Error{Pos: dropped, Msg: "the query has no letters or digits to search for: " +
					"words match whole words of letters and digits (for other characters, use subject:X)"}
			}
			return out, nil
		}
		start := p.i
		t, err := p.term()
		if err != nil {
			return Query{}, err
		}
		if t == nil {
			// A word with no letters or digits, as punctuation among
			// words is: no whole word can match it.
			if dropped < 0 {
				dropped = start
			}
			continue
		}
		if len(out.Terms) == MaxTerms {
			return Query{}, &Error{Pos: start, Msg: fmt.Sprintf("a query has at most %d terms", MaxTerms)}
		}
		out.Terms = append(out.Terms, *t)
	}
}

type parser struct {
	s string
	i int
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if !unicode.IsSpace(r) {
			return
		}
		p.i += n
	}
}

// operators maps each operator, without its colon, to its kind.
var operators = map[string]Kind{
	"from": From, "to": To, "subject": Subject, "label": Label, "status": Status, "is": Read,
	"has": HasAttachment, "before": Before, "after": After, "larger": Larger, "smaller": Smaller,
	"message-id": MessageID,
}

// term reads one term at p.i, which is not white space. It returns nil for
// a bare word that holds no word characters.
func (p *parser) term() (*Term, error) {
	start := p.i
	not := false
	if p.s[p.i] == '-' {
		not = true
		p.i++
		if r, _ := utf8.DecodeRuneInString(p.s[p.i:]); p.i >= len(p.s) || unicode.IsSpace(r) {
			return nil, &Error{Pos: start, Msg: "a - must be followed by the term it negates"}
		}
	}
	if p.s[p.i] == '"' {
		text, err := p.quoted()
		if err != nil {
			return nil, err
		}
		return wordsTerm(text, not, start)
	}
	// An operator is letters and hyphens before a colon.
	j := p.i
	for j < len(p.s) && (p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] == '-') {
		j++
	}
	if j < len(p.s) && p.s[j] == ':' {
		if kind, ok := operators[strings.ToLower(p.s[p.i:j])]; ok {
			name := strings.ToLower(p.s[p.i:j])
			p.i = j + 1
			valuePos := p.i
			value, err := p.value()
			if err != nil {
				return nil, err
			}
			if value == "" {
				return nil, &Error{Pos: valuePos, Msg: fmt.Sprintf("%s: needs a value", name)}
			}
			t, err := operatorTerm(kind, name, value, valuePos)
			if err != nil {
				return nil, err
			}
			t.Not = not
			return t, nil
		}
	}
	word := p.bare()
	return wordsTerm(word, not, start)
}

// value reads an operator's value: quoted, or up to white space.
func (p *parser) value() (string, error) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		return p.quoted()
	}
	return p.bare(), nil
}

// bare reads up to white space.
func (p *parser) bare() string {
	start := p.i
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if unicode.IsSpace(r) {
			break
		}
		p.i += n
	}
	return p.s[start:p.i]
}

// quoted reads a quoted string at p.i; a backslash escapes a quote or a
// backslash.
func (p *parser) quoted() (string, error) {
	start := p.i
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\' && p.i+1 < len(p.s) && (p.s[p.i+1] == '"' || p.s[p.i+1] == '\\'):
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		case c == '"':
			p.i++
			return b.String(), nil
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", &Error{Pos: start, Msg: "a quote is not closed"}
}

func wordsTerm(text string, not bool, pos int) (*Term, error) {
	words := Tokens(text)
	if len(words) == 0 {
		return nil, nil
	}
	return &Term{Kind: Words, Not: not, Words: words}, nil
}

// operatorTerm makes the term of operator name with value, found at pos.
func operatorTerm(kind Kind, name, value string, pos int) (*Term, error) {
	t := &Term{Kind: kind}
	bad := func(format string, args ...any) (*Term, error) {
		return nil, &Error{Pos: pos, Msg: name + ": " + fmt.Sprintf(format, args...)}
	}
	switch kind {
	case From, To, Subject:
		t.Text = strings.ToLower(value)
	case MessageID:
		t.Text = strings.ToLower(strings.Trim(strings.TrimSpace(value), "<>"))
	case Label:
		t.Text = value
	case Status:
		s := store.Status(strings.ToLower(value))
		if !s.Valid() {
			return bad("%q is not a status: use received, processed or archived", value)
		}
		t.Status = s
	case Read:
		switch strings.ToLower(value) {
		case "read":
			t.Kind = Read
		case "unread":
			t.Kind = Unread
		default:
			return bad("%q is not known: use is:read or is:unread", value)
		}
	case HasAttachment:
		if v := strings.ToLower(value); v != "attachment" && v != "attachments" {
			return bad("%q is not known: use has:attachment", value)
		}
	case Before, After:
		at, err := parseTime(value, kind)
		if err != nil {
			return bad("%q is not a day (2026-11-27) or an RFC 3339 time (2026-11-27T10:00:00Z)", value)
		}
		t.Time = at
	case Larger, Smaller:
		n, err := parseSize(value)
		if err != nil {
			return bad("%q is not a size: write a number of bytes, or 10KB, 2MB, 1GB", value)
		}
		t.Size = n
	}
	return t, nil
}

// parseTime reads a day or an instant. A day's bound is exclusive of the
// whole day: before:D is before its first instant, after:D after its last.
func parseTime(v string, kind Kind) (time.Time, error) {
	if day, err := time.Parse("2006-01-02", v); err == nil {
		if kind == After {
			return day.Add(24*time.Hour - time.Millisecond), nil
		}
		return day, nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, err
	}
	return at.UTC(), nil
}

// parseSize reads a size in bytes, with an optional unit of 1024s.
func parseSize(v string) (int64, error) {
	u := strings.ToUpper(v)
	mult := int64(1)
	for _, unit := range []struct {
		suffix string
		mult   int64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(u, unit.suffix); ok {
			u, mult = rest, unit.mult
			break
		}
	}
	n, err := strconv.ParseFloat(u, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<53 {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return int64(n * float64(mult)), nil
}

// Tokens returns the words of s, lower-cased: the runs of letters and
// digits. It is how a query's words and an email's text are split, so
// that a word matches whole words only.
func Tokens(s string) []string {
	return slices.Collect(WordsOf(s))
}

// WordsOf yields the words of s as Tokens returns them. s is lower-cased
// once and the words are cut from it: lower-casing word by word was an
// allocation a word, most of the cost of a digest's words
// (TestTokensAsWordByWord checks that the words are the same).
func WordsOf(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		s := strings.ToLower(s)
		start := -1
		for i, r := range s {
			word := isWordRune(r)
			switch {
			case word && start < 0:
				start = i
			case !word && start >= 0:
				if !yield(s[start:i]) {
					return
				}
				start = -1
			}
		}
		if start >= 0 {
			yield(s[start:])
		}
	}
}

// isWordRune reports whether r is part of a word: a letter, a digit or a
// combining mark.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}
