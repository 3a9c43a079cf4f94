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

	// PutChecks stores each of results under name for the account's
	// email whose id is its key, replacing what name held, in one call:
	// like PutCheck for each, without a round trip for each. An id with
	// no such email (another account's, or one deleted while its check
	// ran) is skipped, and nothing is kept for it. It returns Invalid
	// when results holds more than MaxCheckBatch results, and TooLarge
	// when one is over MaxCheckBytes; then nothing is stored.
	PutChecks(ctx context.Context, accountID, name string, results map[string][]byte) error

	// GetCheck returns the result stored under name for the email with
	// id in the account. It returns NotFound when there is none, or no
	// such email.
	GetCheck(ctx context.Context, accountID, id, name string) ([]byte, error)

	// GetChecks returns the results stored under name for the account's
	// emails ids, by id, in one call: an email without one (or no such
	// email) is left out. ids holds at most MaxCheckBatch ids.
	GetChecks(ctx context.Context, accountID string, ids []string, name string) (map[string][]byte, error)
}

// MaxCheckBatch bounds the ids of one GetChecks call, and the results of
// one PutChecks call.
const MaxCheckBatch = 1000

// CheckBatchError returns the error PutChecks answers for results over its
// limits (Invalid or TooLarge), or nil when they are within them: the one
// test that every store makes before it stores anything.
func CheckBatchError(results map[string][]byte) error {
	if len(results) > MaxCheckBatch {
		return Errorf(Invalid, "%d check results in one put, over the limit of %d", len(results), MaxCheckBatch)
	}
	for _, r := range results {
		if len(r) > MaxCheckBytes {
			return Errorf(TooLarge, "check result of %d bytes is over the limit of %d", len(r), MaxCheckBytes)
		}
	}
	return nil
}
