package redisstore

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// outageBound is how long any call may take to report an outage with the
// 1s dial, read and write timeouts of the outage test's client.
const outageBound = 8 * time.Second

// TestOutage runs a private redis-server, makes it hang and then kills it,
// checks that every method reports Unavailable within outageBound, then
// restarts the server on the same port and checks that the same Store works
// again.
func TestOutage(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	srv := startRedisServer(t, port)

	url := "redis://127.0.0.1:" + port + "/0?dial_timeout=1s&read_timeout=1s&write_timeout=1s"
	c, err := NewClient(url, nil)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	s := New(c, Options{Prefix: "mailsinktest:outage:"})
	defer s.Close()

	ctx := context.Background()
	e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000)
	if err := s.CreateEmails(ctx, testBody("before"), []*store.Email{e}); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}

	t.Run("hung", func(t *testing.T) {
		if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP: %v", err)
		}
		defer srv.cmd.Process.Signal(syscall.SIGCONT)
		checkAllUnavailable(t, s, e)
	})
	waitUntil(t, "the resumed server answers the same Store", func() bool { return s.Ping(ctx) == nil })
	if _, err := s.GetEmail(ctx, acct, e.ID); err != nil {
		t.Fatalf("GetEmail after resume: %v", err)
	}

	t.Run("down", func(t *testing.T) {
		srv.stop()
		checkAllUnavailable(t, s, e)
	})

	startRedisServer(t, port)
	waitUntil(t, "the restarted server answers the same Store", func() bool { return s.Ping(ctx) == nil })
	// The server kept nothing (--save "" --appendonly no); the Store works
	// as on a fresh server.
	if _, err := s.GetEmail(ctx, acct, e.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail of a lost email: %v, want NotFound", err)
	}
	e2 := testEmail(acct, "a@example.com", "b@example.com", 1700000000001)
	if err := s.CreateEmails(ctx, testBody("after"), []*store.Email{e2}); err != nil {
		t.Fatalf("CreateEmails after restart: %v", err)
	}
	if b, err := s.GetBody(ctx, acct, e2.ID); err != nil || string(b.Raw) != "after" {
		t.Errorf("GetBody after restart = %v, %v", b, err)
	}
	l, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Subject: "hell", Limit: 10})
	if err != nil || len(l) != 1 || l[0].ID != e2.ID {
		t.Errorf("ListEmails after restart = %v, %v", ids(l), err)
	}
	if err := s.DeleteEmail(ctx, acct, e2.ID); err != nil {
		t.Errorf("DeleteEmail after restart: %v", err)
	}
}

// checkAllUnavailable calls every method of s and wants each to fail with
// Unavailable within outageBound, with no deadline of its own.
func checkAllUnavailable(t *testing.T, s *Store, e *store.Email) {
	t.Helper()
	ctx := context.Background()
	archived := store.StatusArchived
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateEmails", func() error {
			return s.CreateEmails(ctx, testBody("x"), []*store.Email{testEmail(acct, "a@example.com", "b@example.com", 1)})
		}},
		{"GetEmail", func() error { _, err := s.GetEmail(ctx, acct, e.ID); return err }},
		{"GetBody", func() error { _, err := s.GetBody(ctx, acct, e.ID); return err }},
		{"ListEmails", func() error {
			_, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 10})
			return err
		}},
		{"ListEmails(subject)", func() error {
			_, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Subject: "x", Limit: 10})
			return err
		}},
		{"UpdateEmail", func() error {
			_, err := s.UpdateEmail(ctx, acct, e.ID, store.Update{Status: &archived})
			return err
		}},
		{"DeleteEmail", func() error { return s.DeleteEmail(ctx, acct, e.ID) }},
		{"Ping", func() error { return s.Ping(ctx) }},
		{"BodyCount", func() error { _, err := s.BodyCount(ctx); return err }},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		took := time.Since(start)
		t.Logf("%s: %v after %v", c.name, err, took.Round(time.Millisecond))
		if !store.IsCode(err, store.Unavailable) {
			t.Errorf("%s: error %v has code %v, want Unavailable", c.name, err, store.CodeOf(err))
		}
		if took > outageBound {
			t.Errorf("%s took %v to fail, want at most %v", c.name, took, outageBound)
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// redisServer is a redis-server process run by a test.
type redisServer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
}

// startRedisServer runs a redis-server without persistence on port and
// waits until it answers. It is killed when the test ends.
func startRedisServer(t *testing.T, port string, args ...string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server not installed: %v", err)
	}
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	srv := &redisServer{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(srv.exited)
	}()
	t.Cleanup(srv.stop)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	waitUntil(t, "redis-server on port "+port+" answers", func() bool {
		select {
		case <-srv.exited:
			t.Fatalf("redis-server exited: %s", log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
	return srv
}

// stop kills the server and waits until it has exited.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// waitUntil polls cond until it holds, failing the test after 20s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
