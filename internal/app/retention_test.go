package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// TestRetention checks the wiring of retention: each account's override
// from the accounts file, the default otherwise, email.deleted for what is
// pruned, and the stored and deleted metrics on /metrics.
func TestRetention(t *testing.T) {
	t.Parallel()
	const accountsFile = `
accounts:
  - slug: acme
    name: Acme
    apiKeys: [acme-key]
    retention: {maxAge: 24h}
  - slug: globex
    name: Globex
    apiKeys: [globex-key]
    retention: {maxEmails: 5}
`
	acme, globex := config.DeriveAccountID("acme"), config.DeriveAccountID("globex")
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t, b, func(c *config.Config) {
				c.MetricsPerAccount = true
				accs, err := config.ParseAccounts([]byte(accountsFile))
				if err != nil {
					t.Fatal(err)
				}
				c.Accounts = accs
				c.Retention.MaxAge = 7 * 24 * time.Hour
				c.Retention.Interval = 20 * time.Millisecond
			})
			st := env.App.Store()
			sub := st.(store.Events).Subscribe(acme)
			defer sub.Close()
			now := time.Now()
			put := func(account string, ago time.Duration) *store.Email {
				t.Helper()
				at := now.Add(-ago).UTC().Truncate(time.Millisecond)
				e := &store.Email{
					ID: store.NewID(), AccountID: account, Sender: "s@example.com", Recipient: "r@example.com",
					Status: store.StatusReceived, Labels: []string{}, RawSize: 100,
					ReceivedAt: at, CreatedAt: at, UpdatedAt: at,
				}
				if err := st.CreateEmails(context.Background(), &store.Body{}, []*store.Email{e}); err != nil {
					t.Fatal(err)
				}
				return e
			}
			acmeOld, acmeNew := put(acme, 48*time.Hour), put(acme, time.Hour)
			globexOld, globexNew := put(globex, 8*24*time.Hour), put(globex, 48*time.Hour)

			timeout := time.After(10 * time.Second)
		events:
			for {
				select {
				case ev := <-sub.Events():
					if ev.Type != store.EmailDeleted {
						continue
					}
					if ev.EmailID != acmeOld.ID {
						t.Errorf("email.deleted for %s, want %s", ev.EmailID, acmeOld.ID)
					}
					break events
				case <-timeout:
					t.Fatal("no email.deleted within 10s")
				}
			}
			waitFor(t, "globex's 8-day-old email is deleted", func() bool {
				_, err := st.GetEmail(context.Background(), globex, globexOld.ID)
				return store.IsCode(err, store.NotFound)
			})
			for _, e := range []*store.Email{acmeNew, globexNew} {
				if _, err := st.GetEmail(context.Background(), e.AccountID, e.ID); err != nil {
					t.Errorf("email %s of %s: %v; want it kept", e.ID, e.AccountID, err)
				}
			}

			want := []string{
				`mailsink_stored_emails{account="acme"} 1`,
				`mailsink_stored_emails{account="globex"} 1`,
				`mailsink_stored_bytes{account="globex"} 100`,
				`mailsink_retention_deleted_total{account="acme",reason="age"} 1`,
				`mailsink_retention_deleted_total{account="globex",reason="age"} 1`,
			}
			waitFor(t, "/metrics shows "+strings.Join(want, ", "), func() bool {
				metrics := string(env.Do(t, "GET", "/metrics", "", nil).Body)
				for _, w := range want {
					if !strings.Contains(metrics, w) {
						return false
					}
				}
				return true
			})
		})
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
