// Package store holds mailsink's domain: the Email and Account types, the
// ListQuery and Update that select and change emails, the store contract
// every engine implements, and the error codes shared by all layers.
//
// The contract is split into roles (Emails, Events, Idempotency, Stats,
// Pruner, Faults, Webhooks, Sessions, Checks, Mailboxes), so that each package receives at
// construction the part it uses; Store is all of them, and every engine
// implements all of them. It has no dependencies on any engine;
// store/pebblestore (embedded, the default) and store/redisstore implement
// Store, and store/storetest is the conformance suite both must pass.
package store

import (
	"context"
	"time"
)

// Status is the processing state of an email.
type Status string

// The three states an email can be in (the OpenAPI document, Status).
const (
	StatusReceived  Status = "received"
	StatusProcessed Status = "processed"
	StatusArchived  Status = "archived"
)

// Valid reports whether s is one of the three known states.
func (s Status) Valid() bool {
	switch s {
	case StatusReceived, StatusProcessed, StatusArchived:
		return true
	}
	return false
}

// Account owns emails and API keys. Every email belongs to exactly one.
type Account struct {
	ID   string
	Slug string
	Name string
}

// Email is the metadata of one stored email: everything but its body. It is
// what listing returns, so a backend must be able to load it without loading
// the raw message.
type Email struct {
	ID        string // UUID, lower case
	AccountID string
	MessageID *string
	Sender    string // as received; filters compare case-insensitively
	Recipient string
	Subject   *string
	Status    Status
	Notes     *string
	Labels    []string // never nil once stored
	RawSize   int64
	// Read is whether the email was read (a mail client's \Seen); new
	// mail is unread.
	Read bool

	// Timestamps are UTC with millisecond precision; backends keep them exactly.
	ReceivedAt time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Attachment is the metadata of one attachment; Size counts decoded bytes.
type Attachment struct {
	ContentID   *string
	ContentType *string
	Disposition *string
	Filename    *string
	Size        int64
}

// Body is the stored content of an email: the raw source, byte-exact, and
// the SMTP transcript of its delivery. Several emails (the recipients of
// one message) may share one Body; an engine stores it once. Engines store
// and return it as given: reading what the raw source holds is package
// bodies's work, not theirs.
type Body struct {
	Raw []byte
	// Transcript is the SMTP transaction that delivered the message; nil
	// for messages that came another way.
	Transcript *Transcript
	// Given, when not nil, holds the parts a create request gave instead
	// of having them read from Raw (bodies stored by earlier releases,
	// which were parsed on receipt, read back with it too); readers show
	// it as it is. Nil for mail whose parts are read from Raw.
	Given *Parts
}

// Parts is what readers show of a message's content besides its raw
// source.
type Parts struct {
	Text        *string
	HTML        *string
	Headers     map[string]string // lower-case keys; never nil once stored
	Attachments []Attachment      // never nil once stored
}

// ListQuery selects a page of one account's emails, newest first: by
// ReceivedAt descending, then ID descending. Zero-valued filters do not
// filter; set filters combine with AND.
type ListQuery struct {
	AccountID string
	Recipient string // exact address, case-insensitive
	Sender    string // exact address, case-insensitive
	Status    Status
	Subject   string // substring, case-insensitive, literal
	Label     string // exact and case-sensitive: one of the email's Labels
	// Since, when not zero, keeps only emails with ReceivedAt strictly after it.
	Since time.Time
	// Before, when not empty, is the id of an email of the account: only
	// emails after it in list order are selected (it need not match the
	// other filters), so that paging by the last id seen neither skips nor
	// repeats an email while new ones arrive. Offset then counts from it.
	Before string
	Limit  int   // 1..100
	Offset int64 // number of matching emails skipped
}

// Update changes the mutable fields of an email. A nil field is left as it is.
type Update struct {
	Labels  *[]string
	Notes   *Nullable // Notes.Value nil sets notes to null
	Status  *Status
	Subject *Nullable // Subject.Value nil sets subject to null
	Read    *bool
	// UpdatedAt is the new value of Email.UpdatedAt; the caller owns the clock.
	UpdatedAt time.Time
}

// Nullable is a new value for a nullable string field.
type Nullable struct {
	Value *string
}

// Store is the whole contract of an engine: every role below, and the
// engine's own lifecycle. Implementations are safe for concurrent use.
// Every method returns an error with code Unavailable when the backend
// cannot be reached, so callers can answer 503 / SMTP 451 and let clients
// retry.
type Store interface {
	Emails
	Events
	Idempotency
	Stats
	Pruner
	Faults
	Webhooks
	Sessions
	Checks
	Mailboxes

	// Ping returns nil when the backend answers.
	Ping(ctx context.Context) error

	// Info describes the engine.
	Info() Info

	// Close releases the backend. The Store must not be used afterwards.
	Close() error
}

// Info describes an engine, for operators and for the packages that adapt
// to it.
type Info struct {
	// Name is the engine's name in metrics and logs: "embedded", "redis".
	Name string
	// Local is true when the data lives in this process, so that a call
	// costs memory and disk work rather than a network round trip (and a
	// timeout cannot cut it short).
	Local bool
	// Guarantee says what an acknowledged write survives (a crash, a
	// failover) with the engine's settings.
	Guarantee string
}

// Emails keeps emails per account.
type Emails interface {
	// CreateEmails stores emails that all belong to one account and share
	// one body, atomically: afterwards all of them are visible with their
	// indexes, or none is. When it returns nil the emails are durable. The
	// body is stored once however many emails share it, and removed with the
	// last of them. Emails must have IDs, timestamps, a status and non-nil
	// labels already; it returns Invalid when they do not belong to one
	// account or the slice is empty.
	CreateEmails(ctx context.Context, body *Body, emails []*Email) error

	// GetEmail returns the email with id in the account. It returns NotFound
	// when there is none, including when it belongs to another account.
	GetEmail(ctx context.Context, accountID, id string) (*Email, error)

	// GetBody returns the body of the email with id in the account, with its
	// raw source. It returns NotFound like GetEmail.
	GetBody(ctx context.Context, accountID, id string) (*Body, error)

	// ListEmails returns at most q.Limit emails of q.AccountID matching q, in
	// list order (see ListQuery). Its cost grows with Offset+Limit, not with
	// the size of the account, except for the Subject and Label filters,
	// which may scan the account's emails. It returns NotFound when q.Before
	// names no email of the account.
	ListEmails(ctx context.Context, q ListQuery) ([]*Email, error)

	// CountEmails returns how many of q.AccountID's emails match q's
	// filters, Since and Before included; Limit and Offset are ignored. Its
	// cost may grow with the number of emails it counts, and with the
	// Subject and Label filters with the size of the account, as a listing
	// that reads every match would. It returns NotFound like ListEmails.
	CountEmails(ctx context.Context, q ListQuery) (int64, error)

	// UpdateEmail applies u to the email with id in the account atomically
	// and returns the result. It returns NotFound like GetEmail.
	UpdateEmail(ctx context.Context, accountID, id string, u Update) (*Email, error)

	// DeleteEmail removes the email with id in the account, its indexes and,
	// when no other email shares it, its body. It returns NotFound like
	// GetEmail.
	DeleteEmail(ctx context.Context, accountID, id string) error
}

// EventType names a change to an email.
type EventType string

// The events a Notifier publishes.
const (
	EmailCreated EventType = "email.created"
	EmailUpdated EventType = "email.updated"
	EmailDeleted EventType = "email.deleted"
)

// Event is one change to one email of an account.
type Event struct {
	// ID orders the events of an account: "<unix ms>-<seq>".
	ID        string    `json:"id"`
	Type      EventType `json:"type"`
	AccountID string    `json:"accountId"`
	EmailID   string    `json:"emailId"`
	// Email is the email after the change; nil for EmailDeleted.
	Email *Email `json:"email,omitempty"`
}

// Subscription receives the events of one account. Its channel is closed
// when the subscription ends: by Close, by the store closing, or because
// the subscriber fell too far behind (it should resubscribe and catch up
// with EventsAfter).
type Subscription interface {
	Events() <-chan Event
	Close()
}

// Events publishes an Event for every create, update and delete, to the
// subscribers of every process sharing the store.
type Events interface {
	// Subscribe returns a subscription to the account's events from now on.
	Subscribe(accountID string) Subscription

	// EventsAfter returns the account's recent events after the event with
	// id afterID, oldest first, and whether that is all of them (false
	// when the bounded history no longer reaches back to afterID). It
	// returns Invalid for a malformed id and Unavailable when the backend
	// cannot be reached.
	EventsAfter(ctx context.Context, accountID, afterID string) ([]Event, bool, error)
}

// Stats keeps per-account totals exactly and cheaply, updated atomically
// with every create and delete, for quotas and metrics.
type Stats interface {
	// AccountStats returns how many emails the account holds and the sum
	// of their RawSize. Its cost does not grow with the size of the
	// account. An account without emails has zero of both. It returns
	// Unavailable when the backend cannot be reached.
	AccountStats(ctx context.Context, accountID string) (emails, rawBytes int64, err error)
}

// Pruner finds an account's oldest emails through an index, so that
// retention can delete them.
type Pruner interface {
	// OldestEmails returns at most limit of the account's emails, oldest
	// first (ReceivedAt, then ID, ascending), leaving out the account's
	// newest keep emails. With keep 0 they are simply the oldest emails;
	// with keep k they are the emails beyond the newest k, read in one
	// snapshot with the account's count, so that processes pruning the same
	// account at once, each deleting what it was given, never leave fewer
	// than k. It starts after the skip oldest of them, so that a caller can
	// step over emails it decided to keep. Its cost grows with skip+limit,
	// not with the size of the account (the Redis store's only with limit).
	// It returns Invalid when limit is not in 1..100 or keep or skip is
	// negative, and Unavailable when the backend cannot be reached.
	OldestEmails(ctx context.Context, accountID string, keep, skip int64, limit int) ([]*Email, error)
}

// IdempotencyTTL is how long an idempotency key is remembered.
const IdempotencyTTL = 24 * time.Hour

// Reservation is what an idempotency key was first used for: a digest of
// the request and the ids of the emails it stores; Stored once they are.
type Reservation struct {
	Digest string
	IDs    []string
	Stored bool
}

// Idempotency remembers idempotency keys, so that a repeated request (a
// client's or a provider's retry) is recognised as the same delivery: the
// ids of its emails are reserved under the key before they are written,
// and a repeat writes the same ids, which the store refuses to write twice
// (Conflict).
type Idempotency interface {
	// Reserve records r under key in the account for ttl, unless key is
	// recorded already: then it returns the recorded reservation and false.
	// Keys of different accounts never meet. It returns Unavailable when
	// the backend cannot be reached.
	Reserve(ctx context.Context, accountID, key string, r Reservation, ttl time.Duration) (Reservation, bool, error)

	// Settle marks the reservation under key as stored, so that a repeat
	// answers with what was stored instead of storing it again (even after
	// the emails were deleted). A key not recorded is not an error.
	Settle(ctx context.Context, accountID, key string) error

	// Release forgets the reservation under key unless it is stored: the
	// request failed and stored nothing, so its retry reserves ids anew
	// (a store may fence the failed attempt's ids against a late write).
	Release(ctx context.Context, accountID, key string) error
}
