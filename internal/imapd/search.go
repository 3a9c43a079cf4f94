package imapd

import (
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// maxSearchKeys bounds the keys of one SEARCH, NOT and OR included: each
// group of them is a query of the account's search index.
const maxSearchKeys = 64

var errSearchTooLarge = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeLimit,
	Text: "The search has too many keys"}

// search answers SEARCH. Its keys are mapped onto the search language
// (internal/search): FROM and TO (also CC and BCC, as to:), SUBJECT,
// HEADER Message-ID, BODY and TEXT (words), SINCE, BEFORE and ON (the
// received date; SENTSINCE, SENTBEFORE and SENTON too), LARGER and
// SMALLER (the stored size), SEEN and UNSEEN; sequence sets, UID sets and
// \Deleted are taken from the session's view; ALL matches every message,
// and flags mailsink does not keep match none (their UN- keys all).
func (m *mailbox) search(kind imapserver.NumKind, criteria *imap.SearchCriteria) (*imap.SearchData, error) {
	if countKeys(criteria) > maxSearchKeys {
		return nil, errSearchTooLarge
	}
	match, err := m.eval(criteria)
	if err != nil {
		return nil, err
	}
	data := &imap.SearchData{}
	var seqs imap.SeqSet
	var uids imap.UIDSet
	for i, ok := range match {
		if !ok {
			continue
		}
		num := uint32(i + 1)
		if kind == imapserver.NumKindUID {
			num = m.msgs[i].uid
			uids.AddNum(imap.UID(num))
		} else {
			seqs.AddNum(num)
		}
		if data.Min == 0 || num < data.Min {
			data.Min = num
		}
		data.Max = max(data.Max, num)
		data.Count++
	}
	if kind == imapserver.NumKindUID {
		data.All = uids
	} else {
		data.All = seqs
	}
	return data, nil
}

func countKeys(c *imap.SearchCriteria) int {
	n := 1 + len(c.SeqNum) + len(c.UID) + len(c.Header) + len(c.Body) + len(c.Text) + len(c.Flag) + len(c.NotFlag)
	for i := range c.Not {
		n += countKeys(&c.Not[i])
	}
	for i := range c.Or {
		n += countKeys(&c.Or[i][0]) + countKeys(&c.Or[i][1])
	}
	return n
}

// eval returns, for each message of the view, whether it matches c.
func (m *mailbox) eval(c *imap.SearchCriteria) ([]bool, error) {
	match := make([]bool, len(m.msgs))
	for i, msg := range m.msgs {
		match[i] = !msg.gone
	}
	q, none, err := queryOf(c)
	if err != nil {
		return nil, err
	}
	if none {
		clear(match)
		return match, nil
	}
	if !q.Empty() {
		ctx, cancel := m.s.call()
		ids, err := m.s.srv.search.IDs(ctx, store.ListQuery{AccountID: m.s.account.ID}, q)
		cancel()
		if err != nil {
			return nil, m.s.srv.storeError(err)
		}
		found := make(map[string]bool, len(ids))
		for _, id := range ids {
			found[id] = true
		}
		for i, msg := range m.msgs {
			match[i] = match[i] && found[msg.id]
		}
	}
	for _, set := range c.SeqNum {
		if err := m.intersect(match, set); err != nil {
			return nil, err
		}
	}
	for _, set := range c.UID {
		if err := m.intersect(match, set); err != nil {
			return nil, err
		}
	}
	for _, f := range c.Flag {
		if strings.EqualFold(string(f), string(imap.FlagDeleted)) {
			for i, msg := range m.msgs {
				match[i] = match[i] && msg.deleted
			}
		}
	}
	for _, f := range c.NotFlag {
		if strings.EqualFold(string(f), string(imap.FlagDeleted)) {
			for i, msg := range m.msgs {
				match[i] = match[i] && !msg.deleted
			}
		}
	}
	for i := range c.Not {
		sub, err := m.eval(&c.Not[i])
		if err != nil {
			return nil, err
		}
		for j := range match {
			match[j] = match[j] && !sub[j]
		}
	}
	for i := range c.Or {
		a, err := m.eval(&c.Or[i][0])
		if err != nil {
			return nil, err
		}
		b, err := m.eval(&c.Or[i][1])
		if err != nil {
			return nil, err
		}
		for j := range match {
			match[j] = match[j] && (a[j] || b[j])
		}
	}
	return match, nil
}

// intersect keeps in match the messages set names.
func (m *mailbox) intersect(match []bool, set imap.NumSet) error {
	in := make([]bool, len(match))
	idxs, err := m.resolve(set)
	if err != nil {
		return err
	}
	for _, i := range idxs {
		in[i] = true
	}
	for i := range match {
		match[i] = match[i] && in[i]
	}
	return nil
}

// queryOf maps the keys of c that the search language has onto a query;
// none is true when c has a flag key that no message has (\Flagged,
// \Answered, \Draft, \Recent, keywords).
func queryOf(c *imap.SearchCriteria) (q search.Query, none bool, err error) {
	add := func(t search.Term) { q.Terms = append(q.Terms, t) }
	for _, h := range c.Header {
		switch strings.ToLower(h.Key) {
		case "from":
			add(search.Term{Kind: search.From, Text: strings.ToLower(h.Value)})
		case "to", "cc", "bcc":
			add(search.Term{Kind: search.To, Text: strings.ToLower(h.Value)})
		case "subject":
			add(search.Term{Kind: search.Subject, Text: strings.ToLower(h.Value)})
		case "message-id":
			add(search.Term{Kind: search.MessageID, Text: strings.ToLower(strings.Trim(strings.TrimSpace(h.Value), "<>"))})
		default:
			return q, false, &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot,
				Text: "SEARCH HEADER " + h.Key + " is not supported: use FROM, TO, CC, SUBJECT, BODY or TEXT"}
		}
	}
	for _, text := range append(append([]string{}, c.Body...), c.Text...) {
		if words := search.Tokens(text); len(words) > 0 {
			add(search.Term{Kind: search.Words, Words: words})
		}
	}
	since, before := c.Since, c.Before
	if !c.SentSince.IsZero() && c.SentSince.After(since) {
		since = c.SentSince
	}
	if !c.SentBefore.IsZero() && (before.IsZero() || c.SentBefore.Before(before)) {
		before = c.SentBefore
	}
	if !since.IsZero() {
		// SINCE is on or after the day: after the millisecond before it.
		add(search.Term{Kind: search.After, Time: day(since).Add(-time.Millisecond)})
	}
	if !before.IsZero() {
		add(search.Term{Kind: search.Before, Time: day(before)})
	}
	if c.Larger > 0 {
		add(search.Term{Kind: search.Larger, Size: c.Larger})
	}
	if c.Smaller > 0 {
		add(search.Term{Kind: search.Smaller, Size: c.Smaller})
	}
	for _, f := range c.Flag {
		switch {
		case strings.EqualFold(string(f), string(imap.FlagSeen)):
			add(search.Term{Kind: search.Read})
		case !strings.EqualFold(string(f), string(imap.FlagDeleted)):
			none = true
		}
	}
	for _, f := range c.NotFlag {
		if strings.EqualFold(string(f), string(imap.FlagSeen)) {
			add(search.Term{Kind: search.Unread})
		}
	}
	if c.ModSeq != nil {
		return q, false, &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "MODSEQ is not supported"}
	}
	if len(q.Terms) > search.MaxTerms {
		return q, false, errSearchTooLarge
	}
	return q, none, nil
}

// day is the start of t's day in UTC: IMAP dates have no time.
func day(t time.Time) time.Time {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
}
