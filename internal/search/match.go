package search

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mailsink/mailsink/store"
)

// Doc is what a query is matched against: an email's own fields, and what
// the digest of its body adds once the body has been read (Digest nil
// before: then only the envelope addresses answer from: and to:, and
// words match the subject and the addresses only).
type Doc struct {
	Sender     string
	Recipient  string
	Subject    string
	MessageID  string
	Labels     []string
	Status     store.Status
	Read       bool
	RawSize    int64
	ReceivedAt time.Time
	Digest     *Digest
	// packed is the digest as an index holds it, read in place when Digest
	// is nil: a scan makes a Doc per email, and unpacking each digest
	// doubled the cost of from: over 100,000 emails.
	packed packedDigest
	// Body reports whether the body text holds words (lower-cased) in a
	// row; nil when the body has no text or is not indexed yet. An index
	// may answer it from a filter that can say yes wrongly, then check.
	Body func(words []string) bool
}

// docFields says which fields of a Doc a query's terms read (Read and
// RawSize are always there): an index makes only those for each email it
// scans.
type docFields uint8

const (
	docSender docFields = 1 << iota
	docRecipient
	docSubject
	docMessageID
	docLabels
	docStatus
	docTime
	docDigest
	allDocFields = ^docFields(0)
)

// fields returns the fields of a Doc that q's terms read.
func (q Query) fields() docFields {
	var f docFields
	for _, t := range q.Terms {
		switch t.Kind {
		case From:
			f |= docSender | docDigest
		case To:
			f |= docRecipient | docDigest
		case Subject:
			f |= docSubject
		case Label:
			f |= docLabels
		case Status:
			f |= docStatus
		case HasAttachment:
			f |= docDigest
		case Before, After:
			f |= docTime
		case MessageID:
			f |= docMessageID
		case Words:
			f |= docSubject | docSender | docRecipient | docDigest
		}
	}
	return f
}

// Match reports whether d matches every term of q.
func (q Query) Match(d *Doc) bool {
	for i := range q.Terms {
		t := &q.Terms[i]
		if t.match(d) == t.Not {
			return false
		}
	}
	return true
}

// cheapFirst returns q with its terms in the order that is cheapest to
// test (the order of AND does not change what matches): a field compared
// (label, status, read state, dates, sizes, an attachment) before a
// substring of addresses and names, before words. An email a cheap term
// rules out is then never searched for substrings: a label matching one
// email in 250 after a from: term made a scan of 100,000 emails cost
// 60 ms, most of it the substring searches.
func (q Query) cheapFirst() Query {
	terms := slices.Clone(q.Terms)
	slices.SortStableFunc(terms, func(a, b Term) int { return a.cost() - b.cost() })
	return Query{Terms: terms}
}

func (t *Term) cost() int {
	switch t.Kind {
	case Words:
		return 2
	case From, To, Subject, MessageID:
		return 1
	}
	return 0
}

// MatchMeta reports whether d may match q judging by everything but the
// body text: false means it cannot match, true that it matches when the
// words that are in no other field are in the body (Match tells). It lets
// an index skip reading bodies for emails the rest of the query rules
// out.
func (q Query) MatchMeta(d *Doc) bool {
	for i := range q.Terms {
		t := &q.Terms[i]
		if t.Kind == Words {
			continue // decided by Match, which may read the body
		}
		if t.match(d) == t.Not {
			return false
		}
	}
	return true
}

func (t *Term) match(d *Doc) bool {
	switch t.Kind {
	case From:
		if contains(d.Sender, t.Text) {
			return true
		}
		return d.anyInDigest(fromLists, func(s string) bool { return contains(s, t.Text) })
	case To:
		if contains(d.Recipient, t.Text) {
			return true
		}
		return d.anyInDigest(toLists, func(s string) bool { return contains(s, t.Text) })
	case Subject:
		return contains(d.Subject, t.Text)
	case Label:
		return slices.Contains(d.Labels, t.Text)
	case Status:
		return d.Status == t.Status
	case Read:
		return d.Read
	case Unread:
		return !d.Read
	case HasAttachment:
		return d.attachments() > 0
	case Before:
		return d.ReceivedAt.Before(t.Time)
	case After:
		return d.ReceivedAt.After(t.Time)
	case Larger:
		return d.RawSize > t.Size
	case Smaller:
		return d.RawSize < t.Size
	case MessageID:
		return strings.EqualFold(strings.Trim(d.MessageID, "<>"), t.Text)
	case Words:
		return t.matchWords(d)
	}
	return false
}

// matchWords: the words, in a row, in the subject, an address or a name
// of the envelope or the header, or the body text.
func (t *Term) matchWords(d *Doc) bool {
	has := func(f string) bool { return fieldHasPhrase(f, t.Words) }
	if has(d.Subject) || has(d.Sender) || has(d.Recipient) || d.anyInDigest(fromLists|toLists, has) {
		return true
	}
	return d.Body != nil && d.Body(t.Words)
}

// The digest's lists, as a set for anyInDigest.
const (
	fromLists = 1<<listFromNames | 1<<listFromAddresses
	toLists   = 1<<listToAddresses | 1<<listToNames
)

// anyInDigest reports whether f is true of a string of the digest's lists
// in the set lists, the Doc's Digest or else its packed one.
func (d *Doc) anyInDigest(lists uint8, f func(string) bool) bool {
	if d.Digest == nil {
		return d.packed.any(lists, f)
	}
	for i, l := range d.Digest.lists() {
		if lists&(1<<i) != 0 && slices.ContainsFunc(*l, f) {
			return true
		}
	}
	return false
}

// attachments is the digest's count of attachments, 0 without a digest.
func (d *Doc) attachments() int {
	if d.Digest == nil {
		return d.packed.summary().Attachments
	}
	return d.Digest.Attachments
}

// fieldHasPhrase reports whether the words of field f (Tokens) hold
// phrase in a row. A field whose lower-cased text does not hold the
// phrase's first word, as any of its words is cut from it, is ruled out
// before it is cut into words: cutting every field of every email was
// most of the cost of a word searched for over an account.
func fieldHasPhrase(f string, phrase []string) bool {
	if len(phrase) > 0 && !contains(f, phrase[0]) {
		return false
	}
	return HasPhrase(Tokens(f), phrase)
}

// HasPhrase reports whether words holds phrase in a row.
func HasPhrase(words, phrase []string) bool {
	if len(phrase) == 0 {
		return true
	}
	for i := 0; i+len(phrase) <= len(words); i++ {
		if words[i] == phrase[0] && slices.Equal(words[i:i+len(phrase)], phrase) {
			return true
		}
	}
	return false
}

// contains reports whether s, lower-cased, holds lowerSub. An ASCII s is
// compared in place: lower-casing every field of every email a query
// scans was half the CPU of an operator query that scans 100,000 emails
// (docs/benchmarks.md, Search).
func contains(s, lowerSub string) bool {
	n := len(lowerSub)
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), lowerSub)
		}
	}
	for i := 0; i+n <= len(s); i++ {
		if equalLowerASCII(s[i:i+n], lowerSub) {
			return true
		}
	}
	return n == 0
}

// equalLower reports whether s, lower-cased as store.NormalizeAddress
// does, is lower; an ASCII s is compared in place.
func equalLower(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.ToLower(s) == lower
		}
	}
	return len(s) == len(lower) && equalLowerASCII(s, lower)
}

// equalLowerASCII reports whether the ASCII a, lower-cased, is b.
func equalLowerASCII(a, b string) bool {
	for i := 0; i < len(b); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != b[i] {
			return false
		}
	}
	return true
}
