package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

var _ store.Checks = (*Store)(nil)

// checks is the hash of an email's check results, by check name; the
// delete script removes it with the email.
func (k accountKeys) checks(id string) string { return k.base + "ck:" + id }

// putCheckScript sets field ARGV[2] of the results hash KEYS[3] to ARGV[3]
// when the email ARGV[1] exists: in the records hash KEYS[1], or under its
// key of the older layout KEYS[2]. It returns 1 when set, 0 when there is
// no such email, so that a check that ends after its email was deleted
// leaves nothing behind.
var putCheckScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
return 1
`)

// PutCheck implements store.Checks.
func (s *Store) PutCheck(ctx context.Context, accountID, id, name string, result []byte) error {
	if len(result) > store.MaxCheckBytes {
		return store.Errorf(store.TooLarge, "check result of %d bytes is over the limit of %d", len(result), store.MaxCheckBytes)
	}
	k, id := s.account(accountID), store.NormalizeID(id)
	n, err := putCheckScript.Run(ctx, s.client, []string{k.records(), k.email(id), k.checks(id)}, id, name, result).Int()
	if err != nil {
		return classify(err)
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// putChecksScript is putCheckScript for many emails of one account in one
// call: ARGV[1] is the name; for each email, its id and result are
// ARGV[i] and ARGV[i+1], its key of the older layout and its results hash
// KEYS[i] and KEYS[i+1] (i = 2, 4, ...), and KEYS[1] is the records hash.
// It returns how many results it set. The account's keys share a hash
// slot, so that the one call suits a Redis Cluster too.
var putChecksScript = redis.NewScript(`
local n = 0
for i = 2, #KEYS, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 or redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HSET', KEYS[i+1], ARGV[1], ARGV[i+1])
    n = n + 1
  end
end
return n
`)

// PutChecks implements store.Checks with one run of putChecksScript.
func (s *Store) PutChecks(ctx context.Context, accountID, name string, results map[string][]byte) error {
	if err := store.CheckBatchError(results); err != nil {
		return err
	}
	if len(results) == 0 {
		return nil
	}
	k := s.account(accountID)
	keys := make([]string, 1, 1+2*len(results))
	args := make([]any, 1, 1+2*len(results))
	keys[0], args[0] = k.records(), name
	for id, result := range results {
		id = store.NormalizeID(id)
		keys = append(keys, k.email(id), k.checks(id))
		args = append(args, id, result)
	}
	// Search keeps each new email's digest here: the run shares a
	// pipeline with other calls (shared.go).
	run := &scriptCall{script: putChecksScript, keys: keys, args: args}
	if err := s.sendInShared(ctx, accountID, run); err != nil {
		return classify(err)
	}
	if err := run.cmd.Err(); err != nil {
		return classify(err)
	}
	return nil
}

// GetCheck implements store.Checks. The results hash exists only while its
// email does.
func (s *Store) GetCheck(ctx context.Context, accountID, id, name string) ([]byte, error) {
	k, id := s.account(accountID), store.NormalizeID(id)
	v, err := s.client.HGet(ctx, k.checks(id), name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, classify(err)
	}
	return v, nil
}

// GetChecks implements store.Checks: the reads go in one pipeline (the
// account's keys share a hash slot).
func (s *Store) GetChecks(ctx context.Context, accountID string, ids []string, name string) (map[string][]byte, error) {
	if len(ids) > store.MaxCheckBatch {
		return nil, store.Errorf(store.Invalid, "%d ids in one read of check results, over the limit of %d", len(ids), store.MaxCheckBatch)
	}
	k := s.account(accountID)
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, k.checks(store.NormalizeID(id)), name)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, classify(err)
	}
	out := make(map[string][]byte, len(ids))
	for i, cmd := range cmds {
		if v, err := cmd.Bytes(); err == nil {
			out[ids[i]] = v
		}
	}
	return out, nil
}
