package ingest

import (
	"context"

	"github.com/mailsink/mailsink/store"
)

// errQuotaElsewhere is the refusal of a delivery whose recipient's account,
// not the caller's, is over its quota: it says nothing of that account.
var errQuotaElsewhere = store.Errorf(store.QuotaExceeded, "a recipient's account has used up its storage quota")

// checkQuota refuses emails (of one account) that would take their account
// past its quota. It reads the account's totals before the write, so
// deliveries in flight at once may each pass it: the quota can be passed by
// what is in flight, never by more. The refusal gives the account's figures
// only to the account itself (caller, the API key's account; "" for none):
// anyone else learns only that the quota is used up.
func (s *Service) checkQuota(ctx context.Context, caller string, emails []*store.Email) error {
	if s.cfg.Quota == nil || s.cfg.Stats == nil {
		return nil
	}
	account := emails[0].AccountID
	maxEmails, maxBytes := s.cfg.Quota(account)
	if maxEmails <= 0 && maxBytes <= 0 {
		return nil
	}
	n, b, err := s.cfg.Stats.AccountStats(ctx, account)
	if err != nil {
		return err
	}
	var add int64
	for _, e := range emails {
		add += e.RawSize
	}
	over := maxEmails > 0 && n+int64(len(emails)) > maxEmails || maxBytes > 0 && b+add > maxBytes
	switch {
	case !over:
		return nil
	case caller != account:
		return errQuotaElsewhere
	case maxEmails > 0 && n+int64(len(emails)) > maxEmails:
		return store.Errorf(store.QuotaExceeded, "the account's quota of %d emails is used up (it stores %d): delete emails or wait for retention", maxEmails, n)
	}
	return store.Errorf(store.QuotaExceeded, "the account's quota of %d bytes is used up (it stores %d, this message adds %d): delete emails or wait for retention", maxBytes, b, add)
}

// HasQuota reports whether the account's storage is bounded.
func (s *Service) HasQuota(account string) bool {
	if s.cfg.Quota == nil || s.cfg.Stats == nil {
		return false
	}
	maxEmails, maxBytes := s.cfg.Quota(account)
	return maxEmails > 0 || maxBytes > 0
}

// QuotaFull returns a QuotaExceeded error when the account can store no
// more (its quota's emails or bytes are all used), for an SMTP RCPT to
// refuse that recipient alone; nil otherwise, also when its totals cannot be
// read (the message's own check decides then). caller is as for
// checkQuota.
func (s *Service) QuotaFull(ctx context.Context, caller, account string) error {
	if s.cfg.Quota == nil || s.cfg.Stats == nil {
		return nil
	}
	maxEmails, maxBytes := s.cfg.Quota(account)
	if maxEmails <= 0 && maxBytes <= 0 {
		return nil
	}
	n, b, err := s.cfg.Stats.AccountStats(ctx, account)
	if err != nil || !(maxEmails > 0 && n >= maxEmails || maxBytes > 0 && b >= maxBytes) {
		return nil
	}
	if caller != account {
		return errQuotaElsewhere
	}
	return store.Errorf(store.QuotaExceeded, "the account's quota is used up (it stores %d emails, %d bytes): delete emails or wait for retention", n, b)
}
