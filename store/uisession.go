package store

import (
	"context"
	"time"
)

// UISession is a dashboard session: a browser signed in with a key of
// AccountID whose SHA-256 digest is KeyDigest. Each use checks that the key
// still belongs to the account, so that removing a key from the accounts
// file ends its sessions.
type UISession struct {
	AccountID string
	KeyDigest [32]byte
}

// Sessions keeps dashboard sessions where every process serving the store
// finds them. A session is named by its account and a random id.
type Sessions interface {
	// CreateUISession records s under the account's id for ttl. The
	// account keeps at most limit sessions: past that, the ones closest to
	// expiry end. It returns Unavailable when the backend cannot be
	// reached.
	CreateUISession(ctx context.Context, id string, s UISession, ttl time.Duration, limit int) error

	// UISession returns the account's session id, and false when there is
	// none (never made, ended or expired).
	UISession(ctx context.Context, accountID, id string) (UISession, bool, error)

	// DeleteUISession ends the account's session id; one that is not
	// there is not an error.
	DeleteUISession(ctx context.Context, accountID, id string) error
}
