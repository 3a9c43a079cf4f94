package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"github.com/mailsink/mailsink/store"
)

// A delivery may come twice: a client retries a create whose answer it did
// not get, a provider retries a webhook. With a key (an Idempotency-Key
// header, a provider's delivery id), the ids of a delivery's emails are
// reserved under the key before they are written, so that a repeat writes
// the same ids; the store refuses an id twice, and the repeat answers with
// what the first stored. Content is never used to recognise a repeat: a test
// may send the same message twice on purpose. Without a key, a delivery
// that fails stores nothing (see undo), so the sender's retry is the only
// copy.

// claim is what reserve found for a delivery's key.
type claim int

const (
	// fresh: no key, or the key is new: store the emails.
	fresh claim = iota
	// pending: an earlier request with the key reserved these ids but did
	// not say it stored them (it failed, or is under way, or died): store
	// them; a Conflict then means it had.
	pending
	// settled: an earlier request stored these emails: store nothing.
	settled
)

// reserve gives emails (all of one account) the ids reserved under key:
// their own when the key is new, else those of the first request with the
// key. A key first used for a request with another digest is a Conflict.
// Without a key it does nothing.
func (s *Service) reserve(ctx context.Context, key, digest string, emails []*store.Email) (claim, error) {
	if key == "" {
		return fresh, nil
	}
	ids := make([]string, len(emails))
	for i, e := range emails {
		ids[i] = e.ID
	}
	got, isNew, err := s.store.Reserve(ctx, emails[0].AccountID, key, store.Reservation{Digest: digest, IDs: ids}, store.IdempotencyTTL)
	if err != nil {
		return fresh, err
	}
	if isNew {
		return fresh, nil
	}
	if got.Digest != digest || len(got.IDs) != len(emails) {
		return fresh, store.Errorf(store.Conflict, "this Idempotency-Key was used for a different request in the last %d hours", int(store.IdempotencyTTL/time.Hour))
	}
	for i, e := range emails {
		e.ID = got.IDs[i]
	}
	if got.Stored {
		return settled, nil
	}
	return pending, nil
}

// crossKey is the name under which caller's idempotency key is reserved in
// another account. Keys of the account's own requests are printable ASCII
// (the Idempotency-Key header, provider delivery ids: PrintableKey), so they
// never start with the NUL that this one does.
func crossKey(caller, key string) string {
	return "\x00" + caller + "\x00" + key
}

// PrintableKey returns key when it is printable ASCII, else its SHA-256 in
// hex: a provider's delivery id, made fit to be an idempotency key that no
// crossKey can equal.
func PrintableKey(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			sum := sha256.Sum256([]byte(key))
			return hex.EncodeToString(sum[:])
		}
	}
	return key
}

// create stores emails sharing body under the delivery's key (empty for
// none) and returns the stored emails. A settled delivery stores nothing:
// it returns what was stored (those deleted since as the repeat describes
// them). With a key, a Conflict means that another request with the key
// stored these very ids (a concurrent retry), which is success too. The
// account's quota is checked before anything is written.
func (s *Service) create(ctx context.Context, caller, key string, c claim, body *store.Body, emails []*store.Email) ([]*store.Email, error) {
	if c != settled {
		if err := s.checkQuota(ctx, caller, emails); err != nil {
			return nil, err
		}
		err := s.store.CreateEmails(ctx, body, emails)
		switch {
		case err == nil:
			s.settle(ctx, key, emails[0].AccountID)
			return emails, nil
		case key == "":
			return nil, err
		case !store.IsCode(err, store.Conflict):
			// Nothing was stored: the retry reserves ids anew, since the
			// store may fence these against a late landing.
			s.release(key, emails[0].AccountID)
			return nil, err
		}
	}
	out := make([]*store.Email, len(emails))
	for i, e := range emails {
		stored, err := s.store.GetEmail(ctx, e.AccountID, e.ID)
		switch {
		case err == nil:
			out[i] = stored
		case store.IsCode(err, store.NotFound):
			out[i] = e
		default:
			return nil, err
		}
	}
	return out, nil
}

// settle records that the emails of key's delivery are stored. A failure
// only means that a repeat stores them again if they were deleted meanwhile;
// it is logged, not answered.
func (s *Service) settle(ctx context.Context, key, accountID string) {
	if key == "" {
		return
	}
	if err := s.store.Settle(ctx, accountID, key); err != nil && s.cfg.Log != nil {
		s.cfg.Log.Warn("could not mark an idempotency key as stored", "account", accountID, "err", err)
	}
}

// release forgets key's reservation after a failed write, on a context of
// its own (the request's may be what ended). When it fails too, the retry
// finds the old ids, fails, and releases them then.
func (s *Service) release(key, accountID string) {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	if err := s.store.Release(ctx, accountID, key); err != nil && s.cfg.Log != nil {
		s.cfg.Log.Warn("could not release an idempotency key after a failed write", "account", accountID, "err", err)
	}
}

// undo deletes the emails of a delivery that failed part of the way (its
// recipients belong to several accounts, stored one account at a time), so
// that the sender's retry does not store them twice. It runs on a context of
// its own: the delivery's may be what ended.
func (s *Service) undo(stored []*store.Email) {
	if len(stored) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	for _, e := range stored {
		if err := s.store.DeleteEmail(ctx, e.AccountID, e.ID); err != nil && !store.IsCode(err, store.NotFound) && s.cfg.Log != nil {
			s.cfg.Log.Error("a failed delivery could not be undone: its retry will store this email again",
				"account", e.AccountID, "email", e.ID, "err", err)
		}
	}
}

// undoTimeout bounds undo.
const undoTimeout = 10 * time.Second

// digest sums the parts of a request, each length-prefixed so that no two
// requests sum alike by moving bytes between parts.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i, l := 0, uint64(len(p)); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sortedPairs flattens a map into sorted key, value pairs for digest.
func sortedPairs(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, 2*len(m))
	for _, k := range keys {
		out = append(out, k, m[k])
	}
	return out
}
