package boltv4

import (
	"context"

	"github.com/mailsink/mailsink/store"
)

// MailboxUIDs implements store.Mailboxes as the releases this package reads
// did: they had no UIDs, and no IMAP door to ask for them. pebblestore
// numbers the emails Export moves to it when a mail client first looks.
// It always returns an error with code Internal.
func (s *Store) MailboxUIDs(context.Context, store.UIDQuery) (store.UIDPage, error) {
	return store.UIDPage{}, store.Errorf(store.Internal, "the store of releases before UIDs does not number emails")
}
