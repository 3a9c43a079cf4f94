package ingest

import (
	"context"

	"github.com/mailsink/mailsink/store"
)

// checkQuota refuses emails (of one account) that would take their account
// past its quota. It reads the account's totals before the write, so
// deliveries in flight at once may each pass it: the quota can be passed by
// what is in flight, never by more.
func (s *Service) checkQuota(ctx context.Context, emails []*store.Email) error {
	if s.cfg.Quota == nil || s.cfg.Stats == nil {
		return nil
	}
	maxEmails, maxBytes := s.cfg.Quota(emails[0].AccountID)
	if maxEmails <= 0 && maxBytes <= 0 {
		return nil
	}
	n, b, err := s.cfg.Stats.AccountStats(ctx, emails[0].AccountID)
	if err != nil {
		return err
	}
	var add int64
	for _, e := range emails {
		add += e.RawSize
	}
	switch {
	case maxEmails > 0 && n+int64(len(emails)) > maxEmails:
		return store.Errorf(store.QuotaExceeded, "the account's quota of %d emails is used up (it stores %d): delete emails or wait for retention", maxEmails, n)
	case maxBytes > 0 && b+add > maxBytes:
		return store.Errorf(store.QuotaExceeded, "the account's quota of %d bytes is used up (it stores %d, this message adds %d): delete emails or wait for retention", maxBytes, b, add)
	}
	return nil
}
