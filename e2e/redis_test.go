package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/internal/testenv"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// redisServer is a private redis-server run by one test.
type redisServer struct {
	cmd    *exec.Cmd
	log    *bytes.Buffer
	exited chan struct{}
}

// startDurableRedis runs redis-server on port with its files in dir and an
// append-only file synced before every reply (so what it acknowledged
// survives a SIGKILL), and waits until it answers PING. It is killed when
// the test ends. Without redis-server the test is skipped, or fails under
// CI=true.
func startDurableRedis(t *testing.T, port, dir string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not installed (CI needs it): %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always")
	srv := &redisServer{cmd: cmd, log: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = srv.log, srv.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func() {
		cmd.Wait()
		close(srv.exited)
	}()
	t.Cleanup(srv.kill)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, DialTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-srv.exited:
			t.Fatalf("redis-server on port %s exited:\n%s", port, srv.log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return srv
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %s does not answer after 20s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the server has exited.
func (s *redisServer) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// redisPrefix returns a key prefix of the test's own on the shared test
// Redis, whose keys are deleted when the test ends (after the processes
// the test starts later are gone).
func redisPrefix(t *testing.T, url string) string {
	t.Helper()
	prefix := "mailsink-e2e:" + testenv.RandomHex(6) + ":"
	t.Cleanup(func() { testenv.DeletePrefix(t, url, prefix) })
	return prefix
}

// isTempFailure reports whether err is the SMTP reply for an unavailable
// store: 451 4.3.0.
func isTempFailure(err error) bool {
	var se *smtp.SMTPError
	return errors.As(err, &se) && se.Code == 451 && se.EnhancedCode == smtp.EnhancedCode{4, 3, 0}
}

// listSubjects pages through every email key sees and returns how many
// emails carry each subject.
func listSubjects(t *testing.T, e *testenv.Env, key string) map[string]int {
	t.Helper()
	subjects := map[string]int{}
	for offset := 0; ; offset += 100 {
		resp := e.Do(t, http.MethodGet, fmt.Sprintf("/v1/emails?limit=100&offset=%d", offset), key, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("list at offset %d: %d %s", offset, resp.Status, resp.Body)
		}
		items := resp.JSON(t)["items"].([]any)
		for _, it := range items {
			subject, _ := it.(map[string]any)["subject"].(string)
			subjects[subject]++
		}
		if len(items) < 100 {
			return subjects
		}
	}
}

// wantErrorEnvelope fails unless resp has status and the error envelope
// {"error": "<message>"}.
func wantErrorEnvelope(t *testing.T, what string, resp *testenv.Response, status int) {
	t.Helper()
	if resp.Status != status {
		t.Errorf("%s: status %d, want %d; body %s", what, resp.Status, status, resp.Body)
		return
	}
	if msg, ok := resp.JSON(t)["error"].(string); !ok || msg == "" {
		t.Errorf("%s: body %s, want {\"error\": \"...\"}", what, resp.Body)
	}
}

// TestRedisClientLogsAreStructured: while Redis is down, go-redis's own log
// lines come through the structured logger, at most one a second, instead
// of several raw "redis: ..." lines a second on stderr.
func TestRedisClientLogsAreStructured(t *testing.T) {
	t.Parallel()
	cmd := execMailsink(t, "MAILSINK_DATA_DIR="+t.TempDir(), "MAILSINK_API_KEY=k",
		"MAILSINK_REDIS_URL=redis://127.0.0.1:"+freePort(t)+"/0")
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "three lines of the Redis client, the later ones counting dropped lines", func() bool {
		return strings.Count(out.String(), `msg="redis client"`) >= 3 && strings.Contains(out.String(), " dropped=")
	})
	cmd.Process.Kill()
	cmd.Wait()
	elapsed := time.Since(start)
	structured := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "redis: ") {
			t.Errorf("a raw go-redis line: %s", line)
		}
		if strings.Contains(line, `level=WARN msg="redis client" component=redis detail=`) {
			structured++
		}
	}
	if structured == 0 || structured > int(elapsed.Seconds())+1 {
		t.Errorf("%d structured redis client lines in %s, want 1 to one a second:\n%s", structured, elapsed, out.String())
	}
}
