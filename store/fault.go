package store

import (
	"context"
	"time"
)

// FaultStage is the point of an SMTP transaction where a fault rule acts
// (docs/smtp.md, "Fault injection").
type FaultStage string

// The stages a fault rule can name.
const (
	// FaultAuth is the reply to a successful AUTH.
	FaultAuth FaultStage = "auth"
	// FaultMail is the reply to MAIL FROM.
	FaultMail FaultStage = "mail"
	// FaultRcpt is the reply to RCPT TO.
	FaultRcpt FaultStage = "rcpt"
	// FaultData acts before the message is read: the reply to DATA, or to
	// the first BDAT chunk.
	FaultData FaultStage = "data"
	// FaultMessage acts after the whole message was read, before it is
	// stored.
	FaultMessage FaultStage = "message"
)

// FaultStages lists every stage in transaction order.
var FaultStages = []FaultStage{FaultAuth, FaultMail, FaultRcpt, FaultData, FaultMessage}

// Valid reports whether s is a known stage.
func (s FaultStage) Valid() bool {
	for _, v := range FaultStages {
		if s == v {
			return true
		}
	}
	return false
}

// FaultReply is the SMTP reply a fault gives instead of the usual one.
type FaultReply struct {
	Code int    `json:"code"` // 400..599
	Text string `json:"text"`
}

// FaultRule makes mailsink misbehave on purpose for one account's SMTP
// transactions, so that a test can check how its application copes.
type FaultRule struct {
	ID        string     `json:"id"`
	AccountID string     `json:"accountId"`
	Stage     FaultStage `json:"stage"`
	// What happens: any of a delay before the reply, another reply, or
	// the end of the connection without a reply.
	Reply      *FaultReply   `json:"reply,omitempty"`
	Delay      time.Duration `json:"delay,omitempty"`
	Disconnect bool          `json:"disconnect,omitempty"`
	// Which transactions match: an address, "@domain", or "" for any.
	Recipient string `json:"recipient,omitempty"`
	Sender    string `json:"sender,omitempty"`
	// Count, when not zero, makes the rule apply to the next Count
	// matching transactions only; Remaining says how many are left.
	Count     int64 `json:"count,omitempty"`
	Remaining int64 `json:"remaining,omitempty"`
	// Probability, when not nil, is the chance (0..1) that a matching
	// transaction is hit.
	Probability *float64  `json:"probability,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	// ExpiresAt, when not zero, is when the rule stops applying.
	ExpiresAt time.Time `json:"expiresAt,omitempty"`
}

// Expired reports whether r no longer applies at now.
func (r *FaultRule) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// MaxFaultRules is the most fault rules one account may hold at once.
const MaxFaultRules = 100

// ErrFaultNotFound is returned, wrapped or as is, when a fault rule does
// not exist in the account.
var ErrFaultNotFound = &Error{Code: NotFound, Msg: "fault rule not found"}

// Faults keeps fault rules, so that every process sharing the store
// applies the same rules and a restart keeps them. Every method returns an error with code Unavailable when the
// backend cannot be reached.
type Faults interface {
	// CreateFault stores r, whose ID, AccountID and CreatedAt are set and
	// whose Remaining equals Count. It first forgets the account's rules
	// expired at r.CreatedAt. It returns Conflict when the account holds
	// MaxFaultRules rules already.
	CreateFault(ctx context.Context, r *FaultRule) error

	// Faults returns the account's rules, expired ones included, oldest
	// first.
	Faults(ctx context.Context, accountID string) ([]*FaultRule, error)

	// DeleteFault removes the account's rule id. It returns
	// ErrFaultNotFound when the account has no such rule.
	DeleteFault(ctx context.Context, accountID, id string) error

	// DeleteFaults removes every rule of the account.
	DeleteFaults(ctx context.Context, accountID string) error

	// ConsumeFault takes one of the remaining matches of the account's
	// counted rule id, atomically across processes, and removes the rule
	// with its last one. It reports false, and changes nothing, when the
	// rule is gone or is not counted.
	ConsumeFault(ctx context.Context, accountID, id string) (bool, error)
}
