// Package redisstore keeps mailsink's emails in Redis or Redis Cluster; it
// implements store.Store on a go-redis UniversalClient.
//
// # Key layout
//
// Every key of an account carries the account's hash tag, so in a cluster
// all of them live in one slot and each create, update and delete is one
// atomic Lua script. With P the prefix (default "mailsink:") and T the
// account id (escaped as "~" and hex when it holds characters other than
// letters, digits, '.', '_' and '-'):
//
//	P{T}:em              hash    the account's emails, one record per
//	                             email id: the values of m, st, subj,
//	                             notes, labels and upd (below) and the raw
//	                             size added to the stats, joined by "\n"
//	                             (record.go, packRecord)
//	P{T}:b:<bodyid>      string  a body: its parsed content as JSON (text,
//	                             HTML, headers and attachments, null and
//	                             empty ones left out; "u": true when the raw
//	                             was stored unparsed, store.Body.Given nil),
//	                             "\n", then the raw source, byte-exact or
//	                             compressed with S2 (internal/rawzip)
//	                             when that saves an eighth (encodeBodyValue);
//	                             from 1 MiB of raw source on, a hash of raw
//	                             and meta (the JSON) instead, so that
//	                             mailsink never copies a large source
//	P{T}:br              hash    by body id, how many emails share a body,
//	                             for the bodies more than one email shares
//	                             (one CreateEmails call for several
//	                             recipients of one account)
//	P{T}:all             zset    every email of the account
//	P{T}:r:<recipient>   zset    emails by recipient, lower case
//	P{T}:s:<sender>      zset    emails by sender, lower case
//	P{T}:st:<status>     zset    emails by status
//	P{T}:stats           hash    bytes: the sum of the raw sizes of the
//	                             account's emails (their count is ZCARD of
//	                             all); an email's record holds the size
//	                             it added, so a delete subtracts exactly
//	                             that
//	P{T}:ev              stream  the account's recent events (about 1,000),
//	                             for resumption; each is also published on
//	                             the channel P + "events", or in a cluster
//	                             on the account's sharded channel P{T}:ch
//	                             (events.go)
//	P{T}:f:<id>          string  a tombstone: a create of that id whose
//	                             outcome was unknown was fenced, and a late
//	                             landing of it stores nothing (ack.go); it
//	                             expires after a day
//
// Index members are email ids (lower-case UUIDs) scored by ReceivedAt in Unix
// milliseconds. Redis orders equal scores by member, so reading an index
// backwards gives list order, ReceivedAt then id descending, and a page is a
// rank range whose cost does not depend on the size of the account. Listing
// reads records only, never bodies: a page is one ZREVRANGE and one HMGET
// of the records hash. A body written by CreateEmails for several
// recipients is stored once and removed with the last email that refers
// to it.
//
// The layout above is the second one. The first kept each email in a hash
// of its own, P{T}:e:<id> (m: what never changes, as compact JSON; st,
// subj, notes, labels, upd: the fields an update may change; sb: the size
// added to the stats), and each body in a hash P{T}:b:<bodyid> (raw, meta:
// the parsed content as JSON, refs). Emails of that layout are read,
// updated (in place) and deleted like the others, and listed in the same
// pages: every script that reads an email looks in the records hash first
// and then for its own key. A hash whose values pass Redis's
// hash-max-listpack-value (64 bytes by default) is a hash table, about
// 900 bytes for an email's seven fields and 3.4 KB for a 2 KB body with
// its three; a record in the records hash costs about 340 bytes (it leaves
// out the email's id and account, which its hash field and key name) and a
// body string its value and about 100 bytes. The create script never sees the
// raw source: CreateEmails writes the body with SET just before the script,
// in the same pipeline (createScript).
//
// A replica of a release before the records hash looks for emails only in
// their own keys: while it shares a Redis with this one it does not see the
// emails this one stores (its lists skip them, its gets and deletes answer
// NotFound; its counts and stats include them; their update events reach
// its subscribers without the email's id and account), while this one
// reads everything it stores. Replace every replica sharing a Redis at once, or
// accept that window.
//
// A query with at most one of the recipient, sender and status filters and
// no subject or label filter is answered from one index (Since is a score
// bound, Before a rank found from its email's score), and so is its count.
// With more, the smallest of their indexes is walked in bounded batches
// behind a (score, id) cursor, testing membership in the others and the
// label on each email's labels; a subject filter is tested here on the
// metadata of each batch. Pages and batches are read by Lua scripts, so they
// never see an index entry without its email; a first page is read with two
// plain commands and kept only when each entry's email is there (plainPage).
//
// The stats hash came after the first release and is not rebuilt: an email
// stored by an older release has no sb, so it is in the count but not in the
// bytes, which count what was stored since the upgrade. While older replicas
// still run, their creates do not add and their deletes do not subtract. The
// hash is removed, and so starts exact again, whenever the account empties.
//
// Durability is Redis's: with appendonly yes and appendfsync always (as in
// the docker-compose file) Redis writes the append-only file to disk before
// it answers, so an email is on disk when CreateEmails returns; with the
// default appendfsync everysec, about a second later. Replication is
// asynchronous, so across a failover an email survives only if the replica
// promoted had it: Options.AckReplicas makes CreateEmails wait for that
// (ack.go).
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/internal/batch"
	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// DefaultPrefix starts every key when Options.Prefix is empty.
const DefaultPrefix = "mailsink:"

const (
	// maxLimit is the largest page ListEmails returns (store.ListQuery).
	maxLimit = 100
	// scanBatch is how many index entries one scan script examines: it
	// bounds both the time Redis spends in one script and the memory of a
	// batch here.
	scanBatch = 500
	// casAttempts bounds the retries of a delete whose email keeps being
	// deleted and created again with the same id.
	casAttempts = 16
	// itemLen is the number of values per email in a list script's answer:
	// the id and the record.
	itemLen = 2
)

// Options configure a Store.
type Options struct {
	// Prefix starts every key, so that several stores (or tests) can share
	// one Redis. It must not contain '{' or '}', which would change the hash
	// tag. Empty means DefaultPrefix.
	Prefix string
	// AckReplicas, when above 0, makes CreateEmails wait until that many
	// replicas of the account's master have the write, at most AckTimeout,
	// before it succeeds (see ack.go). 0 does not wait: replication is
	// asynchronous and a failover may lose what the master acknowledged.
	AckReplicas int
	// AckTimeout bounds the wait for replicas; 0 means DefaultAckTimeout.
	AckTimeout time.Duration
}

// DefaultAckTimeout is how long CreateEmails waits for replica
// acknowledgement when Options.AckTimeout is 0.
const DefaultAckTimeout = time.Second

// Store is a store.Store in Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	prefix string
	batch  int
	zip    rawzip.Compressor // compresses the raw sources of creates

	ackReplicas int
	ackTimeout  time.Duration
	reload      *reloader                 // nil unless client is a cluster client
	fences      sync.WaitGroup            // fences running in the background
	shared      *batch.Keyed[*sharedSend] // shared.go
	closing     chan struct{}             // closed by Close

	hub *eventhub.Hub
	// With a cluster client, sharded is that client and feeds holds each
	// account's subscription (events.go); otherwise pubsub is the one
	// subscription of the Store.
	sharded    *redis.ClusterClient
	feedMu     sync.Mutex
	feeds      map[string]*feed
	pubsub     *redis.PubSub
	listening  chan struct{} // closed when listen returns
	subscribed chan struct{} // closed when the first subscription is confirmed
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Events = (*Store)(nil)
	_ store.Stats  = (*Store)(nil)
	_ store.Pruner = (*Store)(nil)
)

// New returns a Store on client. It does not contact Redis: go-redis
// connects on first use and reconnects after an outage, so the Store can be
// created before Redis is up. The Store owns client: Close closes it. New
// panics if opts.Prefix contains '{' or '}'.
func New(client redis.UniversalClient, opts Options) *Store {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		panic(fmt.Sprintf("redisstore: prefix %q contains a brace", prefix))
	}
	s := &Store{client: client, prefix: prefix, batch: scanBatch, hub: eventhub.New(-1),
		ackReplicas: opts.AckReplicas, ackTimeout: opts.AckTimeout, closing: make(chan struct{}),
		listening: make(chan struct{}), subscribed: make(chan struct{})}
	s.shared = batch.NewKeyed(maxSharedBatch, s.sendShared)
	if s.ackTimeout <= 0 {
		s.ackTimeout = DefaultAckTimeout
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		s.reload = &reloader{cc: cc}
		cc.AddHook(s.reload)
		// Each account's events go through its own sharded channel,
		// subscribed while someone listens (events.go).
		s.sharded, s.feeds = cc, map[string]*feed{}
		close(s.listening)
		close(s.subscribed)
		return s
	}
	// Subscribing does not wait for Redis: go-redis (re)connects in the
	// background and the channel delivers once it has.
	s.pubsub = client.Subscribe(context.Background())
	_ = s.pubsub.Subscribe(context.Background(), s.channel())
	go s.listen(s.pubsub)
	return s
}

// NewClient returns a client for the server at url
// (redis://[user:pass@]host:port/db, or rediss:// for TLS, with go-redis's
// optional query parameters such as dial_timeout), or, when clusterSeeds is
// not empty, a Redis Cluster client that discovers the cluster from those
// host:port seeds and takes credentials, TLS and timeouts from url when url
// is set. It does not connect. Request contexts bound every call.
func NewClient(url string, clusterSeeds []string) (redis.UniversalClient, error) {
	var seeds []string
	for _, s := range clusterSeeds {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	var opt *redis.Options
	if url != "" {
		var err error
		if opt, err = parseURL(url); err != nil {
			return nil, err
		}
	}
	if len(seeds) == 0 {
		if opt == nil {
			return nil, errors.New("redisstore: neither a redis URL nor cluster seeds given")
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClient(opt), nil
	}
	copt := &redis.ClusterOptions{Addrs: seeds, ContextTimeoutEnabled: true,
		ClusterStateReloadInterval: clusterReloadInterval}
	if opt != nil {
		copt.Protocol = opt.Protocol
		copt.Username = opt.Username
		copt.Password = opt.Password
		copt.TLSConfig = opt.TLSConfig
		copt.MaxRetries = opt.MaxRetries
		copt.MinRetryBackoff = opt.MinRetryBackoff
		copt.MaxRetryBackoff = opt.MaxRetryBackoff
		copt.DialTimeout = opt.DialTimeout
		copt.ReadTimeout = opt.ReadTimeout
		copt.WriteTimeout = opt.WriteTimeout
		copt.PoolSize = opt.PoolSize
	}
	return redis.NewClusterClient(copt), nil
}

// parseURL is redis.ParseURL with errors that never repeat the URL, which
// may hold a password.
func parseURL(s string) (*redis.Options, error) {
	if _, err := url.Parse(s); err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("redisstore: invalid redis URL: %v", err)
	}
	opt, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("redisstore: invalid redis URL: %v", err)
	}
	return opt, nil
}

// CreateEmails stores body once and emails referring to it, with their
// indexes, in one atomic script. It returns Invalid when emails is empty,
// body is nil, the emails do not all belong to one account, or one lacks an
// id or a valid status or repeats another's id; Conflict when an email with
// one of the ids already exists in the account (nothing is written then);
// Unavailable when Redis cannot be reached, when ctx's deadline passes,
// or when fewer than Options.AckReplicas replicas confirm the write in
// time; an Unavailable create stores nothing, even if its write reaches
// Redis later (see ack.go). Timestamps are kept to the millisecond and ids
// in lower case. When it returns nil the emails are as durable as the
// server's persistence settings and Options.AckReplicas make them (see the
// package comment).
func (s *Store) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	c, err := s.createArgs(ctx, body, emails)
	if err != nil {
		return err
	}
	pos, err := s.create(ctx, c)
	if err != nil {
		return err
	}
	if pos != 0 {
		if pos < 1 || pos > len(emails) {
			return store.Errorf(store.Internal, "create script answered %d", pos)
		}
		return store.Errorf(store.Conflict, "email %s already exists", store.NormalizeID(emails[pos-1].ID))
	}
	return nil
}

// createArgs checks the arguments of CreateEmails and returns the call of
// createScript.
func (s *Store) createArgs(ctx context.Context, body *store.Body, emails []*store.Email) (*createCall, error) {
	if len(emails) == 0 {
		return nil, store.Errorf(store.Invalid, "no emails to create")
	}
	if body == nil {
		return nil, store.Errorf(store.Invalid, "email body is missing")
	}
	accountID := emails[0].AccountID
	bodyID := store.NewID()
	k := s.account(accountID)
	keys := make([]string, 0, 8+3*len(emails))
	keys = append(keys, k.all(), k.body(bodyID), k.stats(), k.records(), k.bodyRefs(), k.uidCounter(), k.uids())
	args := make([]any, 0, 6+5*len(emails))
	c := &createCall{accountID: accountID, account: k, bodyID: bodyID}
	deadline := createDeadline(ctx)
	if len(body.Raw) >= largeBody {
		c.raw, c.meta = body.Raw, encodeBodyMeta(body)
	} else {
		// The body's expiry is the deadline (see ack.go).
		c.body, c.bodyDeadline, deadline = encodeBodyValue(&s.zip, body), deadline, 0
	}
	args = append(args, bodyID, formatInt(deadline), k.fencePrefix(), k.emailPrefix(), eventHistory, s.createTarget(k))
	events := make([]any, 0, len(emails))
	seen := make(map[string]bool, len(emails))
	for _, e := range emails {
		switch {
		case e == nil:
			return nil, store.Errorf(store.Invalid, "nil email")
		case e.AccountID == "":
			return nil, store.Errorf(store.Invalid, "email has no account")
		case e.AccountID != accountID:
			return nil, store.Errorf(store.Invalid, "emails belong to different accounts")
		case e.ID == "":
			return nil, store.Errorf(store.Invalid, "email has no id")
		case !e.Status.Valid():
			return nil, store.Errorf(store.Invalid, "email has invalid status %q", e.Status)
		}
		id := store.NormalizeID(e.ID)
		if seen[id] {
			return nil, store.Errorf(store.Invalid, "email id %s given twice", id)
		}
		seen[id] = true
		r := newRecord(e, id, bodyID)
		vals := r.values()
		keys = append(keys, k.recipient(e.Recipient), k.sender(e.Sender), k.status(e.Status))
		args = append(args, id, r.score(), formatInt(e.RawSize), packRecord(r.storedValues(vals), e.RawSize))
		ev := createdPayload(accountID, id, vals)
		events = append(events, ev)
		c.ids = append(c.ids, id)
		c.events = append(c.events, ev)
	}
	c.keys = append(keys, k.events())
	c.args = append(args, events...)
	return c, nil
}

// GetEmail returns the email with id in the account. It returns NotFound when
// there is none (also when the id belongs to another account's email) and
// Unavailable when Redis cannot be reached.
func (s *Store) GetEmail(ctx context.Context, accountID, id string) (*store.Email, error) {
	k, id := s.account(accountID), store.NormalizeID(id)
	packed, err := s.client.HGet(ctx, k.records(), id).Result()
	if err == nil {
		r, err := decodePacked(packed, id, accountID)
		if err != nil {
			return nil, err
		}
		return r.email(), nil
	}
	if !errors.Is(err, redis.Nil) {
		return nil, classify(err)
	}
	v, err := s.client.HMGet(ctx, k.email(id), append(fields, fieldRead)...).Result()
	if err != nil {
		return nil, classify(err)
	}
	if len(v) == 0 || v[0] == nil {
		return nil, store.ErrNotFound
	}
	r, err := decodeFields(v)
	if err != nil {
		return nil, err
	}
	return r.email(), nil
}

// GetBody returns the body of the email with id in the account, raw source
// included. It returns NotFound like GetEmail
// and Unavailable when Redis cannot be reached.
func (s *Store) GetBody(ctx context.Context, accountID, id string) (*store.Body, error) {
	k, id := s.account(accountID), store.NormalizeID(id)
	v, err := bodyScript.Run(ctx, s.client, []string{k.records(), k.email(id)}, k.body(""), id).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, classify(err)
	}
	if len(v) == 1 {
		value, ok := v[0].(string)
		if !ok {
			return nil, store.Errorf(store.Internal, "body script answered %T", v[0])
		}
		return decodeBodyValue(value)
	}
	if len(v) != 2 || v[0] != "h" {
		return nil, store.Errorf(store.Internal, "body script answered %d values", len(v))
	}
	key, ok := v[1].(string)
	if !ok {
		return nil, store.Errorf(store.Internal, "body script answered %T", v[1])
	}
	// A body is never changed once stored, so reading it apart from the
	// email's record only risks missing it if it was deleted meanwhile.
	o, err := s.client.HMGet(ctx, key, "raw", "meta").Result()
	if err != nil {
		return nil, classify(err)
	}
	raw, ok1 := o[0].(string)
	meta, ok2 := o[1].(string)
	if !ok1 || !ok2 {
		return nil, store.ErrNotFound
	}
	return decodeBody(raw, meta)
}

// ListEmails returns a page of q.AccountID's emails matching q, newest first
// (ReceivedAt, then id, descending). Without a subject or label filter and
// with at most one of the recipient, sender and status filters it reads one
// index page, at a cost that grows with the offset's logarithm and the
// limit (without Since or Before, with two plain commands: plainPage). With more filters it walks the smallest matching index in bounded
// batches, and the subject and label filters are tested on the metadata of
// each batch, so the cost grows with the number of emails examined; memory
// stays bounded by the batch size and the limit. q.Before costs one more
// round trip, to read the cursor's score. It returns Invalid when q.Limit is
// not in 1..100, q.Offset is negative or q.Status is not a known status,
// NotFound when q.Before names no email of the account, and Unavailable
// when Redis cannot be reached.
func (s *Store) ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error) {
	switch {
	case q.Limit < 1 || q.Limit > maxLimit:
		return nil, store.Errorf(store.Invalid, "limit must be between 1 and %d", maxLimit)
	case q.Offset < 0:
		return nil, store.Errorf(store.Invalid, "offset must not be negative")
	}
	k := s.account(q.AccountID)
	f, err := s.filter(ctx, k, q)
	if err != nil {
		return nil, err
	}
	if len(f.indexes) == 1 && f.subject == "" && f.label == "" {
		if f.since == "-inf" && f.cursorID == "" {
			if out, ok, err := s.plainPage(ctx, k, f, q); err != nil || ok {
				return out, err
			}
		}
		v, err := pageScript.Run(ctx, s.client, f.indexes, k.emailPrefix(), f.since, f.cursorScore, f.cursorID,
			formatInt(q.Offset), q.Limit, k.records()).Slice()
		if err != nil {
			return nil, classify(err)
		}
		return decodeItems(v, "page", q.AccountID)
	}
	out := make([]*store.Email, 0, q.Limit)
	if _, err := s.scan(ctx, k, f, q.Offset, q.Limit, func(r *record) { out = append(out, r.email()) }); err != nil {
		return nil, err
	}
	return out, nil
}

// plainPage reads a page of one index from its newest entry on (no bound,
// no cursor) without a script: the ids with ZREVRANGE, then their records
// with HMGET. pageScript hands every record it returns to Lua, which
// hashes each string it is given byte by byte: on a page of 25 records
// about a quarter of what redis-server spent on a list (docs/benchmarks.md,
// "A list page without a script"). The two reads are not one snapshot, so
// the page is kept only when each id still has a record of the current
// layout and, on a status index, still that status: each email is then as
// it is now, and the page holds what the index held a moment before.
// Otherwise (an email deleted or its status changed between the reads, or
// stored by an older release) it reports false, and the caller reads the
// page with the script: three round trips where the script alone takes
// one, rare once an account's newest emails are of the current layout. A
// first page costs one round trip more than with the script, and less of
// redis-server. Both reads go to the account's master, as the scripts do:
// the client reads from no replica (NewClient).
func (s *Store) plainPage(ctx context.Context, k accountKeys, f filter, q store.ListQuery) ([]*store.Email, bool, error) {
	ids, err := s.client.ZRevRange(ctx, f.indexes[0], q.Offset, q.Offset+int64(q.Limit)-1).Result()
	if err != nil {
		return nil, false, classify(err)
	}
	if len(ids) == 0 {
		return []*store.Email{}, true, nil
	}
	vs, err := s.client.HMGet(ctx, k.records(), ids...).Result()
	if err != nil {
		return nil, false, classify(err)
	}
	out := make([]*store.Email, len(ids))
	emails := make([]store.Email, len(ids))
	var r record
	for i, id := range ids {
		v, ok := vs[i].(string)
		if !ok {
			return nil, false, nil
		}
		r = record{}
		if err := r.decodeItem(id, v, q.AccountID); err != nil {
			return nil, false, err
		}
		if q.Status != "" && r.Status != q.Status {
			return nil, false, nil
		}
		r.fill(&emails[i])
		out[i] = &emails[i]
	}
	return out, true, nil
}

// CountEmails returns how many of q.AccountID's emails match q's filters.
// Without a subject or label filter and with at most one of the recipient,
// sender and status filters it counts index entries in one script, at a
// cost that grows with the logarithm of the index's size. Otherwise it walks
// the smallest matching index in bounded batches like ListEmails, testing
// every entry, so the cost grows with that index's size. It returns Invalid
// when q.Status is not a known status, NotFound when q.Before names no email
// of the account, and Unavailable when Redis cannot be reached.
func (s *Store) CountEmails(ctx context.Context, q store.ListQuery) (int64, error) {
	k := s.account(q.AccountID)
	f, err := s.filter(ctx, k, q)
	if err != nil {
		return 0, err
	}
	if len(f.indexes) == 1 && f.subject == "" && f.label == "" {
		n, err := countScript.Run(ctx, s.client, f.indexes, "", f.since, f.cursorScore, f.cursorID).Int64()
		if err != nil {
			return 0, classify(err)
		}
		return n, nil
	}
	return s.scan(ctx, k, f, 0, 0, nil)
}

// filter is a ListQuery in the terms of the scripts.
type filter struct {
	account string
	indexes []string // the index of each filter that has one, or "all"
	since   string   // the exclusive lower score bound, or "-inf"
	subject string   // lower case
	label   string
	// cursorScore and cursorID are the score and id of the email q.Before
	// names, both "" when it names none.
	cursorScore, cursorID string
}

// filter translates q, reading the cursor's score when q.Before is set.
func (s *Store) filter(ctx context.Context, k accountKeys, q store.ListQuery) (filter, error) {
	if q.Status != "" && !q.Status.Valid() {
		return filter{}, store.Errorf(store.Invalid, "unknown status %q", q.Status)
	}
	f := filter{account: q.AccountID, since: "-inf", subject: strings.ToLower(q.Subject), label: q.Label}
	if q.Recipient != "" {
		f.indexes = append(f.indexes, k.recipient(q.Recipient))
	}
	if q.Sender != "" {
		f.indexes = append(f.indexes, k.sender(q.Sender))
	}
	if q.Status != "" {
		f.indexes = append(f.indexes, k.status(q.Status))
	}
	if len(f.indexes) == 0 {
		f.indexes = append(f.indexes, k.all())
	}
	// Scores are whole milliseconds, so "after Since" is "score above
	// Since's millisecond" even when Since has a finer part.
	if !q.Since.IsZero() {
		f.since = formatInt(q.Since.UnixMilli())
	}
	if q.Before != "" {
		id := store.NormalizeID(q.Before)
		score, err := s.client.ZScore(ctx, k.all(), id).Result()
		if errors.Is(err, redis.Nil) {
			return filter{}, store.ErrNotFound
		}
		if err != nil {
			return filter{}, classify(err)
		}
		// Scores are Unix milliseconds, exact in a float64.
		f.cursorScore, f.cursorID = formatInt(int64(score)), id
	}
	return f, nil
}

// decodeItems decodes the answer of a script that returns emails of
// accountID as {id1, the record of id1, id2, ...}.
func decodeItems(v []any, script, accountID string) ([]*store.Email, error) {
	if len(v)%itemLen != 0 {
		return nil, store.Errorf(store.Internal, "%s script answered %d values", script, len(v))
	}
	out := make([]*store.Email, 0, len(v)/itemLen)
	// One allocation for the page's emails rather than one each.
	emails := make([]store.Email, len(v)/itemLen)
	var r record
	for i := 0; i < len(v); i += itemLen {
		r = record{}
		if err := r.decodeItem(v[i], v[i+1], accountID); err != nil {
			return nil, err
		}
		e := &emails[i/itemLen]
		r.fill(e)
		out = append(out, e)
	}
	return out, nil
}

// decodeItem sets r from an id and its record in a list script's answer.
func (r *record) decodeItem(id, v any, accountID string) error {
	packed, ok1 := v.(string)
	s, ok2 := id.(string)
	if !ok1 || !ok2 {
		return store.Errorf(store.Internal, "email record is %T, %T", id, v)
	}
	if err := r.decodePacked(packed); err != nil {
		return err
	}
	r.ID, r.AccountID = s, accountID
	return nil
}

// countAll is the skip that makes the scan script count every match of a
// batch instead of returning it.
const countAll = 1<<53 - 1

// scan walks the smallest of f's indexes in batches, from f's cursor on, and
// calls visit with the emails that match f, after skipping skip of them,
// until limit emails were visited, visit returns false or the index ends.
// With a nil visit it counts the matches instead and returns their number.
// Without a subject filter the script skips and counts matches itself, so
// neither a large offset nor counting costs metadata transfer; with one,
// the script drops the emails that certainly do not match and the rest are
// tested, skipped and counted here, where lower-casing is Unicode's.
func (s *Store) scan(ctx context.Context, k accountKeys, f filter, skip int64, limit int, visit func(*record)) (int64, error) {
	var n int64 // emails counted or visited
	pos, cursorScore, cursorID := int64(0), f.cursorScore, f.cursorID
	for {
		skipArg, want := skip, limit-int(n)
		switch {
		case f.subject != "":
			skipArg, want = 0, s.batch
		case visit == nil:
			skipArg, want = countAll, 1
		}
		v, err := scanScript.Run(ctx, s.client, f.indexes,
			k.emailPrefix(), pos, cursorScore, cursorID, f.since, s.batch, formatInt(skipArg), want, f.subject, f.label,
			k.records()).Slice()
		if err != nil {
			return 0, classify(err)
		}
		if len(v) < 5 || (len(v)-5)%itemLen != 0 {
			return 0, store.Errorf(store.Internal, "scan script answered %d values", len(v))
		}
		var (
			done, skipped int64
			ok            [5]bool
		)
		pos, ok[0] = v[0].(int64)
		done, ok[1] = v[1].(int64)
		cursorScore, ok[2] = v[2].(string)
		cursorID, ok[3] = v[3].(string)
		skipped, ok[4] = v[4].(int64)
		if ok != [5]bool{true, true, true, true, true} {
			return 0, store.Errorf(store.Internal, "scan script answered %v", v[:5])
		}
		if visit == nil && f.subject == "" {
			n += skipped
		} else {
			skip -= skipped
		}
		for i := 5; i < len(v); i += itemLen {
			r := &record{}
			if err := r.decodeItem(v[i], v[i+1], f.account); err != nil {
				return 0, err
			}
			if f.subject != "" {
				if r.Subject == nil || !strings.Contains(strings.ToLower(*r.Subject), f.subject) {
					continue
				}
				if skip > 0 {
					skip--
					continue
				}
			}
			n++
			if visit != nil {
				visit(r)
				if int(n) == limit {
					return n, nil
				}
			}
		}
		if done == 1 {
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, classify(err)
		}
	}
}

// UpdateEmail applies u to the email with id in the account atomically, the
// move between status indexes included, and returns the result. It returns
// NotFound like GetEmail, Invalid when u.Status is not a known status, and
// Unavailable when Redis cannot be reached. A zero u.UpdatedAt leaves
// UpdatedAt as it is.
func (s *Store) UpdateEmail(ctx context.Context, accountID, id string, u store.Update) (*store.Email, error) {
	id = store.NormalizeID(id)
	args := []any{id, eventHistory, s.target(s.account(accountID)), accountID}
	if u.Labels != nil {
		labels := *u.Labels
		if labels == nil {
			labels = []string{}
		}
		args = append(args, fieldLabels, marshal(labels))
	}
	if u.Notes != nil {
		args = append(args, fieldNotes, marshal(u.Notes.Value))
	}
	if u.Status != nil {
		if !u.Status.Valid() {
			return nil, store.Errorf(store.Invalid, "unknown status %q", *u.Status)
		}
		args = append(args, fieldStatus, string(*u.Status))
	}
	if u.Subject != nil {
		args = append(args, fieldSubject, marshal(u.Subject.Value))
	}
	if u.Read != nil {
		read := "0"
		if *u.Read {
			read = "1"
		}
		args = append(args, fieldRead, read)
	}
	if !u.UpdatedAt.IsZero() {
		args = append(args, fieldUpdated, formatInt(u.UpdatedAt.UnixMilli()))
	}
	k := s.account(accountID)
	keys := append([]string{k.records(), k.all()}, k.statuses()...)
	keys = append(keys, k.events(), k.email(id))
	v, err := updateScript.Run(ctx, s.client, keys, args...).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, classify(err)
	}
	r, err := decodeFields(v)
	if err == nil {
		r.ID, r.AccountID = id, accountID
	}
	if err != nil {
		return nil, err
	}
	return r.email(), nil
}

// DeleteEmail removes the email with id in the account, its index entries
// and, when it was the last email referring to it, its body, atomically. It
// returns NotFound like GetEmail and Unavailable when Redis cannot be
// reached.
func (s *Store) DeleteEmail(ctx context.Context, accountID, id string) error {
	k := s.account(accountID)
	id = store.NormalizeID(id)
	// The recipient, sender and body never change, so the keys they name
	// can be read first; the script checks that the email is still the one
	// read, which only a delete and re-create with the same id could change.
	deleted, err := eventPayload(store.EmailDeleted, accountID, id, nil)
	if err != nil {
		return err
	}
	for range casAttempts {
		m, current, err := s.fixedPart(ctx, k, id)
		if err != nil {
			return err
		}
		var f fixed
		if err := decodeJSON(m, &f); err != nil {
			return err
		}
		keys := append([]string{k.records(), k.all(), k.recipient(f.Recipient), k.sender(f.Sender)}, k.statuses()...)
		keys = append(keys, k.body(f.Body), k.stats(), k.events(), k.email(id), k.bodyRefs(), k.checks(id), k.uids())
		res, err := deleteScript.Run(ctx, s.client, keys, m, id, eventHistory, s.target(k), deleted, current, f.Body).Int()
		if err != nil {
			return classify(err)
		}
		switch res {
		case 1:
			return nil
		case 0:
			return store.ErrNotFound
		}
	}
	return store.Errorf(store.Unavailable, "email %s keeps being replaced; try again", id)
}

// fixedPart returns the fixed metadata (JSON) of the email id and "1" when
// it is stored in the records hash, "0" in the older layout. It returns
// NotFound when there is no such email.
func (s *Store) fixedPart(ctx context.Context, k accountKeys, id string) (string, string, error) {
	packed, err := s.client.HGet(ctx, k.records(), id).Result()
	if err == nil {
		m, _, _ := strings.Cut(packed, recordSep)
		return m, "1", nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", "", classify(err)
	}
	m, err := s.client.HGet(ctx, k.email(id), fieldFixed).Result()
	if errors.Is(err, redis.Nil) {
		return "", "", store.ErrNotFound
	}
	if err != nil {
		return "", "", classify(err)
	}
	return m, "0", nil
}

// Ping reports whether this Store can serve reads: for a single Redis,
// whether it answers PING; for a cluster, whether the cluster map is known
// and at least one master answers PING. It returns as soon as one does, so
// one shard's failover or a frozen node does not make every mailsink
// replica unready (its accounts get 503 meanwhile, and the cluster's own
// monitoring reports the shard). It returns Unavailable otherwise, by ctx's
// deadline at the latest.
func (s *Store) Ping(ctx context.Context) error {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return classify(s.client.Ping(ctx).Err())
	}
	// The masters come from the client's map, without asking a node for
	// it (ForEachMaster would, and a frozen node would hang it): the
	// masters of pingSlots keys, which miss a master only if it serves
	// very few slots.
	var masters []*redis.Client
	for i := range pingSlots {
		c, err := cc.MasterForKey(ctx, "{"+strconv.Itoa(i)+"}")
		if err != nil {
			s.noteError(err)
			return classify(err)
		}
		if !slices.Contains(masters, c) {
			masters = append(masters, c)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan error, len(masters))
	for _, c := range masters {
		go func() { answers <- c.Ping(ctx).Err() }()
	}
	var err error
	for range masters {
		if err = <-answers; err == nil {
			return nil
		}
		s.noteError(err)
	}
	return classify(err)
}

// pingSlots is how many keys Ping looks up to find the cluster's masters.
const pingSlots = 64

// Close closes the Redis client, after the fences still running (see
// ack.go) have given up. The Store must not be used afterwards.
func (s *Store) Close() error {
	close(s.closing)
	s.shared.Close() // no shared pipeline is sent to the closed client
	s.fences.Wait()
	s.hub.Close()
	if s.pubsub != nil {
		_ = s.pubsub.Close()
	}
	s.closeFeeds()
	<-s.listening
	return s.client.Close()
}

// BodyCount returns how many bodies are stored under the Store's prefix, in
// all accounts. It scans the key space (every master of a cluster), so it is
// meant for tests and diagnostics. It returns Unavailable when Redis cannot
// be reached.
func (s *Store) BodyCount(ctx context.Context) (int, error) {
	var n atomic.Int64
	err := s.scanKeys(ctx, escapeGlob(s.prefix)+"{*}:b:*", func(_ context.Context, _ *redis.Client, keys []string) error {
		n.Add(int64(len(keys)))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return int(n.Load()), nil
}

// scanKeys calls fn with batches of the keys matching pattern and the client
// of the node that holds them, on every node that holds data: the server, or
// each master of a cluster, concurrently.
func (s *Store) scanKeys(ctx context.Context, pattern string, fn func(ctx context.Context, node *redis.Client, keys []string) error) error {
	scan := func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := fn(ctx, node, keys); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return classify(c.ForEachMaster(ctx, scan))
	case *redis.Client:
		return classify(scan(ctx, c))
	default:
		return store.Errorf(store.Internal, "cannot scan the keys of a %T", s.client)
	}
}
