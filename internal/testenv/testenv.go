// Package testenv starts a whole mailsink in-process for tests: real SMTP
// and HTTP listeners on 127.0.0.1:0 over a real store (the embedded store in
// a temporary directory, or Redis under a key prefix of its own). It also has
// small clients for both listeners.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/app"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
	"github.com/mailsink/mailsink/store/redisstore"
)

// Backend opens a fresh, isolated store for one test.
type Backend struct {
	Name string
	Open func(t *testing.T) store.Store
}

// Backends returns the stores tests run against: the embedded store always,
// and Redis when it answers at MAILSINK_TEST_REDIS_URL (default
// redis://127.0.0.1:6379/0). Under CI=true a missing Redis fails the test.
func Backends(t *testing.T) []Backend {
	t.Helper()
	out := []Backend{{Name: "embedded", Open: OpenEmbedded}}
	if RedisURL(t) != "" {
		out = append(out, Backend{Name: "redis", Open: OpenRedis})
	}
	return out
}

// OpenEmbedded opens an embedded store in a temporary directory.
func OpenEmbedded(t *testing.T) store.Store {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatalf("open embedded store: %v", err)
	}
	return st
}

// OpenMemory opens an embedded store in memory (MAILSINK_DATA_DIR=:memory:),
// bounded to 64 MiB.
func OpenMemory(t *testing.T) store.Store {
	t.Helper()
	st, err := pebblestore.OpenInMemory(64 << 20)
	if err != nil {
		t.Fatalf("open embedded store in memory: %v", err)
	}
	return st
}

// RedisURL returns the test Redis URL when that Redis answers, else "" (and
// under CI=true it fails the test instead).
func RedisURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("MAILSINK_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("MAILSINK_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis at %s does not answer (CI needs it): %v", url, err)
		}
		t.Logf("Redis at %s does not answer, skipping Redis variants: %v", url, err)
		return ""
	}
	return url
}

// OpenRedis opens a Redis store under a key prefix of its own; the test's
// cleanup deletes that prefix's keys (never the whole database).
func OpenRedis(t *testing.T) store.Store {
	t.Helper()
	url := RedisURL(t)
	if url == "" {
		t.Skip("Redis is not available")
	}
	prefix := "mailsink-test:" + RandomHex(6) + ":"
	client, err := redisstore.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DeletePrefix(t, url, prefix) })
	return redisstore.New(client, redisstore.Options{Prefix: prefix})
}

// SharedRedis returns a backend whose stores all share one Redis key prefix
// of their own: several mailsinks started on it are replicas of one
// deployment. The prefix's keys are deleted when the test ends.
func SharedRedis(t *testing.T) Backend {
	t.Helper()
	url := RedisURL(t)
	if url == "" {
		t.Skip("Redis is not available")
	}
	prefix := "mailsink-test:" + RandomHex(6) + ":"
	t.Cleanup(func() { DeletePrefix(t, url, prefix) })
	return Backend{Name: "redis-shared", Open: func(t *testing.T) store.Store {
		client, err := redisstore.NewClient(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return redisstore.New(client, redisstore.Options{Prefix: prefix})
	}}
}

// DownRedis returns a backend on a Redis that is not there: a loopback
// port nothing listens on. mailsink starts on it, and every store call
// fails as in an outage.
func DownRedis(t *testing.T) Backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "redis://" + ln.Addr().String() + "/0"
	ln.Close()
	return Backend{Name: "down", Open: func(t *testing.T) store.Store {
		client, err := redisstore.NewClient(dead, nil)
		if err != nil {
			t.Fatal(err)
		}
		return redisstore.New(client, redisstore.Options{Prefix: "mailsink-test:down:"})
	}}
}

// DeletePrefix removes every key under prefix.
func DeletePrefix(t *testing.T, url, prefix string) {
	t.Helper()
	opts, _ := redis.ParseURL(url)
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			c.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Unlink(ctx, keys...)
	}
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Account keys and domains of the accounts Start configures.
const (
	AcmeKey    = "acme-test-key"
	GlobexKey  = "globex-test-key"
	AcmeDomain = "acme.test"
)

// AccountsYAML is the accounts file Start uses: two accounts, acme (domain
// acme.test) and globex (domain globex.test).
const AccountsYAML = `
accounts:
  - slug: acme
    name: Acme QA
    apiKeys: [` + AcmeKey + `]
    domains: [acme.test]
  - slug: globex
    name: Globex
    apiKeys: [` + GlobexKey + `]
    domains: [globex.test]
`

// Env is a running mailsink under test.
type Env struct {
	App     *app.App
	BaseURL string // http://127.0.0.1:port
	SMTP    string // 127.0.0.1:port
}

// Start runs mailsink on b's store with the two test accounts, and stops it
// at the end of the test. edit, when not nil, changes the configuration first.
func Start(t *testing.T, b Backend, edit func(*config.Config)) *Env {
	t.Helper()
	accs, err := config.ParseAccounts([]byte(AccountsYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(func(string) string { return "" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.SMTP.Addr = "127.0.0.1:0"
	cfg.Accounts = accs
	cfg.KeyFile = ""
	if edit != nil {
		edit(cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	a, err := app.StartWithStore(context.Background(), cfg, b.Open(t), log)
	if err != nil {
		t.Fatalf("start mailsink: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	return &Env{App: a, BaseURL: "http://" + a.HTTPAddr().String(), SMTP: a.SMTPAddr().String()}
}

// PrivateRedis runs a redis-server of the test's own on a free loopback port,
// without persistence, with extra arguments (for example "--maxmemory",
// "2mb"), and returns its URL; it is killed when the test ends. It fails the
// test when redis-server is not installed and CI is set, else skips it.
func PrivateRedis(t *testing.T, args ...string) string {
	t.Helper()
	bin := Program(t, "redis-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir()}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	url := "redis://127.0.0.1:" + port + "/0"
	WaitFor(t, 10*time.Second, "the private redis-server to answer", func() bool {
		select {
		case <-exited:
			t.Fatalf("redis-server exited: %s", out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return url
}
