package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// Tests run against a real Redis: MAILSINK_TEST_REDIS_URL, by default the one
// on 127.0.0.1:6379, and a real Redis Cluster when MAILSINK_TEST_REDIS_CLUSTER
// lists its seeds (scripts/redis-cluster.sh start prints that line). Each
// store gets a fresh key prefix, and only that prefix's keys are deleted
// afterwards; the database is never flushed.

const defaultTestRedisURL = "redis://127.0.0.1:6379/0"

// TestMain quiets go-redis's process-wide logger, which otherwise prints
// every failed dial of the outage tests to stderr.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// missing skips the test, or fails it when CI=true, where every backend must
// be there.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// backend makes clients for one kind of Redis deployment.
type backend struct {
	name   string
	client func(t testing.TB) redis.UniversalClient
}

var backends = []backend{
	{"single", singleClient},
	{"cluster", clusterClient},
}

func testRedisURL() string {
	if u := os.Getenv("MAILSINK_TEST_REDIS_URL"); u != "" {
		return u
	}
	return defaultTestRedisURL
}

// singleClient returns a client for the test Redis, or skips the test.
func singleClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	url := testRedisURL()
	c, err := NewClient(url, nil)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", url, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		missing(t, "no Redis at %s (%v); start redis-server or set MAILSINK_TEST_REDIS_URL", url, err)
	}
	return c
}

// clusterClient returns a client for the test cluster, or skips the test.
func clusterClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	seeds := os.Getenv("MAILSINK_TEST_REDIS_CLUSTER")
	if seeds == "" {
		missing(t, "MAILSINK_TEST_REDIS_CLUSTER not set; run scripts/redis-cluster.sh start")
	}
	c, err := NewClient("", strings.Split(seeds, ","))
	if err != nil {
		t.Fatalf("NewClient(cluster %q): %v", seeds, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := New(c, Options{}).Ping(ctx); err != nil {
		c.Close()
		missing(t, "Redis Cluster at %s unreachable (%v); run scripts/redis-cluster.sh start", seeds, err)
	}
	return c
}

// eachBackend runs fn as a subtest per backend with a function that makes
// fresh, empty stores on it.
func eachBackend(t *testing.T, fn func(t *testing.T, newStore func(t testing.TB) *Store)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			b.client(t).Close() // skip early when the backend is not there
			fn(t, func(t testing.TB) *Store { return newTestStore(t, b) })
		})
	}
}

// newTestStore returns a Store under a fresh prefix whose keys are deleted
// when the test ends, with a separate client since the test may close the
// store's.
func newTestStore(t testing.TB, b backend) *Store {
	t.Helper()
	prefix := "mailsinktest:" + randomHex(8) + ":"
	s := New(b.client(t), Options{Prefix: prefix})
	cleanup := b.client(t)
	t.Cleanup(func() {
		s.Close()
		deletePrefix(t, cleanup, prefix)
		cleanup.Close()
	})
	return s
}

// deletePrefix unlinks every key under prefix, node by node and key by key
// (a cluster refuses multi-key commands across slots).
func deletePrefix(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := New(c, Options{Prefix: prefix}).scanKeys(ctx, escapeGlob(prefix)+"*", func(ctx context.Context, node *redis.Client, keys []string) error {
		pipe := node.Pipeline()
		for _, k := range keys {
			pipe.Unlink(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		t.Errorf("deleting keys under %q: %v", prefix, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }

func wantCode(t testing.TB, what string, err error, code store.Code) {
	t.Helper()
	if got := store.CodeOf(err); got != code {
		t.Fatalf("%s: error %v has code %v, want %v", what, err, got, code)
	}
}

// testEmail returns a complete email in account received at ms.
func testEmail(account, recipient, sender string, ms int64) *store.Email {
	at := time.UnixMilli(ms).UTC()
	return &store.Email{
		ID:         store.NewID(),
		AccountID:  account,
		MessageID:  ptr(fmt.Sprintf("<%d@test>", ms)),
		Sender:     sender,
		Recipient:  recipient,
		Subject:    ptr("Hello"),
		Status:     store.StatusReceived,
		Labels:     []string{},
		RawSize:    5,
		ReceivedAt: at,
		CreatedAt:  at,
		UpdatedAt:  at,
	}
}

func testBody(raw string) *store.Body {
	return &store.Body{Raw: []byte(raw), Given: &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}}
}

func ids(es []*store.Email) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// createAwaiting creates e in s and returns once sub delivers its
// email.created event; it fails the test, saying what was awaited, when
// sub ends or delivers another event first, or nothing comes within wait.
func createAwaiting(t testing.TB, s *Store, sub store.Subscription, e *store.Email, wait time.Duration, what string) {
	t.Helper()
	if err := s.CreateEmails(context.Background(), testBody(e.ID), []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, open := <-sub.Events():
		if !open || ev.EmailID != e.ID {
			t.Fatalf("%s: the subscription gave %+v (open %v); want the email.created of %s", what, ev, open, e.ID)
		}
	case <-time.After(wait):
		t.Fatalf("%s: no event", what)
	}
}
