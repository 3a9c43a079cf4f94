package store

import "context"

// MaxUIDPage is the most emails one MailboxUIDs call returns.
const MaxUIDPage = 1000

// Mailboxes numbers each account's emails for mail clients (IMAP UIDs).
//
// Every email gets a UID when it is stored, in the transaction that stores
// it: a number unique in its account, never given again, and larger than
// every UID given before it, so that a client that has seen UIDs up to n
// finds every email stored since above n, whichever process stored it.
// Emails stored by a release before UIDs get theirs when MailboxUIDs first
// meets them, oldest (ReceivedAt) first, above every UID given so far.
// UIDValidity names the numbering: it changes when the numbering starts
// again (a store that kept nothing, as the embedded store in memory at
// each start), so that clients forget the UIDs they knew.
type Mailboxes interface {
	// MailboxUIDs returns the account's numbering and the UIDs of at most
	// q.Limit of its emails in the window q selects, in UID order. Its cost
	// grows with q.Limit and the logarithm of the account's size, once the
	// emails stored without a UID have theirs. It returns Invalid when
	// q.Limit is not in 1..MaxUIDPage, and Unavailable when the backend
	// cannot be reached.
	MailboxUIDs(ctx context.Context, q UIDQuery) (UIDPage, error)
}

// UIDQuery selects emails by UID: those above After and, when Before is
// not 0, below Before; the Limit lowest of them, or with Newest the Limit
// highest.
type UIDQuery struct {
	AccountID     string
	After, Before uint32
	Limit         int
	Newest        bool
}

// UIDPage is a window of an account's numbering.
type UIDPage struct {
	// UIDValidity is not 0.
	UIDValidity uint32
	// UIDNext is above every UID given so far in the account.
	UIDNext uint32
	// Emails are in UID order.
	Emails []EmailUID
}

// EmailUID is an email and its UID.
type EmailUID struct {
	UID uint32
	ID  string
}
