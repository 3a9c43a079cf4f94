package ingest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/redisstore"
)

// stallOnce is a real Redis store that, once armed, pauses Redis's writes
// for 1.5 s right before its next create: the key's reservation is written,
// and the create meets the stall.
type stallOnce struct {
	*redisstore.Store
	admin *redis.Client
	armed atomic.Bool
}

func (s *stallOnce) CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error {
	if s.armed.CompareAndSwap(true, false) {
		if err := s.admin.Do(context.Background(), "CLIENT", "PAUSE", 1500, "WRITE").Err(); err != nil {
			return err
		}
	}
	return s.Store.CreateEmails(ctx, body, emails)
}

// A create with an Idempotency-Key that fails while Redis stalls is fenced
// by the Redis store (its ids refuse a late write for a day); the client's
// retry with the same key must still store the email, once.
func TestKeyedRetryAfterAFencedWrite(t *testing.T) {
	t.Parallel()
	url := testenv.PrivateRedis(t)
	client, err := redisstore.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := redis.ParseURL(url)
	admin := redis.NewClient(opt)
	defer admin.Close()
	st := &stallOnce{Store: redisstore.New(client, redisstore.Options{Prefix: "fence:"}), admin: admin}
	t.Cleanup(func() { st.Close() })
	svc := ingest.New(st, time.Now, ingest.Config{})
	ctx := context.Background()
	text := "hello"
	in := ingest.NewEmail{AccountID: "acct", Sender: "s@example.com", Recipient: "r@example.com",
		Text: &ingest.Optional{Value: &text}, IdempotencyKey: "retry-me"}
	warm := in
	warm.IdempotencyKey = ""
	if _, err := svc.Create(ctx, warm); err != nil { // loads the scripts
		t.Fatal(err)
	}
	st.armed.Store(true)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = svc.Create(short, in)
	cancel()
	if !store.IsCode(err, store.Unavailable) {
		t.Fatalf("create during the stall: %v, want Unavailable", err)
	}
	var stored *store.Email
	testenv.WaitFor(t, 15*time.Second, "the keyed retry to be stored", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		stored, err = svc.Create(rctx, in)
		return err == nil
	})
	again, err := svc.Create(ctx, in)
	if err != nil || again.ID != stored.ID {
		t.Fatalf("a repeat after the successful retry: %v, %v; want %s", again, err, stored.ID)
	}
	if n, _, err := st.AccountStats(ctx, "acct"); err != nil || n != 2 {
		t.Errorf("the account holds %d emails, %v; want 2 (the warm-up and the retried one)", n, err)
	}
}
