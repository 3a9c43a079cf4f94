package store

import "context"

// MaxCheckBytes bounds one stored check result: the checks of package
// checks keep theirs far below it (a link check of 100 URLs is a few tens
// of KB).
const MaxCheckBytes = 1 << 20

// Checks keeps the results of an email's checks (HTML compatibility,
// links, spam score, authentication), each under a short name, so that a
// check is not run again for every reader. A result lives as long as its
// email: deleting the email deletes its results. Results are derived from
// the email and can be made again, so a store may lose the latest of them
// in a crash (the embedded store does not wait for the disk to keep them).
type Checks interface {
	// PutCheck stores result under name for the email with id in the
	// account, replacing what name held. It returns NotFound when there
	// is no such email (including when it belongs to another account, or
	// was deleted while the check ran), and TooLarge when result is over
	// MaxCheckBytes.
	PutCheck(ctx context.Context, accountID, id, name string, result []byte) error

	// GetCheck returns the result stored under name for the email with
	// id in the account. It returns NotFound when there is none, or no
	// such email.
	GetCheck(ctx context.Context, accountID, id, name string) ([]byte, error)

	// GetChecks returns the results stored under name for the account's
	// emails ids, by id, in one call: an email without one (or no such
	// email) is left out. ids holds at most MaxCheckBatch ids.
	GetChecks(ctx context.Context, accountID string, ids []string, name string) (map[string][]byte, error)
}

// MaxCheckBatch bounds the ids of one GetChecks call.
const MaxCheckBatch = 1000
