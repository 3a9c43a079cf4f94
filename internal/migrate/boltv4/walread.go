package boltv4

// Reads of creates that are logged but not applied yet.

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/mailsink/mailsink/store"
)

// unapplied returns the account's creates that a read transaction whose
// applied number is applied does not hold. pending must come from
// pendingOf before the transaction began.
func unapplied(pending []walOp, applied uint64) []walOp {
	i := 0
	for i < len(pending) && pending[i].lsn <= applied {
		i++
	}
	return pending[i:]
}

// pendingOf returns the account's logged creates not applied yet.
func (w *walLog) pendingOf(accountID string) []walOp {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byAccount[accountID] == 0 {
		return nil
	}
	var out []walOp
	for _, o := range w.pending {
		if o.op.emails[0].AccountID == accountID {
			out = append(out, o)
		}
	}
	return out
}

// waitApplied waits until every create numbered up to lsn is in bbolt. While
// the applier fails (a full disk), it returns the applier's error, or nil at
// once when soft: a read that may answer without the pending creates then
// does, so that reads work on a full store.
func (w *walLog) waitApplied(ctx context.Context, lsn uint64, soft bool) error {
	for {
		w.mu.Lock()
		applied, err, ch := w.applied, w.applyErr, w.changed
		w.mu.Unlock()
		switch {
		case applied >= lsn:
			return nil
		case err != nil && soft:
			return nil
		case err != nil:
			return err
		}
		if err := w.urge(ctx, ch); err != nil {
			return err
		}
	}
}

// settleKey waits until the email under key, if it is logged, is applied:
// writes to an email go to bbolt.
func (w *walLog) settleKey(ctx context.Context, key []byte) error {
	w.mu.Lock()
	lsn, ok := w.byKey[string(key)]
	w.mu.Unlock()
	if !ok || lsn == 0 {
		return nil
	}
	return w.waitApplied(ctx, lsn, false)
}

// settleAccount waits until the account's creates logged so far are
// applied, or the applier fails (waitApplied's soft).
func (w *walLog) settleAccount(ctx context.Context, accountID string) error {
	p := w.pendingOf(accountID)
	if len(p) == 0 {
		return nil
	}
	return w.waitApplied(ctx, p[len(p)-1].lsn, true)
}

// settleAll waits until every create logged so far is applied.
func (w *walLog) settleAll(ctx context.Context) error {
	w.mu.Lock()
	var last uint64
	if n := len(w.pending); n > 0 {
		last = w.pending[n-1].lsn
	}
	w.mu.Unlock()
	if last == 0 {
		return nil
	}
	return w.waitApplied(ctx, last, false)
}

// pendingMatch is a logged email that a list query would answer.
type pendingMatch struct {
	lsn   uint64
	email *store.Email
}

// queryPending returns the account's logged emails (from pendingOf) that q
// would answer, in list order (newest first, then id descending), and the
// log number of q's cursor email when that is logged (0 if not).
func queryPending(pending []walOp, q store.ListQuery) (matches []pendingMatch, cursor uint64) {
	if len(pending) == 0 {
		return nil, 0
	}
	prefix, also, _ := plan(q)
	prefixes := append([][]byte{prefix}, also...)
	m := newMatcher(q)
	since, hasSince := q.Since.UnixMilli(), !q.Since.IsZero()
	var before []byte
	if q.Before != "" {
		before = emailKey(q.AccountID, store.NormalizeID(q.Before))
	}
	for _, o := range pending {
		for i, e := range o.op.emails {
			if before != nil && string(before) == string(o.op.keys[i]) {
				cursor = o.lsn
			}
			if matchesIndexes(o.op.indexes[i], prefixes) && m.match(e) && (!hasSince || e.ReceivedAt.UnixMilli() > since) {
				matches = append(matches, pendingMatch{lsn: o.lsn, email: e})
			}
		}
	}
	slices.SortFunc(matches, func(a, b pendingMatch) int { return -listOrder(a.email, b.email) })
	return matches, cursor
}

// listOrder compares two emails by receivedAt (to the millisecond) and id,
// the order of the index keys: a list is this order reversed.
func listOrder(a, b *store.Email) int {
	if c := cmp.Compare(a.ReceivedAt.UnixMilli(), b.ReceivedAt.UnixMilli()); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// unappliedMatches returns the matches a read transaction whose applied
// number is applied does not hold.
func unappliedMatches(matches []pendingMatch, applied uint64) []pendingMatch {
	out := matches[:0:0]
	for _, m := range matches {
		if m.lsn > applied {
			out = append(out, m)
		}
	}
	return out
}

// lastLSN returns the highest log number among matches, or 0.
func lastLSN(matches []pendingMatch) uint64 {
	var last uint64
	for _, m := range matches {
		last = max(last, m.lsn)
	}
	return last
}

// matchesIndexes reports whether an email with index keys keys is in every
// index that prefixes name.
func matchesIndexes(keys [4][]byte, prefixes [][]byte) bool {
	for _, p := range prefixes {
		found := false
		for _, k := range keys {
			if len(k) >= len(p)+timeLen && string(k[:len(p)]) == string(p) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
