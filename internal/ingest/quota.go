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
	if s.cfg.Quota == nil {
		return nil
	}
	account := emails[0].AccountID
	maxEmails, maxBytes := s.cfg.Quota(account)
	if maxEmails <= 0 && maxBytes <= 0 {
		return nil
	}
	n, b, err := s.store.AccountStats(ctx, account)
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
	if s.cfg.Quota == nil {
		return false
	}
	maxEmails, maxBytes := s.cfg.Quota(account)
	return maxEmails > 0 || maxBytes > 0
}

// QuotaRoom returns a QuotaExceeded error when the account cannot store one
// more email beside pending ones (the recipients in the account a message
// already has, for an SMTP RCPT to refuse the next recipient alone): when
// its quota's emails would be passed, or its bytes are all used, or would be
// passed by pending+1 copies of a message of size bytes (the size an SMTP
// client announced; 0 when unknown). It returns nil otherwise, also when the
// account's totals cannot be read (the message's own check decides then).
// caller is as for checkQuota.
func (s *Service) QuotaRoom(ctx context.Context, caller, account string, pending int, size int64) error {
	if s.cfg.Quota == nil {
		return nil
	}
	maxEmails, maxBytes := s.cfg.Quota(account)
	if maxEmails <= 0 && maxBytes <= 0 {
		return nil
	}
	n, b, err := s.store.AccountStats(ctx, account)
	if err != nil {
		return nil
	}
	add := int64(pending) + 1
	emailsOver := maxEmails > 0 && n+add > maxEmails
	bytesOver := maxBytes > 0 && (b >= maxBytes || size > 0 && b+add*size > maxBytes)
	switch {
	case !emailsOver && !bytesOver:
		return nil
	case caller != account:
		return errQuotaElsewhere
	case emailsOver && pending > 0:
		return store.Errorf(store.QuotaExceeded, "the account's quota of %d emails has room for %d more (it stores %d), which this message's recipients before this one take: send to this one later", maxEmails, max(0, maxEmails-n), n)
	case emailsOver:
		return store.Errorf(store.QuotaExceeded, "the account's quota of %d emails is used up (it stores %d): delete emails or wait for retention", maxEmails, n)
	case b >= maxBytes:
		return store.Errorf(store.QuotaExceeded, "the account's quota of %d bytes is used up (it stores %d): delete emails or wait for retention", maxBytes, b)
	}
	return store.Errorf(store.QuotaExceeded, "the account's quota of %d bytes has no room for this recipient (it stores %d, this message announced %d for each of its %d recipients in it): delete emails or wait for retention", maxBytes, b, size, add)
}
