package store

import (
	"slices"
	"strings"
)

// Matcher checks a ListQuery's filters on one email, for callers that see
// emails one at a time (a held list request woken by an event).
type Matcher struct {
	q                          ListQuery
	recipient, sender, subject string
}

// NewMatcher returns the Matcher of q's filters, Since and Label included
// (Before is a position in the list, not a filter of one email).
func NewMatcher(q ListQuery) Matcher {
	return Matcher{
		q:         q,
		recipient: NormalizeAddress(q.Recipient),
		sender:    NormalizeAddress(q.Sender),
		subject:   strings.ToLower(q.Subject),
	}
}

// Match reports whether e passes every filter of the query.
func (m Matcher) Match(e *Email) bool {
	switch {
	case m.recipient != "" && NormalizeAddress(e.Recipient) != m.recipient,
		m.sender != "" && NormalizeAddress(e.Sender) != m.sender,
		m.q.Status != "" && e.Status != m.q.Status,
		m.subject != "" && (e.Subject == nil || !strings.Contains(strings.ToLower(*e.Subject), m.subject)),
		!m.q.Since.IsZero() && !e.ReceivedAt.After(m.q.Since),
		m.q.Label != "" && !slices.Contains(e.Labels, m.q.Label):
		return false
	}
	return true
}
