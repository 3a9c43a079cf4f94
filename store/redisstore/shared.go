package redisstore

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// The calls an SMTP message makes (the fault rules' EXISTS at MAIL, the
// create, the search digest's check results) share pipelines with the
// concurrent calls of other messages: a call that arrives while another's
// pipeline is out waits for it, and the next pipeline carries every call
// that arrived meanwhile (package batch); a lone call goes out at once.
// Each call keeps its own commands and answer: what they share is the
// round trip, which costs redis-server a read, a write and a wake-up per
// pipeline rather than per call. A create keeps its own deadline inside
// its script and its own fence.

// maxSharedBatch bounds the calls of one pipeline.
const maxSharedBatch = 64

// A sharedCall is a call of a few commands that can share a pipeline.
type sharedCall interface {
	// queue adds the call's commands to pipe.
	queue(ctx context.Context, pipe redis.Pipeliner)
	// answer reads the answers once the pipeline ran. When retry is set
	// and the node did not know a script of the call (NOSCRIPT, nothing
	// written), it returns that script instead: the call is queued again
	// once the script is loaded.
	answer(retry bool) *redis.Script
	// fail sets the call's error when it could not be sent again.
	fail(err error)
}

// sharedSend is a sharedCall waiting for its pipeline.
type sharedSend struct {
	ctx  context.Context
	call sharedCall
}

// sendInShared sends call in a pipeline shared with concurrent calls and
// returns once it has been answered (the call holds its answer). It
// returns an error only when the call was not sent: ctx is already done,
// or the Store is closed. Calls share pipelines per account in a cluster,
// so that an account on a node that is failing over holds up no other
// account's calls; on a single Redis all calls share them.
func (s *Store) sendInShared(ctx context.Context, accountID string, call sharedCall) error {
	if err := ctx.Err(); err != nil {
		return err // as a pipeline of its own would answer
	}
	if s.sharded == nil {
		accountID = ""
	}
	if !s.shared.Do(accountID, &sharedSend{ctx: ctx, call: call}) {
		return store.Errorf(store.Unavailable, "store closed")
	}
	return nil
}

// sendShared sends a batch of calls in one pipeline, and those the node
// answered NOSCRIPT again once their scripts are loaded. The pipeline
// runs under the latest deadline of the batch (none if a call has none)
// and no call's cancellation: a call must not fail because another one's
// caller went away or had less time, and each create's script refuses to
// write past that create's own deadline anyway.
func (s *Store) sendShared(ws []*sharedSend) {
	ctx := context.WithoutCancel(ws[0].ctx)
	var last time.Time
	for _, w := range ws {
		d, ok := w.ctx.Deadline()
		if !ok {
			last = time.Time{}
			break
		}
		if d.After(last) {
			last = d
		}
	}
	if !last.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	for retry := true; len(ws) > 0; retry = false {
		pipe := s.client.Pipeline()
		for _, w := range ws {
			w.call.queue(ctx, pipe)
		}
		_, _ = pipe.Exec(ctx)
		var again []*sharedSend
		var load []*redis.Script
		for _, w := range ws {
			if sc := w.call.answer(retry); sc != nil {
				again = append(again, w)
				if !slices.Contains(load, sc) {
					load = append(load, sc)
				}
			}
		}
		for _, sc := range load {
			if err := sc.Load(ctx, s.client).Err(); err != nil {
				for _, w := range again {
					w.call.fail(err)
				}
				return
			}
		}
		ws = again
	}
}

// existsCall is EXISTS of one key.
type existsCall struct {
	key string
	cmd *redis.IntCmd
}

func (c *existsCall) queue(ctx context.Context, pipe redis.Pipeliner) {
	c.cmd = pipe.Exists(ctx, c.key)
}

func (c *existsCall) answer(bool) *redis.Script { return nil }

func (c *existsCall) fail(error) {}

// scriptCall is one run of a script.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

func (c *scriptCall) queue(ctx context.Context, pipe redis.Pipeliner) {
	c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
}

func (c *scriptCall) answer(retry bool) *redis.Script {
	if retry && noScript(c.cmd) {
		return c.script
	}
	return nil
}

func (c *scriptCall) fail(err error) { c.cmd.SetErr(err) }
