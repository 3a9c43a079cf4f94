// Package retention deletes old emails in the background. Every round, for
// each account with a retention, it deletes the emails received longer ago
// than the account's maximum age, then the oldest beyond its maximum number
// of emails, in bounded batches and through store.Store.DeleteEmail, so that
// subscribers of the account's events see email.deleted for each.
//
// An email stored or received less than the grace period ago is never
// deleted, whichever rule selects it, so a test waiting for an email it has
// just sent never loses it (an email created with a receivedAt in the past is
// protected by the time it was stored). Several processes pruning one store at
// once are harmless: an email another one deleted first is skipped, and the
// count rule asks the store for the emails beyond the newest N in one
// snapshot (store.Pruner), so together they never leave fewer than N.
package retention

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/store"
)

// Defaults of Config's zero fields.
const (
	DefaultInterval    = time.Minute
	DefaultBatch       = 100
	DefaultMaxPerRound = 1000
)

// Reasons an email is deleted, the reason label of
// mailsink_retention_deleted_total.
const (
	ReasonAge   = "age"
	ReasonCount = "count"
)

// Account is one account and its retention. An account with neither rule is
// left alone.
type Account struct {
	ID   string
	Slug string
	// MaxAge deletes the emails received longer ago than this; 0 keeps
	// them forever.
	MaxAge time.Duration
	// MaxEmails deletes the oldest emails beyond this many; 0 sets no limit.
	MaxEmails int64
}

// Config configures a Pruner.
type Config struct {
	Accounts []Account
	// Grace protects emails stored or received less than this long ago.
	Grace time.Duration
	// Interval is the time between two rounds; 0 means DefaultInterval.
	Interval time.Duration
	// Batch is how many emails one store call returns, at most 100; 0
	// means DefaultBatch.
	Batch int
	// MaxPerRound bounds the deletions tried per account per round, so that
	// one large account does not hold up the others; the next round then
	// starts at once. 0 means DefaultMaxPerRound.
	MaxPerRound int
	// Now is the clock of the rules; nil means time.Now.
	Now func() time.Time
	// Metrics counts deletions; nil counts nothing.
	Metrics *metrics.Metrics
	// Log gets a warning when the store is unavailable and an error for any
	// other failure; nil logs nothing.
	Log *slog.Logger
}

// Pruner deletes emails as its accounts' retention says. Round runs one
// round; Start runs rounds in the background until Shutdown.
type Pruner struct {
	st          Store
	accounts    []Account
	grace       time.Duration
	interval    time.Duration
	batch       int
	maxPerRound int
	now         func() time.Time
	metrics     *metrics.Metrics
	log         *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
}

// Store is what retention needs of the store: an account's oldest emails,
// and deleting them.
type Store interface {
	store.Pruner
	DeleteEmail(ctx context.Context, accountID, id string) error
}

// New returns a Pruner that finds the emails to delete in st and deletes
// them there.
func New(st Store, cfg Config) *Pruner {
	p := &Pruner{
		st:          st,
		grace:       max(cfg.Grace, 0),
		interval:    cfg.Interval,
		batch:       cfg.Batch,
		maxPerRound: cfg.MaxPerRound,
		now:         cfg.Now,
		metrics:     cfg.Metrics,
		log:         cfg.Log,
	}
	for _, a := range cfg.Accounts {
		if a.MaxAge > 0 || a.MaxEmails > 0 {
			p.accounts = append(p.accounts, a)
		}
	}
	if p.interval <= 0 {
		p.interval = DefaultInterval
	}
	if p.batch <= 0 || p.batch > DefaultBatch {
		p.batch = DefaultBatch
	}
	if p.maxPerRound <= 0 {
		p.maxPerRound = DefaultMaxPerRound
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return p
}

// Start runs a round at once and then every interval, in the background,
// until ctx is done or Shutdown is called. With no account to prune it does
// nothing. Call it at most once.
func (p *Pruner) Start(ctx context.Context) {
	if len(p.accounts) == 0 {
		return
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		p.run(ctx)
	}()
}

// Shutdown stops the rounds, cancelling one under way, and waits for it to
// end or for ctx to be done, whose error it then returns. A nil Pruner, or
// one not started, returns nil at once.
func (p *Pruner) Shutdown(ctx context.Context) error {
	if p == nil || p.cancel == nil {
		return nil
	}
	p.cancel()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Pruner) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		_, more, _ := p.round(ctx)
		if more {
			timer.Reset(0)
		} else {
			timer.Reset(p.interval)
		}
	}
}

// Round runs one round over every account and returns how many emails it
// deleted. It stops at the first error with code Unavailable, which it
// returns after logging it; the accounts left wait for the next round.
// Other failures are logged and skip only the account.
func (p *Pruner) Round(ctx context.Context) (int, error) {
	n, _, err := p.round(ctx)
	return n, err
}

// round also reports whether an account reached MaxPerRound with emails
// deleted, so that the next round should start at once.
func (p *Pruner) round(ctx context.Context) (deleted int, more bool, err error) {
	for _, a := range p.accounts {
		r := p.pruneAccount(ctx, a)
		deleted += r.age + r.count
		if r.age+r.count > 0 {
			p.log.Info("retention deleted emails", "account", a.Slug, "age", r.age, "count", r.count)
		}
		more = more || r.full
		switch {
		case r.err == nil:
		case ctx.Err() != nil:
			return deleted, false, ctx.Err()
		case store.IsCode(r.err, store.Unavailable):
			p.log.Warn("retention: store unavailable, retrying next round", "account", a.Slug, "err", r.err)
			return deleted, false, r.err
		default:
			p.log.Error("retention failed", "account", a.Slug, "err", r.err)
		}
	}
	return deleted, more, nil
}

// accountResult is what one round did to one account.
type accountResult struct {
	age, count int  // emails deleted by each rule
	full       bool // the round's budget ran out while deleting
	err        error
}

// pruneAccount applies the age rule, then the count rule, to one account
// within the round's budget. Each rule reads the oldest emails batch by
// batch, stepping over the ones it keeps (inside the grace period, or
// backdated but stored recently), so that they never hide older emails
// behind them; it ends at the first email too young for the rule, or when
// a batch comes back short.
func (p *Pruner) pruneAccount(ctx context.Context, a Account) accountResult {
	var r accountResult
	now := p.now()
	graceCut := now.Add(-p.grace)
	budget := p.maxPerRound
	if a.MaxAge > 0 {
		ageCut := now.Add(-a.MaxAge)
		var skipped int64
	age:
		for budget > 0 && skipped < maxSkipped {
			limit := min(p.batch, budget)
			batch, err := p.st.OldestEmails(ctx, a.ID, 0, skipped, limit)
			if err != nil {
				r.err = err
				return r
			}
			for _, e := range batch {
				if !e.ReceivedAt.Before(ageCut) {
					break age
				}
				// The age counts from when the email was received or
				// stored, whichever is later: an email created through
				// the API with an old receivedAt gets MaxAge too.
				if recent(e, ageCut) || recent(e, graceCut) {
					skipped++
					continue
				}
				budget--
				ok, err := p.delete(ctx, a, e, ReasonAge)
				if err != nil {
					r.err = err
					return r
				}
				if ok {
					r.age++
				}
			}
			if len(batch) < limit {
				break
			}
		}
	}
	if a.MaxEmails > 0 {
		var skipped int64
		for budget > 0 && skipped < maxSkipped {
			limit := min(p.batch, budget)
			batch, err := p.st.OldestEmails(ctx, a.ID, a.MaxEmails, skipped, limit)
			if err != nil {
				r.err = err
				return r
			}
			for _, e := range batch {
				if recent(e, graceCut) {
					skipped++
					continue
				}
				budget--
				ok, err := p.delete(ctx, a, e, ReasonCount)
				if err != nil {
					r.err = err
					return r
				}
				if ok {
					r.count++
				}
			}
			if len(batch) < limit {
				break
			}
		}
	}
	r.full = budget == 0 && r.age+r.count > 0
	return r
}

// maxSkipped bounds how many kept emails one rule steps over in a round, so
// that an account full of them costs a bounded read.
const maxSkipped = 100_000

// recent reports whether e was stored or received after cutoff: inside the
// grace period.
func recent(e *store.Email, cutoff time.Time) bool {
	return e.CreatedAt.After(cutoff) || e.ReceivedAt.After(cutoff)
}

// delete deletes e and reports whether it was there: an email another
// process deleted first is not an error.
func (p *Pruner) delete(ctx context.Context, a Account, e *store.Email, reason string) (bool, error) {
	err := p.st.DeleteEmail(ctx, a.ID, e.ID)
	switch {
	case err == nil:
		p.metrics.RetentionDeletion(a.Slug, reason)
		return true, nil
	case store.IsCode(err, store.NotFound):
		return false, nil
	}
	return false, err
}
