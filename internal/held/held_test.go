package held_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/held"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

func TestLimiterBoundsEachAccount(t *testing.T) {
	t.Parallel()
	l := held.NewLimiter(2)
	r1, ok1 := l.Acquire("a")
	_, ok2 := l.Acquire("a")
	_, ok3 := l.Acquire("a")
	_, okB := l.Acquire("b")
	if !ok1 || !ok2 || ok3 || !okB {
		t.Fatalf("acquire a, a, a, b = %v %v %v %v; want true true false true", ok1, ok2, ok3, okB)
	}
	if n := l.InUse(); n != 3 {
		t.Errorf("in use %d, want 3", n)
	}
	r1()
	r1() // a second release gives nothing back twice
	if _, ok := l.Acquire("a"); !ok {
		t.Error("a place freed by release was not given again")
	}
	if _, ok := l.Acquire("a"); ok {
		t.Error("releasing twice freed two places")
	}
}

// put stores one email for acc to recipient.
func put(t *testing.T, st store.Store, acc, recipient string) *store.Email {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	e := &store.Email{ID: store.NewID(), AccountID: acc, Sender: "app@example.com", Recipient: recipient,
		Status: store.StatusReceived, Labels: []string{}, RawSize: 4, ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateEmails(context.Background(), &store.Body{Raw: []byte("x\r\n\r\n")}, []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestWait(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			t.Cleanup(func() { st.Close() })
			acc := "acc-" + testenv.RandomHex(4)
			q := store.ListQuery{AccountID: acc, Recipient: "wanted@acme.test", Limit: 10}
			ctx := context.Background()

			got := make(chan []*store.Email, 1)
			go func() {
				emails, err := held.Wait(ctx, st, q, 20*time.Second, time.Second, nil)
				if err != nil {
					t.Error(err)
				}
				got <- emails
			}()
			put(t, st, acc, "other@acme.test") // does not match: the wait goes on
			want := put(t, st, acc, "wanted@acme.test")
			if emails := <-got; len(emails) != 1 || emails[0].ID != want.ID {
				t.Errorf("Wait = %v, want the matching email", emails)
			}

			// Nothing matches: an empty page at the deadline.
			q.Recipient = "nobody@acme.test"
			begin := time.Now()
			if emails, err := held.Wait(ctx, st, q, 200*time.Millisecond, time.Second, nil); err != nil || len(emails) != 0 || time.Since(begin) < 200*time.Millisecond {
				t.Errorf("Wait at the deadline = %v, %v after %s", emails, err, time.Since(begin))
			}
			// Stop answers at once.
			l := held.NewLimiter(1)
			l.Stop()
			if emails, err := held.Wait(ctx, st, q, time.Minute, time.Second, l.Stopped()); err != nil || len(emails) != 0 {
				t.Errorf("Wait after Stop = %v, %v", emails, err)
			}
			// A cancelled context ends it with the context's error.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := held.Wait(cctx, st, q, time.Minute, time.Second, nil); !errors.Is(err, context.Canceled) {
				t.Errorf("Wait with a cancelled context: %v", err)
			}
		})
	}
}
