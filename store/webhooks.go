package store

import (
	"context"
	"time"
)

// Webhook is one account's subscription to its email events: every event
// of a listed type that passes the filter is delivered to URL (docs/webhooks.md).
type Webhook struct {
	ID        string // UUID, lower case
	AccountID string
	URL       string
	Events    []EventType
	Filter    WebhookFilter
	// Secret signs deliveries: "whsec_" and the base64 of the key.
	Secret    string
	CreatedAt time.Time
	// DisabledAt is set when deliveries failed for too long; a disabled
	// webhook gets no new deliveries. DisabledReason says why.
	DisabledAt     *time.Time
	DisabledReason string
}

// WebhookFilter narrows a webhook to some emails. Empty fields do not
// filter; set fields combine with AND. Recipient and Sender are exact
// addresses, case-insensitive; Subject is a literal substring,
// case-insensitive.
type WebhookFilter struct {
	Recipient string
	Sender    string
	Subject   string
}

// DeliveryStatus is where a delivery stands.
type DeliveryStatus string

// The states of a delivery.
const (
	DeliveryPending   DeliveryStatus = "pending"   // not yet answered with a 2xx; retried
	DeliverySucceeded DeliveryStatus = "succeeded" // a 2xx ended it
	DeliveryFailed    DeliveryStatus = "failed"    // given up
)

// Delivery is one event on its way to one webhook, with the outcome of its
// last attempt.
type Delivery struct {
	// ID is the webhook-id header, the same on every attempt. It is
	// derived from the webhook and the event, so that enqueueing an event
	// twice yields one delivery.
	ID        string
	AccountID string
	WebhookID string
	EventID   string
	Type      EventType
	EmailID   string
	// Payload is the request body, the same on every attempt.
	Payload       []byte
	CreatedAt     time.Time
	Status        DeliveryStatus
	Attempts      int
	NextAttemptAt time.Time // when the next attempt is due, while pending
	// The last attempt: when, the receiver's status (0 when there was no
	// answer), what went wrong, and at most the first 256 bytes of the
	// receiver's answer.
	LastAttemptAt  *time.Time
	LastStatusCode int
	LastError      string
	LastResponse   string
}

// Webhooks keeps webhooks and their durable delivery queue. Deliveries are claimed with a lease: a claimed
// delivery is not handed out again until its lease ends, so that no two
// workers (in one process or in replicas sharing the store) attempt it at
// once, and a worker that dies holding it only delays it.
type Webhooks interface {
	// CreateWebhook stores w. It returns Conflict when the account has
	// max webhooks already.
	CreateWebhook(ctx context.Context, w *Webhook, max int) error

	// GetWebhook returns the webhook with id in the account; NotFound when
	// there is none, including when it belongs to another account.
	GetWebhook(ctx context.Context, accountID, id string) (*Webhook, error)

	// ListWebhooks returns the account's webhooks, oldest first.
	ListWebhooks(ctx context.Context, accountID string) ([]*Webhook, error)

	// DeleteWebhook removes the webhook and its deliveries; NotFound like
	// GetWebhook.
	DeleteWebhook(ctx context.Context, accountID, id string) error

	// DisableWebhook marks the webhook disabled at at for reason;
	// NotFound like GetWebhook. Disabling a disabled webhook keeps the
	// first reason.
	DisableWebhook(ctx context.Context, accountID, id, reason string, at time.Time) error

	// WebhookAccounts returns the accounts that have (or had) a webhook.
	WebhookAccounts(ctx context.Context) ([]string, error)

	// WebhookCursor returns the id of the last event of the account that
	// was turned into deliveries, "" when none was.
	WebhookCursor(ctx context.Context, accountID string) (string, error)

	// EnqueueDeliveries stores the deliveries that are not stored yet
	// (by ID) as due at their NextAttemptAt, and moves the account's
	// cursor to cursor unless it is already past it, in one step. A
	// webhook keeps the log of its newest MaxDeliveryLog deliveries; older
	// finished ones are dropped, pending ones never (they stay until they
	// are delivered or given up).
	EnqueueDeliveries(ctx context.Context, accountID, cursor string, ds []*Delivery) error

	// ClaimDeliveries leases at most limit of the account's pending
	// deliveries that are due at now, for lease, to the holder of token.
	ClaimDeliveries(ctx context.Context, accountID string, now time.Time, lease time.Duration, token string, limit int) ([]*Delivery, error)

	// FinishDelivery stores d after an attempt and ends the lease of
	// token on it: d stays queued, due at d.NextAttemptAt, while its
	// Status is pending. It returns Conflict when token no longer holds
	// the lease and NotFound when the delivery is gone.
	FinishDelivery(ctx context.Context, d *Delivery, token string) error

	// ListDeliveries returns at most limit of the webhook's deliveries,
	// newest first.
	ListDeliveries(ctx context.Context, accountID, webhookID string, limit int) ([]*Delivery, error)
}

// MaxDeliveryLog is how many deliveries a webhook's log keeps.
const MaxDeliveryLog = 1000
