// Package faults applies the fault rules of /v1/faults: it keeps them in a
// store.Faults, the one source of truth that every mailsink process
// sharing the store reads, and decides which rule, if any, an SMTP
// transaction meets at each stage (docs/smtp.md, "Fault injection").
//
// The SMTP server reads an account's rules once per transaction (Rules)
// and checks each stage against them (Match), with no cache beyond the
// transaction: a rule created or deleted through any process applies to
// the next transaction every process starts. (The embedded store, which one
// process owns, keeps the rules in memory and forgets them with each
// change, which comes to the same.) A counted rule's matches are
// taken from the store atomically, so "the next N" is exact across
// processes.
package faults

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/batch"
	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
)

// Limits of a rule, checked by the API.
const (
	// MaxTextLength bounds a reply's text, in characters.
	MaxTextLength = 200
	// MaxCount bounds a counted rule's matches.
	MaxCount = 1_000_000
	// MaxExpiresIn bounds how far in the future a rule may expire.
	MaxExpiresIn = 30 * 24 * time.Hour
	// DelayCeiling is the longest delay whatever the read timeout: well
	// below the 5 minutes that RFC 5321 gives clients for most replies.
	DelayCeiling = 4 * time.Minute
)

// MaxDelay returns the longest delay a rule may ask for when the SMTP
// server's read timeout is readTimeout: DelayCeiling, but never more than
// the read timeout less a tenth of it (at least a second), so that a
// delayed reply never outlasts what this server itself would wait for a
// client. It is at least a second.
func MaxDelay(readTimeout time.Duration) time.Duration {
	d := DelayCeiling
	if readTimeout > 0 {
		d = min(d, readTimeout-max(readTimeout/10, time.Second))
	}
	return max(d, time.Second)
}

// Config configures an Injector. Zero fields get defaults.
type Config struct {
	// MaxDelay bounds the delay of new rules; zero means MaxDelay(0).
	MaxDelay time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand returns a number in [0, 1) for probability rules; nil means
	// math/rand/v2's.
	Rand func() float64
	// Metrics, when not nil, counts the faults applied.
	Metrics *metrics.Metrics
	// Log, when not nil, gets a line for each fault applied and for rules
	// that could not be read.
	Log *slog.Logger
	// ShareReads lets concurrent calls of Rules for one account share
	// store reads: for a store across the network (Redis), where each read
	// is a round trip. An embedded store reads faster than the calls could
	// wait for each other.
	ShareReads bool
	// Local says the store is in this process (the embedded one), whose
	// calls look at their context only as they begin: a timeout would not
	// bound them, only cost its timer (Local). They may still wait, for a
	// commit and its fdatasyncs.
	Local bool
}

// Injector keeps fault rules and decides which one a transaction meets.
type Injector struct {
	store store.Faults
	cfg   Config
	// reads shares the store reads of Rules among an account's concurrent
	// transactions (readRules), one Batcher per account, so that a slow
	// read (an account on a Redis shard that is failing over) holds up no
	// other account's transactions; nil unless Config.ShareReads. It
	// holds one entry per account that sent mail, and accounts are the
	// configured ones.
	reads *batch.Keyed[*rulesRead]
}

// rulesRead is one call of Rules.
type rulesRead struct {
	ctx       context.Context
	accountID string
	rules     []*store.FaultRule
	err       error
}

// maxReadBatch bounds the calls of Rules that share one batch.
const maxReadBatch = 64

// New returns an Injector over fs.
func New(fs store.Faults, cfg Config) *Injector {
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = MaxDelay(0)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	in := &Injector{store: fs, cfg: cfg}
	if cfg.ShareReads {
		in.reads = batch.NewKeyed(maxReadBatch, in.readRules)
	}
	return in
}

// readRules reads the rules of a batch of Rules calls for one account once.
// Every call of a batch arrived before the batch started (package batch), so
// each transaction still gets the rules as they were after it began: what
// docs/smtp.md promises (a rule created before a MAIL applies to its
// transaction, on every replica). The read uses the first call's context.
func (in *Injector) readRules(reads []*rulesRead) {
	rules, err := in.store.Faults(reads[0].ctx, reads[0].accountID)
	for _, r := range reads {
		r.rules, r.err = rules, err
	}
}

// Local reports whether the rules are in this process's store
// (Config.Local), whose calls a timeout would not bound: the SMTP server
// then calls it without one, whose timer was most of the cost of a stage
// without rules.
func (in *Injector) Local() bool { return in != nil && in.cfg.Local }

// MaxDelay returns the longest delay a new rule may ask for.
func (in *Injector) MaxDelay() time.Duration { return in.cfg.MaxDelay }

// Create stores r for accountID: it sets r's ID, AccountID, CreatedAt,
// Remaining (from Count) and, when expiresIn is not zero, ExpiresAt. The
// caller has validated r. It returns Conflict when the account holds
// store.MaxFaultRules rules already.
func (in *Injector) Create(ctx context.Context, accountID string, r *store.FaultRule, expiresIn time.Duration) error {
	now := in.cfg.Now().UTC().Truncate(time.Millisecond)
	r.ID = store.NewID()
	r.AccountID = accountID
	r.CreatedAt = now
	r.Remaining = r.Count
	if expiresIn > 0 {
		r.ExpiresAt = now.Add(expiresIn)
	}
	return in.store.CreateFault(ctx, r)
}

// List returns the account's rules that have not expired, oldest first.
func (in *Injector) List(ctx context.Context, accountID string) ([]*store.FaultRule, error) {
	rules, err := in.store.Faults(ctx, accountID)
	if err != nil {
		return nil, err
	}
	now := in.cfg.Now()
	live := rules[:0]
	for _, r := range rules {
		if !r.Expired(now) {
			live = append(live, r)
		}
	}
	return live, nil
}

// Delete removes the account's rule id; it returns store.ErrFaultNotFound
// when the account has no such rule (an expired one included).
func (in *Injector) Delete(ctx context.Context, accountID, id string) error {
	return in.store.DeleteFault(ctx, accountID, id)
}

// DeleteAll removes every rule of the account.
func (in *Injector) DeleteAll(ctx context.Context, accountID string) error {
	return in.store.DeleteFaults(ctx, accountID)
}

// Point is where an SMTP transaction stands and what is known of it there.
type Point struct {
	Stage     store.FaultStage
	AccountID string
	// Sender is the MAIL FROM address; empty before MAIL (and for the
	// null reverse path), where rules with a sender never match.
	Sender string
	// Recipients are the addresses a recipient filter is compared with:
	// the one being answered at the rcpt stage, the account's accepted
	// ones at the data and message stages, none before.
	Recipients []string
	// Taken, when not nil, holds the counted rules this transaction has
	// already taken a match of: such a rule applies again within the
	// transaction (a second matching RCPT) without taking another, since
	// count counts transactions. Match adds the rules it takes.
	Taken map[string]bool
}

// Rules returns the account's rules, for Match, as the store holds them at
// some moment after the call began. With Config.ShareReads, concurrent
// calls share store reads (a call that arrives while a read is under way
// waits for the next one), so the rules returned may be shared: they must
// not be modified. When they cannot be read, it logs it and returns none: a
// fault is never worth failing real mail for.
func (in *Injector) Rules(ctx context.Context, accountID string) []*store.FaultRule {
	if in == nil || accountID == "" {
		return nil
	}
	read := &rulesRead{ctx: ctx, accountID: accountID}
	if in.reads != nil {
		in.reads.Do(accountID, read)
	} else {
		in.readRules([]*rulesRead{read})
	}
	rules, err := read.rules, read.err
	if err != nil {
		in.cfg.Log.Warn("fault rules could not be read; none applied", "account", accountID, "err", err)
		return nil
	}
	return rules
}

// Check returns the rule point p meets among the account's rules as they
// are in the store now, or nil; see Match.
func (in *Injector) Check(ctx context.Context, p Point) *store.FaultRule {
	return in.Match(ctx, in.Rules(ctx, p.AccountID), p)
}

// Match returns the first of rules (the account's, from Rules), oldest
// first, that point p meets, or nil. A counted rule is met only when one
// of its remaining matches could be taken from the store, so a rules list
// read a little earlier never lets a counted rule apply more often than
// its count; a probability rule only when the draw falls under it. The
// fault is counted in the metrics as it will be applied.
func (in *Injector) Match(ctx context.Context, rules []*store.FaultRule, p Point) *store.FaultRule {
	if in == nil || p.AccountID == "" {
		return nil
	}
	now := in.cfg.Now()
	for _, r := range rules {
		if r.Stage != p.Stage || r.AccountID != p.AccountID || r.Expired(now) || !matches(r, p) {
			continue
		}
		if r.Probability != nil && in.cfg.Rand() >= *r.Probability {
			continue
		}
		if r.Count > 0 && !p.Taken[r.ID] {
			ok, err := in.store.ConsumeFault(ctx, p.AccountID, r.ID)
			if err != nil {
				in.cfg.Log.Warn("fault rule could not be consumed; not applied", "account", p.AccountID, "rule", r.ID, "err", err)
				continue
			}
			if !ok {
				continue // another transaction took the last match
			}
			if p.Taken != nil {
				p.Taken[r.ID] = true
			}
		}
		action := Action(r)
		in.cfg.Metrics.SMTPFault(string(p.Stage), action)
		in.cfg.Log.Info("fault injected", "account", p.AccountID, "rule", r.ID, "stage", p.Stage, "action", action)
		return r
	}
	return nil
}

// Action names what a client sees of r: metrics.FaultDisconnect,
// metrics.FaultReply, or metrics.FaultDelay when r only delays.
func Action(r *store.FaultRule) string {
	switch {
	case r.Disconnect:
		return metrics.FaultDisconnect
	case r.Reply != nil:
		return metrics.FaultReply
	}
	return metrics.FaultDelay
}

// matches reports whether p passes r's sender and recipient filters.
func matches(r *store.FaultRule, p Point) bool {
	if r.Sender != "" && !AddressMatches(r.Sender, p.Sender) {
		return false
	}
	if r.Recipient == "" {
		return true
	}
	for _, rcpt := range p.Recipients {
		if AddressMatches(r.Recipient, rcpt) {
			return true
		}
	}
	return false
}

// AddressMatches reports whether addr is what filter names: the same
// address, case-insensitively, or, for a filter "@domain", an address at
// exactly that domain.
func AddressMatches(filter, addr string) bool {
	if addr == "" {
		return false
	}
	if strings.HasPrefix(filter, "@") {
		at := strings.LastIndexByte(addr, '@')
		return at >= 0 && strings.EqualFold(addr[at:], filter)
	}
	return strings.EqualFold(filter, addr)
}
