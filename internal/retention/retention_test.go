package retention_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/metrics"
	"github.com/mailsink/mailsink/internal/retention"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// now is the test clock's start.
var now = time.UnixMilli(1_767_225_600_000).UTC()

// clock is a settable clock for the rules.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: now} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// eachBackend runs fn on a fresh embedded store, on disk and in memory, and
// on a fresh Redis store when Redis answers.
func eachBackend(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Helper()
	for _, b := range append(testenv.Backends(t), testenv.Backend{Name: "memory", Open: testenv.OpenMemory}) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			t.Cleanup(func() { st.Close() })
			fn(t, st)
		})
	}
}

// put stores an email of accountID received ago before the clock's start
// and stored storedAgo before it.
func put(t *testing.T, st store.Store, accountID string, ago, storedAgo time.Duration) *store.Email {
	t.Helper()
	e := &store.Email{
		ID: store.NewID(), AccountID: accountID, Sender: "s@example.com", Recipient: "r@example.com",
		Status: store.StatusReceived, Labels: []string{}, RawSize: 10,
		ReceivedAt: now.Add(-ago), CreatedAt: now.Add(-storedAgo), UpdatedAt: now.Add(-storedAgo),
	}
	if err := st.CreateEmails(context.Background(), &store.Body{Raw: []byte("0123456789")}, []*store.Email{e}); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}
	return e
}

// remaining returns the ids of the account's emails, oldest first.
func remaining(t *testing.T, st store.Store, accountID string) []string {
	t.Helper()
	es, err := st.OldestEmails(context.Background(), accountID, 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return ids(es...)
}

func ids(es ...*store.Email) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func round(t *testing.T, p *retention.Pruner, want int) {
	t.Helper()
	n, err := p.Round(context.Background())
	if err != nil {
		t.Fatalf("Round: %v", err)
	}
	if n != want {
		t.Errorf("Round deleted %d emails, want %d", n, want)
	}
}

const day = 24 * time.Hour

// TestAgeRule checks that emails received and stored longer ago than MaxAge
// go, others stay, an email backdated but just stored gets MaxAge from when
// it was stored, and accounts without a rule are left alone.
func TestAgeRule(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, st store.Store) {
		old1 := put(t, st, "acme", 10*day, 10*day)
		old2 := put(t, st, "acme", 8*day, 8*day)
		fresh := put(t, st, "acme", day, day)
		backdated := put(t, st, "acme", 30*day, time.Minute)
		other := put(t, st, "globex", 10*day, 10*day)
		reg := prometheus.NewRegistry()
		m := metrics.New(reg, "test")
		m.PerAccount = true
		clk := newClock()
		p := retention.New(st, retention.Config{
			Accounts: []retention.Account{
				{ID: "acme", Slug: "acme-slug", MaxAge: 7 * day},
				{ID: "globex", Slug: "globex"},
			},
			Grace:   5 * time.Minute,
			Now:     clk.Now,
			Metrics: m,
		})

		round(t, p, 2)
		if got, want := remaining(t, st, "acme"), ids(backdated, fresh); !slices.Equal(got, want) {
			t.Errorf("after a round: %v left, want %v (deleted %v)", got, want, ids(old1, old2))
		}
		if got := testutil.ToFloat64(m.RetentionDeleted.WithLabelValues("acme-slug", "age")); got != 2 {
			t.Errorf("mailsink_retention_deleted_total{acme-slug,age} = %v, want 2", got)
		}
		round(t, p, 0)

		clk.Add(5 * time.Minute)
		round(t, p, 0)
		clk.Add(7*day - 7*time.Minute)
		round(t, p, 1) // fresh is 8 days old; backdated was stored 7 days less a minute ago
		if got, want := remaining(t, st, "acme"), ids(backdated); !slices.Equal(got, want) {
			t.Errorf("a week later: %v left, want %v", got, want)
		}
		clk.Add(2 * time.Minute)
		round(t, p, 1)
		if got := remaining(t, st, "acme"); len(got) != 0 {
			t.Errorf("a week after it was stored, the backdated email is still there: %v", got)
		}
		if got, want := remaining(t, st, "globex"), ids(other); !slices.Equal(got, want) {
			t.Errorf("the account without retention: %v left, want %v", got, want)
		}
	})
}

// TestCountRule checks that the oldest emails beyond MaxEmails go, except
// those inside the grace period, which go once it is over.
func TestCountRule(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, st store.Store) {
		var old []*store.Email
		for i := range 4 {
			old = append(old, put(t, st, "acme", time.Hour-time.Duration(i)*time.Minute, time.Hour))
		}
		recent1 := put(t, st, "acme", 2*time.Minute, 2*time.Minute)
		recent2 := put(t, st, "acme", time.Minute, time.Minute)
		reg := prometheus.NewRegistry()
		m := metrics.New(reg, "test")
		m.PerAccount = true
		clk := newClock()
		p := retention.New(st, retention.Config{
			Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxEmails: 1}},
			Grace:    5 * time.Minute,
			Now:      clk.Now,
			Metrics:  m,
		})

		// The 4 old emails are beyond the newest 1 and go; recent1 is
		// beyond it too, but was stored 2 minutes ago.
		round(t, p, 4)
		if got, want := remaining(t, st, "acme"), ids(recent1, recent2); !slices.Equal(got, want) {
			t.Errorf("inside the grace period: %v left, want %v", got, want)
		}
		clk.Add(3*time.Minute + time.Millisecond)
		round(t, p, 1)
		if got, want := remaining(t, st, "acme"), ids(recent2); !slices.Equal(got, want) {
			t.Errorf("after the grace period: %v left, want %v", got, want)
		}
		if got := testutil.ToFloat64(m.RetentionDeleted.WithLabelValues("acme", "count")); got != 5 {
			t.Errorf("mailsink_retention_deleted_total{acme,count} = %v, want 5", got)
		}
		clk.Add(time.Hour)
		round(t, p, 0) // never below MaxEmails
	})
}

// TestBothRules checks an account with both rules: age first, then count.
func TestBothRules(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, st store.Store) {
		put(t, st, "acme", 3*day, 3*day)
		put(t, st, "acme", 2*day, 2*day)
		b := put(t, st, "acme", 3*time.Hour, 3*time.Hour)
		c := put(t, st, "acme", 2*time.Hour, 2*time.Hour)
		d := put(t, st, "acme", time.Hour, time.Hour)
		p := retention.New(st, retention.Config{
			Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxAge: day, MaxEmails: 2}},
			Grace:    5 * time.Minute,
			Now:      newClock().Now,
		})
		round(t, p, 3)
		if got, want := remaining(t, st, "acme"), ids(c, d); !slices.Equal(got, want) {
			t.Errorf("%v left, want %v (b was %s)", got, want, b.ID)
		}
	})
}

// TestRoundBudget checks that a round deletes at most MaxPerRound emails
// per account, in batches, and still serves every account.
func TestRoundBudget(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, st store.Store) {
		for range 25 {
			put(t, st, "big", 10*day, 10*day)
		}
		put(t, st, "small", 10*day, 10*day)
		p := retention.New(st, retention.Config{
			Accounts: []retention.Account{
				{ID: "big", Slug: "big", MaxAge: day},
				{ID: "small", Slug: "small", MaxAge: day},
			},
			Batch:       4,
			MaxPerRound: 10,
			Now:         newClock().Now,
		})
		round(t, p, 11)
		if got := remaining(t, st, "small"); len(got) != 0 {
			t.Errorf("the small account after one round: %d left, want 0", len(got))
		}
		round(t, p, 10)
		round(t, p, 5)
		round(t, p, 0)
	})
}

// TestDeletedEvents checks, in the background, that a subscriber of the
// account's events gets email.deleted for every pruned email.
func TestDeletedEvents(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, st store.Store) {
		n, ok := st.(store.Events)
		if !ok {
			t.Fatalf("%T does not implement store.Events", st)
		}
		sub := n.Subscribe("acme")
		defer sub.Close()
		want := map[string]bool{}
		for range 3 {
			want[put(t, st, "acme", 10*day, 10*day).ID] = true
		}
		keep := put(t, st, "acme", time.Hour, time.Hour)
		p := retention.New(st, retention.Config{
			Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxAge: day}},
			Interval: 10 * time.Millisecond,
			Now:      newClock().Now,
		})
		p.Start(context.Background())
		defer p.Shutdown(context.Background())

		deadline := time.After(10 * time.Second)
		for len(want) > 0 {
			select {
			case ev, open := <-sub.Events():
				if !open {
					t.Fatal("the subscription ended")
				}
				if ev.Type == store.EmailDeleted {
					if !want[ev.EmailID] {
						t.Errorf("email.deleted for %s, which is not one of the old emails", ev.EmailID)
					}
					delete(want, ev.EmailID)
				}
			case <-deadline:
				t.Fatalf("no email.deleted within 10s for %d emails", len(want))
			}
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if got := remaining(t, st, "acme"); !slices.Equal(got, ids(keep)) {
			t.Errorf("%v left, want %v", got, ids(keep))
		}
	})
}

// TestConcurrentPruners checks that two pruners on one store, as two
// replicas would run them, delete what they should and nothing more.
func TestConcurrentPruners(t *testing.T) {
	t.Parallel()
	backends := []testenv.Backend{{Name: "embedded", Open: testenv.OpenEmbedded}}
	if testenv.RedisURL(t) != "" {
		backends = append(backends, testenv.SharedRedis(t))
	}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			first := b.Open(t)
			t.Cleanup(func() { first.Close() })
			second := first
			if b.Name != "embedded" { // a replica: its own store on the same keys
				second = b.Open(t)
				t.Cleanup(func() { second.Close() })
			}
			var newest []string
			for i := range 40 {
				e := put(t, first, "acme", time.Duration(40-i)*time.Hour, 2*day)
				if i >= 30 {
					newest = append(newest, e.ID)
				}
			}
			for range 5 {
				put(t, first, "acme", 30*day, 30*day)
			}
			cfg := retention.Config{
				Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxAge: 20 * day, MaxEmails: 10}},
				Batch:    3,
				Now:      newClock().Now,
			}
			var wg sync.WaitGroup
			for _, st := range []store.Store{first, second} {
				p := retention.New(st, cfg)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := p.Round(context.Background()); err != nil {
						t.Errorf("Round: %v", err)
					}
				}()
			}
			wg.Wait()
			if got := remaining(t, first, "acme"); !slices.Equal(got, newest) {
				t.Errorf("%d left %v, want the newest 10 %v", len(got), got, newest)
			}
		})
	}
}

// TestUnavailable checks that a store that cannot be reached makes a round
// fail with Unavailable and a warning, and nothing worse.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	st := testenv.OpenEmbedded(t)
	put(t, st, "acme", 10*day, 10*day)
	st.Close()
	var logs bytes.Buffer
	p := retention.New(st, retention.Config{
		Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxAge: day}},
		Now:      newClock().Now,
		Log:      slog.New(slog.NewTextHandler(&logs, nil)),
	})
	n, err := p.Round(context.Background())
	if n != 0 || !store.IsCode(err, store.Unavailable) {
		t.Errorf("Round on a closed store = %d, %v; want 0, Unavailable", n, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "account=acme") {
		t.Errorf("logs %q, want a warning naming the account", logs.String())
	}
}

// TestLifecycle checks Start and Shutdown, including of a pruner with
// nothing to do and of none at all.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	st := testenv.OpenEmbedded(t)
	t.Cleanup(func() { st.Close() })
	idle := retention.New(st, retention.Config{Accounts: []retention.Account{{ID: "acme", Slug: "acme"}}})
	idle.Start(context.Background())
	if err := idle.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of an idle pruner: %v", err)
	}
	var none *retention.Pruner
	if err := none.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of a nil pruner: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	p := retention.New(st, retention.Config{Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxAge: day}}})
	p.Start(ctx)
	cancel() // the context ends the rounds too
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := p.Shutdown(sctx); err != nil {
		t.Errorf("Shutdown after the context ended: %v", err)
	}
}

// TestKeptEmailsDoNotHideOlderOnes puts more backdated-but-just-stored
// emails at the head of the account than one batch holds: the age rule
// steps over them and still deletes the old email behind them, and the
// count rule does the same with emails inside the grace period.
func TestKeptEmailsDoNotHideOlderOnes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, st store.Store) {
		var fixtures []*store.Email
		for range 4 {
			fixtures = append(fixtures, put(t, st, "acme", 400*day, day))
		}
		old := put(t, st, "acme", 10*day, 10*day)
		p := retention.New(st, retention.Config{
			Accounts: []retention.Account{{ID: "acme", Slug: "acme", MaxAge: 7 * day}},
			Batch:    3,
			Now:      newClock().Now,
		})
		round(t, p, 1)
		left := remaining(t, st, "acme")
		if slices.Contains(left, old.ID) || len(left) != len(fixtures) {
			t.Errorf("after a round: %v left, want only the 4 backdated fixtures (old %s deleted)", left, old.ID)
		}

		for range 4 {
			put(t, st, "count", 400*day, time.Minute) // inside the grace period
		}
		over := put(t, st, "count", 10*day, 10*day)
		for range 2 {
			put(t, st, "count", day, day)
		}
		p = retention.New(st, retention.Config{
			Accounts: []retention.Account{{ID: "count", Slug: "count", MaxEmails: 2}},
			Batch:    3,
			Grace:    5 * time.Minute,
			Now:      newClock().Now,
		})
		round(t, p, 1)
		if slices.Contains(remaining(t, st, "count"), over.ID) {
			t.Errorf("the count rule did not reach the email behind the protected ones")
		}
	})
}
