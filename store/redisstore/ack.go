package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// A create answered as failed must store nothing, even when its write
// reaches Redis later (a stall longer than the caller's deadline, a reply
// lost with its connection, replicas that did not confirm in time): the
// sender retries, and the retry must not make a duplicate. Two guards
// together give that rule, since an email's id is assigned before its
// write:
//
//   - The create script refuses to write once its deadline has passed: the
//     caller's deadline less deadlineMargin, by Redis's clock. A write that
//     waited in a stalled server past the moment its caller gave up finds
//     the deadline gone and writes nothing. A body written with SET
//     expires at the deadline (SET ... PXAT <deadline> NX), and the script
//     writes nothing when it finds no body: Redis's expiry is the clock,
//     with no TIME call in the script. A large body (a hash, see
//     largeBody) keeps its hour (bodyTTL) and the script compares the
//     deadline with TIME. This assumes clocks within deadlineMargin of
//     each other (NTP).
//   - When the outcome is unknown (a timeout, a broken connection, too few
//     replica acknowledgements), fenceScript runs afterwards for the same
//     ids: it deletes the emails if this very create stored them (same
//     body id), and leaves a tombstone per id (fenceTTL) that a create
//     landing after the fence checks and obeys.
//
// Replica acknowledgement (Options.AckReplicas): Redis replicates
// asynchronously, so a master's answer does not survive its failover. With
// AckReplicas > 0 the create script and WAIT go in one pipeline on one
// connection to the key's master (WAIT only covers writes made on its own
// connection; inside a script or MULTI it returns at once), and the create
// succeeds only when enough replicas confirm. The script then does not
// publish its email.created events: they go out from here once WAIT has
// confirmed, so no live subscriber (SSE, a held wait, another replica) is
// told of an email that a failover could still take back. The stream entry
// is written by the script, in commit order; live events of concurrent
// creates of one account may therefore arrive out of stream order.

const (
	// deadlineMargin is how long before the caller's deadline the create
	// script stops accepting the write: time for its answer to travel back,
	// and slack for clock differences.
	deadlineMargin = 250 * time.Millisecond
	// fenceTTL is how long a tombstone refuses a late create of its id.
	fenceTTL = 24 * time.Hour
	// fenceTimeout bounds the retries of one fence.
	fenceTimeout = 30 * time.Second
	// routeRetryWait is the pause between two attempts of a create whose
	// node refused it without running it (moved slot, cluster down, no
	// connection), while the cluster map is reloaded.
	routeRetryWait = 100 * time.Millisecond
	// routeRetryFor bounds those attempts: about what a failover takes
	// with cluster-node-timeout 2000-3000 (docs/redis.md).
	routeRetryFor = 5 * time.Second
	// publishTimeout bounds the publication of an acknowledged create's
	// events.
	publishTimeout = time.Second
	// bodyTTL is how long a body written for a create stays when the create
	// script does not make it permanent: it never ran, or wrote nothing.
	bodyTTL = time.Hour
)

// errRefused is the create script's answer when its deadline has passed or
// an id is fenced: nothing was written.
var errRefused = store.Errorf(store.Unavailable, "store unavailable: the write came too late and was refused")

// Info implements store.Store.
func (s *Store) Info() store.Info {
	return store.Info{Name: "redis", Guarantee: s.guarantee()}
}

// guarantee says what a 250 means across a failover with the store's
// replica acknowledgement settings.
func (s *Store) guarantee() string {
	if s.ackReplicas == 0 {
		return "250 once the master has the write; replication is asynchronous, a failover may lose it: MAILSINK_REDIS_ACK_REPLICAS=0"
	}
	return fmt.Sprintf("250 once %d replica(s) of the master have the write, within %v: MAILSINK_REDIS_ACK_REPLICAS=%d",
		s.ackReplicas, s.ackTimeout, s.ackReplicas)
}

// createCall is one CreateEmails call as the create and fence scripts see it.
type createCall struct {
	accountID string
	account   accountKeys
	keys      []string
	args      []any
	bodyID    string
	// The body, written before the script: its value (encodeBodyValue),
	// or for a large body (largeBody) its raw source and parsed content.
	body, raw, meta []byte
	// bodyDeadline, when not 0, is the deadline in Unix milliseconds at
	// which body expires if the script has not made it permanent; the
	// script then gets "0" for its own deadline check.
	bodyDeadline int64
	ids          []string
	events       [][]byte // email.created payloads, in the order of ids
}

// createDeadline returns the create script's deadline for ctx, in Unix
// milliseconds, or 0 when ctx has none.
func createDeadline(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return dl.Add(-deadlineMargin).UnixMilli()
}

// create runs the create script, with replica acknowledgement when
// configured, and fences the emails when the outcome is unknown. While the
// account's node refuses the script without running it (no connection to a
// dead master, CLUSTERDOWN, MOVED during a failover) it tries again every
// routeRetryWait, for at most routeRetryFor and until ctx ends, with the
// cluster map reloading meanwhile, so a failover of a few seconds delays
// the answer instead of failing it.
// It returns the 1-based position of an email whose id already exists, or 0.
func (s *Store) create(ctx context.Context, c *createCall) (int, error) {
	var (
		res any
		err error
		// unknown is set once an attempt may have written: a later
		// attempt's error reply does not say that the earlier one did not.
		unknown bool
	)
	giveUp := time.After(routeRetryFor)
	for {
		if s.ackReplicas > 0 {
			res, err = s.createAcked(ctx, c)
		} else {
			res, err = s.sendCreateShared(ctx, c)
		}
		if err != nil && ambiguous(err) {
			unknown = true
		}
		if err == nil || !retryable(err) {
			break
		}
		s.noteError(err)
		select {
		case <-ctx.Done():
		case <-giveUp:
		case <-time.After(routeRetryWait):
			continue
		}
		break
	}
	if err != nil {
		if errors.Is(err, errRefused) {
			return 0, err
		}
		if unknown {
			s.fence(c)
		}
		s.noteError(err)
		return 0, classify(err)
	}
	switch v := res.(type) {
	case int64:
		if v == -1 {
			return 0, errRefused
		}
		return int(v), nil
	case []any:
		return 0, nil
	}
	return 0, store.Errorf(store.Internal, "create script answered %T", res)
}

// sendCreate writes c's body (SET with bodyTTL, or for a large body HSET
// and PEXPIRE) and runs the create script
// in one pipeline on client, followed by WAIT for the replicas when wait is
// set; the script and the body go to the same node, since the body key
// carries the account's hash tag. When the node does not know the script
// (NOSCRIPT: nothing was written but a body that expires), it loads it and
// sends the pipeline again. It returns the script's answer and, with wait,
// how many replicas confirmed.
func (s *Store) sendCreate(ctx context.Context, client redis.Cmdable, c *createCall, wait bool) (any, int64, error) {
	for loaded := false; ; loaded = true {
		pipe := client.Pipeline()
		set, run := queueCreate(ctx, pipe, c)
		var acks *redis.Cmd
		if wait {
			// Pipeliner has no Wait method; the command is the same.
			acks = pipe.Do(ctx, "WAIT", s.ackReplicas, s.ackTimeout.Milliseconds())
		}
		_, _ = pipe.Exec(ctx)
		if !loaded && noScript(run) {
			if err := createScript.Load(ctx, client).Err(); err != nil {
				return nil, 0, err
			}
			continue
		}
		res, err := createAnswer(set, run)
		if err != nil || !wait {
			return res, 0, err
		}
		if _, ok := res.([]any); !ok {
			return res, 0, nil // refused or a conflict: nothing was written, nothing to wait for
		}
		// The script wrote. A WAIT that failed confirmed nothing (Redis
		// ends it with UNBLOCKED when a failover demotes the master
		// meanwhile): the caller fences the write as unacknowledged.
		got, _ := acks.Int64()
		return res, got, nil
	}
}

// queueCreate adds c's body write and create script to pipe. A body with
// a deadline is written only if its key is missing (NX): when the key is
// there, an earlier attempt of this very create wrote it, and its script
// may have made it permanent, which an expiry in the past would undo.
func queueCreate(ctx context.Context, pipe redis.Pipeliner, c *createCall) (set redis.Cmder, run *redis.Cmd) {
	switch {
	case c.raw != nil:
		set = pipe.HSet(ctx, c.keys[1], "raw", c.raw, "meta", c.meta)
		pipe.PExpire(ctx, c.keys[1], bodyTTL)
	case c.bodyDeadline != 0:
		set = pipe.Do(ctx, "SET", c.keys[1], c.body, "PXAT", c.bodyDeadline, "NX")
	default:
		set = pipe.Set(ctx, c.keys[1], c.body, bodyTTL)
	}
	return set, pipe.EvalSha(ctx, createScript.Hash(), c.keys, c.args...)
}

// noScript reports whether the node did not know the create script.
func noScript(run *redis.Cmd) bool {
	return run.Err() != nil && redis.HasErrorPrefix(run.Err(), "NOSCRIPT")
}

// createAnswer returns the create script's answer after a pipeline of
// queueCreate ran.
func createAnswer(set redis.Cmder, run *redis.Cmd) (any, error) {
	if err := run.Err(); err != nil {
		return nil, err
	}
	res := run.Val()
	if v, ok := res.(int64); ok && v == -1 && set.Err() != nil && !errors.Is(set.Err(), redis.Nil) {
		// The script found no body: say why. (Nil is a SET NX that found
		// the key of an earlier attempt, which expired since.)
		return nil, set.Err()
	}
	return res, nil
}

// createSend is a create without replica acknowledgement, sent in a
// pipeline shared with concurrent calls (shared.go).
type createSend struct {
	c   *createCall
	set redis.Cmder
	run *redis.Cmd
	res any
	err error
}

func (w *createSend) queue(ctx context.Context, pipe redis.Pipeliner) {
	w.set, w.run = queueCreate(ctx, pipe, w.c)
}

func (w *createSend) answer(retry bool) *redis.Script {
	if retry && noScript(w.run) {
		return createScript
	}
	w.res, w.err = createAnswer(w.set, w.run)
	return nil
}

func (w *createSend) fail(err error) { w.err = err }

// sendCreateShared is sendCreate without replica acknowledgement, in a
// pipeline shared with concurrent calls.
func (s *Store) sendCreateShared(ctx context.Context, c *createCall) (any, error) {
	w := &createSend{c: c}
	if err := s.sendInShared(ctx, c.accountID, w); err != nil {
		return nil, err
	}
	return w.res, w.err
}

// createAcked sends the body, the create script and WAIT in one pipeline
// to the master of the account's slot and, once enough replicas confirmed,
// publishes the emails' events.
func (s *Store) createAcked(ctx context.Context, c *createCall) (any, error) {
	node, err := s.masterFor(ctx, c.keys[0])
	if err != nil {
		return nil, err
	}
	res, got, err := s.sendCreate(ctx, node, c, true)
	if err != nil {
		return nil, err
	}
	if _, ok := res.([]any); !ok {
		return res, nil
	}
	if got < int64(s.ackReplicas) {
		return nil, &ackError{want: s.ackReplicas, got: got}
	}
	s.publishCreated(ctx, node, c.accountID, res.([]any), c.events)
	return res, nil
}

// ackError is a write that too few replicas confirmed in time: the master
// has it, so the outcome is unknown and the write is fenced.
type ackError struct {
	want int
	got  int64
}

func (e *ackError) Error() string {
	return fmt.Sprintf("write confirmed by %d of %d replicas in time", e.got, e.want)
}

// publishCreated publishes the email.created events of an acknowledged
// create, with the stream ids the script gave them. A failure to publish
// loses only live delivery: the stream has the events for EventsAfter.
func (s *Store) publishCreated(ctx context.Context, node *redis.Client, accountID string, streamIDs []any, events [][]byte) {
	if len(streamIDs) != len(events) {
		return // a retried create that had already landed: its events are in the stream
	}
	// The create is acknowledged: its announcement must not fail because
	// the request's deadline is near.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	cmd, channel, _ := strings.Cut(s.target(s.account(accountID)), " ")
	pipe := node.Pipeline()
	for i, v := range streamIDs {
		id, _ := v.(string)
		pipe.Do(ctx, cmd, channel, id+" "+string(events[i]))
	}
	_, _ = pipe.Exec(ctx)
}

// masterFor returns the client of the node that masters key's slot.
func (s *Store) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, store.Errorf(store.Internal, "replica acknowledgement needs a Redis or Redis Cluster client, not %T", s.client)
}

// fence makes sure the emails of c stay unstored: in the background, since
// the caller is already answering the failure, and retried until it runs or
// fenceTimeout passes (a late create that lands meanwhile is still refused
// by its deadline, unless it had none).
func (s *Store) fence(c *createCall) {
	args := make([]any, 0, 6+2*len(c.ids))
	args = append(args, c.account.fencePrefix(), c.bodyID, int64(fenceTTL/time.Second), eventHistory,
		s.createTarget(c.account), c.account.base+"st:")
	for _, id := range c.ids {
		deleted, _ := eventPayload(store.EmailDeleted, c.accountID, id, nil)
		args = append(args, id, deleted)
	}
	args = append(args, c.account.checks(""))
	s.fences.Add(1)
	go func() {
		defer s.fences.Done()
		ctx, cancel := context.WithTimeout(context.Background(), fenceTimeout)
		defer cancel()
		go func() {
			select {
			case <-s.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			err := fenceScript.Run(ctx, s.client, c.keys, args...).Err()
			if err == nil || ctx.Err() != nil {
				return
			}
			s.noteError(err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(routeRetryWait):
			}
		}
	}()
}

// createTarget is the publish target (publishFn in scripts.go) of the
// create and fence scripts: "" when events are published after replica
// acknowledgement instead.
func (s *Store) createTarget(k accountKeys) string {
	if s.ackReplicas > 0 {
		return ""
	}
	return s.target(k)
}

// fencePrefix starts the tombstone keys of the account's fenced ids.
func (k accountKeys) fencePrefix() string { return k.base + "f:" }

// ambiguous reports whether a failed create may still have written: only
// an error reply from Redis (the script refused or never ran) says it did
// not. A failed dial does not either: go-redis retries a command after a
// network error, so the dial error it returns may follow an attempt that
// was sent and ran (found in CI: a Redis killed under load stored a message
// answered 451).
func ambiguous(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr)
}

// retryable reports whether a create was refused by its node without
// running, in a way a reloaded cluster map or a moment can cure.
func retryable(err error) bool {
	if dialError(err) || redis.IsClusterDownError(err) || redis.IsTryAgainError(err) ||
		redis.IsReadOnlyError(err) || redis.IsLoadingError(err) || redis.IsMasterDownError(err) {
		return true
	}
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}

// dialError reports whether err is a failure to connect, before anything
// was sent.
func dialError(err error) bool {
	var oerr *net.OpError
	return errors.As(err, &oerr) && oerr.Op == "dial"
}

// A cluster client keeps sending a slot's commands to the node its map
// names until a MOVED reply or its periodic reload (NewClient sets
// clusterReloadInterval) corrects the map; when a master dies, that node
// answers nothing at all. So every error that may mean the map is stale
// (no connection, a timeout, CLUSTERDOWN, MOVED, a read-only former
// master) asks for a reload at once, at most every reloadEvery: service
// resumes as soon as the cluster shows the new master.

const (
	// clusterReloadInterval is how old the cluster map may get while
	// commands run.
	clusterReloadInterval = time.Second
	// reloadEvery is the shortest time between two reloads asked for by
	// errors.
	reloadEvery = 100 * time.Millisecond
)

// reloader reloads a cluster client's map, rate-limited.
type reloader struct {
	cc   *redis.ClusterClient
	last atomic.Int64 // Unix nanoseconds of the last reload asked for
}

// note asks for a reload when err may mean the map is stale and none was
// asked for in the last reloadEvery.
func (r *reloader) note(err error) {
	if r == nil || err == nil || !staleMap(err) {
		return
	}
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(reloadEvery) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.cc.ReloadState(context.Background())
}

// staleMap reports whether err may come from a cluster map that no longer
// matches the cluster.
func staleMap(err error) bool {
	if errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true // the network, or a timeout
	}
	return retryable(err)
}

// DialHook implements redis.Hook.
func (r *reloader) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: it notes the error of every command.
func (r *reloader) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.note(err)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook: it notes the error of every
// pipeline.
func (r *reloader) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		r.note(err)
		return err
	}
}

// noteError notes an error of a command sent outside the cluster client
// (to one node's client).
func (s *Store) noteError(err error) { s.reload.note(err) }
