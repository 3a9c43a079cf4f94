package redisstore

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// privateStore returns a Store with opts on a Redis of its own, which the
// test may stall, flush or stop, and that Redis's port.
func privateStore(t *testing.T, opts Options) (*Store, string) {
	t.Helper()
	port := freePort(t)
	startRedisServer(t, port)
	c, err := NewClient("redis://127.0.0.1:"+port+"/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, opts)
	t.Cleanup(func() { s.Close() })
	return s, port
}

// TestLateCreateStoresNothing stalls a private Redis's writes (CLIENT PAUSE
// WRITE) for longer than a create's deadline: the create answers
// Unavailable, and once the stall is over and the write has reached Redis,
// nothing was stored, so the sender's retry cannot make a duplicate.
func TestLateCreateStoresNothing(t *testing.T) {
	t.Parallel()
	s, port := privateStore(t, Options{Prefix: "mailsinktest:late:"})
	admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer admin.Close()
	ctx := context.Background()
	// Load the script first, so that the stall meets the write itself.
	if err := s.CreateEmails(ctx, testBody("warm"), []*store.Email{testEmail(acct, "a@example.com", "b@example.com", 1)}); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}

	const stall = 1500 * time.Millisecond
	if err := admin.Do(ctx, "CLIENT", "PAUSE", stall.Milliseconds(), "WRITE").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	paused := time.Now()
	e := testEmail(acct, "a@example.com", "b@example.com", 2)
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := s.CreateEmails(cctx, testBody("late"), []*store.Email{e})
	cancel()
	if !store.IsCode(err, store.Unavailable) {
		t.Fatalf("CreateEmails during the stall: %v, want Unavailable", err)
	}
	// Wait for the end of the stall, then for the stalled write and the
	// fence to have run: a write on a connection of its own comes after
	// them.
	time.Sleep(time.Until(paused.Add(stall)))
	s.fences.Wait()
	if err := admin.Set(ctx, "mailsinktest:late:after", "1", time.Minute).Err(); err != nil {
		t.Fatalf("SET after the stall: %v", err)
	}
	if _, err := s.GetEmail(ctx, acct, e.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail of the refused create: %v, want NotFound", err)
	}
	if n, _, err := s.AccountStats(ctx, acct); err != nil || n != 1 {
		t.Errorf("AccountStats = %d, %v; want the 1 email stored before the stall", n, err)
	}
	if n, err := s.BodyCount(ctx); err != nil || n != 1 {
		t.Errorf("BodyCount = %d, %v; want 1", n, err)
	}
}

// TestFenceRemovesLandedCreate runs the fence of a create that did land
// (its answer lost): the email, its indexes, body and bytes are gone, a
// later landing of the same create is refused, and an unrelated email of
// the account is untouched.
func TestFenceRemovesLandedCreate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		s := newStore(t)
		ctx := context.Background()
		keep := testEmail(acct, "a@example.com", "b@example.com", 1)
		if err := s.CreateEmails(ctx, testBody("keep"), []*store.Email{keep}); err != nil {
			t.Fatal(err)
		}
		e1 := testEmail(acct, "a@example.com", "b@example.com", 2)
		e2 := testEmail(acct, "c@example.com", "b@example.com", 3)
		call, err := s.createArgs(ctx, testBody("lost"), []*store.Email{e1, e2})
		if err != nil {
			t.Fatal(err)
		}
		if pos, err := s.create(ctx, call); err != nil || pos != 0 {
			t.Fatalf("create = %d, %v", pos, err)
		}
		// A check result (or search's digest) landed before the fence.
		if err := s.PutCheck(ctx, acct, e1.ID, "html", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		s.fence(call)
		s.fences.Wait()
		for _, e := range []*store.Email{e1, e2} {
			if _, err := s.GetEmail(ctx, acct, e.ID); !store.IsCode(err, store.NotFound) {
				t.Errorf("GetEmail(%s) after the fence: %v, want NotFound", e.ID, err)
			}
		}
		if n, err := s.client.Exists(ctx, s.account(acct).checks(e1.ID)).Result(); err != nil || n != 0 {
			t.Errorf("the fenced email's check results: %d keys, %v; want none", n, err)
		}
		if n, b, err := s.AccountStats(ctx, acct); err != nil || n != 1 || b != keep.RawSize {
			t.Errorf("AccountStats = %d, %d, %v; want 1, %d", n, b, err, keep.RawSize)
		}
		if n, err := s.BodyCount(ctx); err != nil || n != 1 {
			t.Errorf("BodyCount = %d, %v; want 1", n, err)
		}
		l, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Recipient: "c@example.com", Limit: 10})
		if err != nil || len(l) != 0 {
			t.Errorf("ListEmails(recipient) = %v, %v; want none", ids(l), err)
		}
		if _, err := s.create(ctx, call); !store.IsCode(err, store.Unavailable) {
			t.Errorf("the create landing again after its fence: %v, want Unavailable", err)
		}
		if _, err := s.GetEmail(ctx, acct, e1.ID); !store.IsCode(err, store.NotFound) {
			t.Errorf("GetEmail after the late landing: %v, want NotFound", err)
		}
		if n, err := s.BodyCount(ctx); err != nil || n != 1 {
			t.Errorf("BodyCount after the late landing = %d, %v; want 1", n, err)
		}
	})
}

// TestCreateRetryOfOwnWrite runs the same create twice, as go-redis does
// when an answer is lost: the second run is a success, not a Conflict.
func TestCreateRetryOfOwnWrite(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		s := newStore(t)
		ctx := context.Background()
		call, err := s.createArgs(ctx, testBody("x"), []*store.Email{testEmail(acct, "a@example.com", "b@example.com", 1)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if pos, err := s.create(ctx, call); err != nil || pos != 0 {
				t.Fatalf("create #%d = %d, %v", i+1, pos, err)
			}
		}
		if n, _, err := s.AccountStats(ctx, acct); err != nil || n != 1 {
			t.Errorf("AccountStats = %d, %v; want 1", n, err)
		}
		// The retry sent the body again, with its expiry: the script
		// made it permanent again.
		if ttl, err := s.client.TTL(ctx, call.keys[1]).Result(); err != nil || ttl != -1 {
			t.Errorf("TTL of the body after the retry = %v, %v; want -1 (none)", ttl, err)
		}
	})
}

// TestAckReplicas runs a private master and replica. With AckReplicas 1 a
// create succeeds while the replica follows, its event is published; with
// the replica frozen (SIGSTOP) creates answer Unavailable within about the
// ack timeout, nobody is told of them, and once the replica is back they
// were not stored.
func TestAckReplicas(t *testing.T) {
	t.Parallel()
	port, rport := freePort(t), freePort(t)
	startRedisServer(t, port)
	replica := startRedisServer(t, rport, "--replicaof", "127.0.0.1", port)
	admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer admin.Close()
	ctx := context.Background()
	waitUntil(t, "the replica is attached", func() bool {
		info, err := admin.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	})

	c, err := NewClient("redis://127.0.0.1:"+port+"/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, Options{Prefix: "mailsinktest:ack:", AckReplicas: 1, AckTimeout: 300 * time.Millisecond})
	defer s.Close()
	sub := s.Subscribe(acct)
	defer sub.Close()

	e := testEmail(acct, "a@example.com", "b@example.com", 1)
	if err := s.CreateEmails(ctx, testBody("acked"), []*store.Email{e}); err != nil {
		t.Fatalf("CreateEmails with the replica up: %v", err)
	}
	select {
	case ev := <-sub.Events():
		if ev.Type != store.EmailCreated || ev.EmailID != e.ID {
			t.Errorf("event %+v, want email.created of %s", ev, e.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no email.created event after an acknowledged create")
	}

	if err := replica.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			replica.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	late := testEmail(acct, "a@example.com", "b@example.com", 2)
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = s.CreateEmails(cctx, testBody("unacked"), []*store.Email{late})
	cancel()
	took := time.Since(start)
	if !store.IsCode(err, store.Unavailable) {
		t.Fatalf("CreateEmails with the replica frozen: %v, want Unavailable", err)
	}
	if took > 2*time.Second {
		t.Errorf("the unacknowledged create took %v, want about the 300ms ack timeout", took)
	}
	s.fences.Wait()
	replica.cmd.Process.Signal(syscall.SIGCONT)
	stopped = false
	if _, err := s.GetEmail(ctx, acct, late.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail of the unacknowledged create: %v, want NotFound", err)
	}
	// Its deletion may be announced; its creation never is.
	for {
		select {
		case ev := <-sub.Events():
			if ev.Type == store.EmailCreated {
				t.Errorf("email.created of %s announced though not acknowledged", ev.EmailID)
			}
			continue
		default:
		}
		break
	}
	// Each attempt is a new email, as each delivery attempt is: the id of
	// a failed attempt is fenced.
	waitUntil(t, "creates succeed with the replica back", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		after := testEmail(acct, "a@example.com", "b@example.com", 3)
		return s.CreateEmails(cctx, testBody("after"), []*store.Email{after}) == nil
	})
}

// TestAckReplicasCluster creates with replica acknowledgement on the test
// cluster, whose masters have a replica each (scripts/redis-cluster.sh), in
// accounts spread over its slots: every create is confirmed and announced.
func TestAckReplicasCluster(t *testing.T) {
	t.Parallel()
	prefix := "mailsinktest:" + randomHex(8) + ":"
	s := New(clusterClient(t), Options{Prefix: prefix, AckReplicas: 1})
	cleanup := clusterClient(t)
	t.Cleanup(func() {
		s.Close()
		deletePrefix(t, cleanup, prefix)
		cleanup.Close()
	})
	ctx := context.Background()
	for i := range 12 {
		account := "ack-" + randomHex(4)
		sub := s.Subscribe(account)
		e := testEmail(account, "a@example.com", "b@example.com", int64(i+1))
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.CreateEmails(cctx, testBody("x"), []*store.Email{e})
		cancel()
		if err != nil {
			sub.Close()
			t.Fatalf("CreateEmails in %s: %v (does every master have a replica?)", account, err)
		}
		select {
		case ev := <-sub.Events():
			if ev.EmailID != e.ID {
				t.Errorf("event for %s, want %s", ev.EmailID, e.ID)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("no event for the acknowledged create in %s", account)
		}
		sub.Close()
	}
}

// TestErrorKinds checks how create errors are sorted: which may have
// written (and are fenced), which are retried, and which reload the
// cluster map.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name                          string
		err                           error
		ambiguous, retryable, reloads bool
	}{
		{"refused connection", dial, true, true, true},
		{"reset connection", read, true, false, true},
		{"deadline", context.DeadlineExceeded, true, false, true},
		{"cancelled", context.Canceled, true, false, false},
		{"unacknowledged", &ackError{want: 1}, true, false, true},
		{"CLUSTERDOWN", redisError("CLUSTERDOWN The cluster is down"), false, true, true},
		{"MOVED", redisError("MOVED 3999 127.0.0.1:6381"), false, true, true},
		{"READONLY", redisError("READONLY You can't write against a read only replica."), false, true, true},
		{"script error", redisError("ERR Error running script"), false, false, false},
		{"not found", redis.Nil, false, false, false},
	}
	for _, tt := range tests {
		if got := ambiguous(tt.err); got != tt.ambiguous {
			t.Errorf("%s: ambiguous = %v, want %v", tt.name, got, tt.ambiguous)
		}
		if got := retryable(tt.err); got != tt.retryable {
			t.Errorf("%s: retryable = %v, want %v", tt.name, got, tt.retryable)
		}
		if got := staleMap(tt.err); got != tt.reloads {
			t.Errorf("%s: staleMap = %v, want %v", tt.name, got, tt.reloads)
		}
	}
}

// redisError is an error reply as go-redis returns it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestCreateRetryAfterDeadlineOfOwnWrite runs a create that lands, then the
// same create again after its deadline, as the create loop does when the
// first attempt's answer was lost (a dial error after go-redis's own
// retry) and the node comes back late: the create is stored, so the second
// run must answer success and leave the body the email refers to.
func TestCreateRetryAfterDeadlineOfOwnWrite(t *testing.T) {
	t.Parallel()
	// A body written with SET has its expiry as the deadline; a large one
	// (a hash) is checked against the script's TIME.
	large := strings.Repeat("x", largeBody)
	for _, raw := range []string{"landed once", large} {
		eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
			s := newStore(t)
			ctx := context.Background()
			e1 := testEmail(acct, "a@example.com", "b@example.com", 1)
			e2 := testEmail(acct, "c@example.com", "b@example.com", 2)
			call, err := s.createArgs(ctx, testBody(raw), []*store.Email{e1, e2})
			if err != nil {
				t.Fatal(err)
			}
			if pos, err := s.create(ctx, call); err != nil || pos != 0 {
				t.Fatalf("create = %d, %v", pos, err)
			}
			past := time.Now().Add(-time.Second).UnixMilli()
			if call.raw != nil {
				call.args[1] = formatInt(past)
			} else {
				call.bodyDeadline = past
			}
			if pos, err := s.create(ctx, call); err != nil || pos != 0 {
				t.Errorf("the same create after its deadline = %d, %v; want 0, nil (it is stored)", pos, err)
			}
			for _, e := range []*store.Email{e1, e2} {
				if b, err := s.GetBody(ctx, acct, e.ID); err != nil || string(b.Raw) != raw {
					t.Errorf("GetBody(%s) = %v, %v; want the body", e.ID, err == nil, err)
				}
			}
			if ttl, err := s.client.TTL(ctx, call.keys[1]).Result(); err != nil || ttl != -1 {
				t.Errorf("TTL of the body = %v, %v; want -1 (none)", ttl, err)
			}
		})
	}
}

// TestCreateAmbiguousAttemptIsFenced makes a create's first attempt land
// and answer a dial error (go-redis retried a send whose answer was lost,
// and the node then refused connections), and every later attempt answer
// CLUSTERDOWN (a failover): the create answers Unavailable, so what the
// first attempt stored must be fenced away, whatever the last attempt's
// error says.
func TestCreateAmbiguousAttemptIsFenced(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		s := newStore(t)
		ctx := context.Background()
		h := &failCreates{}
		s.client.AddHook(h)
		e := testEmail(acct, "a@example.com", "b@example.com", 1)
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.CreateEmails(cctx, testBody("lost answer"), []*store.Email{e})
		cancel()
		if !store.IsCode(err, store.Unavailable) {
			t.Fatalf("CreateEmails = %v, want Unavailable", err)
		}
		if h.attempts.Load() < 2 {
			t.Fatalf("%d attempts, want a retry", h.attempts.Load())
		}
		s.fences.Wait()
		if _, err := s.GetEmail(ctx, acct, e.ID); !store.IsCode(err, store.NotFound) {
			t.Errorf("GetEmail of the create answered Unavailable: %v, want NotFound", err)
		}
		if n, _, err := s.AccountStats(ctx, acct); err != nil || n != 0 {
			t.Errorf("AccountStats = %d, %v; want 0", n, err)
		}
	})
}

// failCreates is a hook on the pipelines that run the create script: the
// first is sent and answers a dial error, the others are not sent and
// answer CLUSTERDOWN.
type failCreates struct{ attempts atomic.Int64 }

func (h *failCreates) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failCreates) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *failCreates) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		create := false
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && a[0] == "evalsha" && a[1] == createScript.Hash() {
				create = true
			}
		}
		if !create {
			return next(ctx, cmds)
		}
		var err error
		if h.attempts.Add(1) == 1 {
			if err := next(ctx, cmds); err != nil {
				return err
			}
			err = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		} else {
			err = redisError("CLUSTERDOWN The cluster is down")
		}
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

// TestAckWaitEndedByRedisIsFenced ends a create's WAIT with an error reply,
// as Redis does when a failover demotes the master while WAIT blocks
// (UNBLOCKED): the script has written, so the create answers Unavailable
// and its email is fenced; nothing stays stored for the sender's retry to
// duplicate.
func TestAckWaitEndedByRedisIsFenced(t *testing.T) {
	t.Parallel()
	// No replica: WAIT blocks for its whole timeout.
	s, port := privateStore(t, Options{Prefix: "mailsinktest:unblocked:", AckReplicas: 1, AckTimeout: time.Minute})
	admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer admin.Close()
	ctx := context.Background()
	// Load the script first, so that the WAIT ended is the create's.
	if err := createScript.Load(ctx, admin).Err(); err != nil {
		t.Fatal(err)
	}
	e := testEmail(acct, "a@example.com", "b@example.com", 1)
	done := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		done <- s.CreateEmails(cctx, testBody("x"), []*store.Email{e})
	}()
	var waiting string
	waitUntil(t, "the create's WAIT blocks", func() bool {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			return false
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " cmd=wait ") {
				waiting, _ = strings.CutPrefix(strings.Fields(line)[0], "id=")
				return true
			}
		}
		return false
	})
	if n, err := admin.Do(ctx, "CLIENT", "UNBLOCK", waiting, "ERROR").Int(); err != nil || n != 1 {
		t.Fatalf("CLIENT UNBLOCK %s ERROR: %d, %v; want 1", waiting, n, err)
	}
	if err := <-done; !store.IsCode(err, store.Unavailable) {
		t.Fatalf("CreateEmails whose WAIT was ended: %v, want Unavailable", err)
	}
	s.fences.Wait()
	if _, err := s.GetEmail(ctx, acct, e.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail of the failed create: %v, want NotFound (fenced)", err)
	}
}

// TestSharedPipelineAnswersEachCreate sends creates in one shared pipeline
// (sendShared) as concurrent CreateEmails calls would, with other kinds of
// call: each gets its own answer, a conflict and a create past its
// deadline fail alone, and one caller's cancelled context does not fail
// the others.
func TestSharedPipelineAnswersEachCreate(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, backends[0])
	ctx := context.Background()
	taken := testEmail(acct, "a@example.com", "b@example.com", 1)
	if err := s.CreateEmails(ctx, testBody("first"), []*store.Email{taken}); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	past, cancelPast := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancelPast()
	fresh := []*store.Email{
		testEmail(acct, "a@example.com", "b@example.com", 2),
		testEmail(acct, "c@example.com", "b@example.com", 3),
		testEmail(acct, "d@example.com", "b@example.com", 4),
	}
	dup := testEmail(acct, "e@example.com", "b@example.com", 5)
	dup.ID = taken.ID
	late := testEmail(acct, "f@example.com", "b@example.com", 6)
	calls := []struct {
		ctx   context.Context
		email *store.Email
		want  string // "ok", "conflict" or "refused"
	}{
		{ctx, fresh[0], "ok"},
		{ctx, dup, "conflict"},
		{cancelled, fresh[1], "ok"},
		{past, late, "refused"},
		{ctx, fresh[2], "ok"},
	}
	ws := make([]*sharedSend, len(calls))
	creates := make([]*createSend, len(calls))
	for i, c := range calls {
		cc, err := s.createArgs(c.ctx, testBody("shared"), []*store.Email{c.email})
		if err != nil {
			t.Fatalf("createArgs: %v", err)
		}
		creates[i] = &createSend{c: cc}
		ws[i] = &sharedSend{ctx: c.ctx, call: creates[i]}
	}
	// Other kinds of call in the same pipeline.
	k := s.account(acct)
	exists := &existsCall{key: k.records()}
	check := &scriptCall{script: putChecksScript, keys: []string{k.records(), k.email(taken.ID), k.checks(taken.ID)},
		args: []any{"c", taken.ID, "result"}}
	ws = append(ws, &sharedSend{ctx: ctx, call: exists}, &sharedSend{ctx: ctx, call: check})
	s.sendShared(ws)
	if n, err := exists.cmd.Result(); err != nil || n != 1 {
		t.Errorf("EXISTS in the shared pipeline = %d, %v; want 1", n, err)
	}
	if n, err := check.cmd.Int(); err != nil || n != 1 {
		t.Errorf("putChecksScript in the shared pipeline = %d, %v; want 1", n, err)
	}
	if v, err := s.GetCheck(ctx, acct, taken.ID, "c"); err != nil || string(v) != "result" {
		t.Errorf("GetCheck = %q, %v; want the result", v, err)
	}
	for i, c := range calls {
		w := creates[i]
		got := "error"
		switch v := w.res.(type) {
		case []any:
			got = "ok"
		case int64:
			got = map[int64]string{1: "conflict", -1: "refused"}[v]
		}
		if w.err != nil || got != c.want {
			t.Errorf("create %d: answer %v (%s), error %v; want %s", i, w.res, got, w.err, c.want)
		}
	}
	for _, e := range fresh {
		if _, err := s.GetEmail(ctx, acct, e.ID); err != nil {
			t.Errorf("GetEmail of a created email: %v", err)
		}
	}
	if _, err := s.GetEmail(ctx, acct, late.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail of the late create: %v, want NotFound", err)
	}
	if n, _, err := s.AccountStats(ctx, acct); err != nil || n != 4 {
		t.Errorf("AccountStats = %d, %v; want 4", n, err)
	}
}

// TestSharedPipelineLoadsScripts flushes a private Redis's scripts: the
// calls of a shared pipeline that meet NOSCRIPT are sent again once their
// scripts are loaded, and succeed.
func TestSharedPipelineLoadsScripts(t *testing.T) {
	t.Parallel()
	s, _ := privateStore(t, Options{Prefix: "mailsinktest:noscript:"})
	ctx := context.Background()
	if err := s.client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	e1 := testEmail(acct, "a@example.com", "b@example.com", 1)
	e2 := testEmail(acct, "c@example.com", "b@example.com", 2)
	c1, err := s.createArgs(ctx, testBody("one"), []*store.Email{e1})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.createArgs(ctx, testBody("two"), []*store.Email{e2})
	if err != nil {
		t.Fatal(err)
	}
	k := s.account(acct)
	w1, w2 := &createSend{c: c1}, &createSend{c: c2}
	check := &scriptCall{script: putChecksScript, keys: []string{k.records(), k.email(e1.ID), k.checks(e1.ID)},
		args: []any{"c", e1.ID, "result"}}
	s.sendShared([]*sharedSend{{ctx: ctx, call: w1}, {ctx: ctx, call: w2}, {ctx: ctx, call: check}})
	for _, w := range []*createSend{w1, w2} {
		if _, ok := w.res.([]any); !ok || w.err != nil {
			t.Errorf("create after SCRIPT FLUSH = %v, %v; want the stream ids", w.res, w.err)
		}
	}
	// The check ran in the same pipeline as the create of its email, so
	// whether it found the email depends on the order of the second send:
	// it must have run without error.
	if err := check.cmd.Err(); err != nil {
		t.Errorf("putChecksScript after SCRIPT FLUSH: %v", err)
	}
	for _, e := range []*store.Email{e1, e2} {
		if _, err := s.GetEmail(ctx, acct, e.ID); err != nil {
			t.Errorf("GetEmail: %v", err)
		}
	}
}
