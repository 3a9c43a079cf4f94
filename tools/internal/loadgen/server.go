package loadgen

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Target is a mailsink (or a peer) to drive: its listeners, an API key of
// the account the load lands in, and its process id when the load tool may
// read /proc.
type Target struct {
	SMTP   string // host:port
	HTTP   string // base URL, http://host:port
	APIKey string
	// OtherKey, when set, is the API key of a second account, whose
	// requests the reads benchmark times while it reads hostile messages
	// in the first.
	OtherKey string
	PID      int    // 0 when unknown: server CPU and RSS are not measured
	PProf    string // base URL of the debug listener, when there is one
	Backend  string // "embedded", "redis" or a peer's name, for reports
	// API is the flavour of list API the target serves: APIMailsink or a
	// peer's (APIInbucket).
	API string
}

// Build compiles ./cmd/mailsink of the module at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "mailsink")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/mailsink")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/mailsink: %v\n%s", err, out)
	}
	return bin, nil
}

// ServerOptions say how to start mailsink.
type ServerOptions struct {
	Binary string
	// RedisURL selects the Redis store; empty means the embedded store in a
	// temporary directory.
	RedisURL string
	// Memory, without RedisURL, keeps the embedded store in memory
	// (MAILSINK_DATA_DIR=:memory:, backend "memory").
	Memory bool
	// PProf starts the opt-in debug listener (MAILSINK_PPROF_ADDR) on a free
	// loopback port.
	PProf bool
	// Log receives the server's stderr; nil discards it.
	Log io.Writer
	// KeepData keeps the embedded store's data directory when the server
	// stops, for DataDir and RemoveData.
	KeepData bool
	// OtherAccount gives the server a second account (Target.OtherKey),
	// through an accounts file of two accounts instead of
	// MAILSINK_API_KEY's one.
	OtherAccount bool
}

// Server is a mailsink process started by the load tool, or a peer's
// (StartPeer).
type Server struct {
	Target
	cmd     *exec.Cmd
	dataDir string
	confDir string // the accounts file's directory, when there is one
	redis   *redis.Client
	prefix  string
	exited  chan struct{}
	waitErr error
	// keepData leaves dataDir in place on Stop.
	keepData bool
	// What start runs: the binary, its environment, where its stderr goes,
	// and whether it has a pprof listener.
	binary string
	env    []string
	log    io.Writer
	pprof  bool
}

// StartServer runs `mailsink serve` on free loopback ports with a random API
// key, and either a temporary data directory or Redis under a key prefix of
// its own, and waits until it prints that it is ready.
func StartServer(ctx context.Context, o ServerOptions) (*Server, error) {
	key, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	s := &Server{exited: make(chan struct{}), keepData: o.KeepData}
	s.APIKey = "bench-" + key
	env := []string{
		"MAILSINK_HTTP_ADDR=127.0.0.1:0",
		"MAILSINK_SMTP_ADDR=127.0.0.1:0",
		"MAILSINK_LOG_LEVEL=warn",
	}
	if o.PProf {
		env = append(env, "MAILSINK_PPROF_ADDR=127.0.0.1:0")
	}
	if o.OtherAccount {
		file, err := s.writeAccounts()
		if err != nil {
			s.cleanup()
			return nil, err
		}
		env = append(env, "MAILSINK_ACCOUNTS_FILE="+file)
	} else {
		env = append(env, "MAILSINK_API_KEY="+s.APIKey)
	}
	if o.RedisURL != "" {
		opts, err := redis.ParseURL(o.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %v", err)
		}
		tag, err := randomHex(6)
		if err != nil {
			return nil, err
		}
		s.prefix = "mailsink-bench-" + tag + ":"
		s.redis = redis.NewClient(opts)
		if err := s.redis.Ping(ctx).Err(); err != nil {
			s.redis.Close()
			return nil, fmt.Errorf("redis at %s: %v", opts.Addr, err)
		}
		env = append(env, "MAILSINK_REDIS_URL="+o.RedisURL, "MAILSINK_REDIS_PREFIX="+s.prefix)
		s.Backend = "redis"
	} else if o.Memory {
		env = append(env, "MAILSINK_DATA_DIR=:memory:")
		s.Backend = "memory"
	} else {
		dir, err := os.MkdirTemp("", "mailsink-bench-data-")
		if err != nil {
			return nil, err
		}
		s.dataDir = dir
		env = append(env, "MAILSINK_DATA_DIR="+dir)
		s.Backend = "embedded"
	}

	s.binary, s.env, s.log, s.pprof = o.Binary, append(withoutEnvPrefix(os.Environ(), "MAILSINK_"), env...), o.Log, o.PProf
	if err := s.start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// start runs the server's process and waits until it prints that it is
// ready, taking its listeners' addresses from its banner.
func (s *Server) start(ctx context.Context) error {
	s.exited = make(chan struct{})
	s.cmd = exec.Command(s.binary, "serve")
	s.cmd.Env = s.env
	if s.log != nil {
		s.cmd.Stderr = s.log
	}
	stdout, err := s.launch(s.cmd.StdoutPipe)
	if err != nil {
		return err
	}

	ready := make(chan error, 1)
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch f := strings.Fields(line); {
			case len(f) == 2 && f[0] == "SMTP":
				s.SMTP = f[1]
			case len(f) == 2 && f[0] == "HTTP":
				s.HTTP = f[1]
			case len(f) == 2 && f[0] == "pprof":
				s.PProf = f[1]
			case line == "mailsink is ready":
				once.Do(func() { ready <- nil })
			}
		}
		once.Do(func() { ready <- errors.New("mailsink exited before it was ready") })
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("mailsink did not say it was ready within 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil && (s.SMTP == "" || s.HTTP == "") {
		err = errors.New("mailsink's banner did not name both listeners")
	}
	if err == nil && s.pprof && s.PProf == "" {
		err = errors.New("mailsink's banner did not name the pprof listener (MAILSINK_PPROF_ADDR)")
	}
	return err
}

// Restart stops the server's process with SIGTERM (it must stop within
// 15s) and starts it again with the same settings and store, keeping its
// data; its listeners get new ports. between runs while it is stopped.
func (s *Server) Restart(ctx context.Context, between func() error) error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not stop within 15s of SIGTERM", s.name())
	}
	s.SMTP, s.HTTP, s.PProf = "", "", ""
	if err := between(); err != nil {
		return err
	}
	return s.start(ctx)
}

// writeAccounts writes an accounts file of two accounts, "bench" with
// s.APIKey and "other" with a new key (s.OtherKey), into a directory of
// its own, and returns its path.
func (s *Server) writeAccounts() (string, error) {
	key, err := randomHex(16)
	if err != nil {
		return "", err
	}
	s.OtherKey = "other-" + key
	if s.confDir, err = os.MkdirTemp("", "mailsink-bench-conf-"); err != nil {
		return "", err
	}
	file := filepath.Join(s.confDir, "accounts.yaml")
	yaml := fmt.Sprintf("accounts:\n"+
		"  - {slug: bench, name: Load tool, apiKeys: [%q], domains: [bench.test]}\n"+
		"  - {slug: other, name: Another account, apiKeys: [%q], domains: [other.test]}\n", s.APIKey, s.OtherKey)
	return file, os.WriteFile(file, []byte(yaml), 0o600)
}

// launch starts s.cmd with the output pipe its banner is read from, and
// waits for the process in the background (s.exited).
func (s *Server) launch(pipe func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	out, err := pipe()
	if err == nil {
		err = s.cmd.Start()
	}
	if err != nil {
		s.cleanup()
		return nil, err
	}
	s.PID = s.cmd.Process.Pid
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	return out, nil
}

// Stop ends the server with SIGTERM (SIGKILL after 15s) and deletes what it
// stored: the temporary data directory, or every Redis key under its prefix
// (with SCAN and DEL, never FLUSHDB).
func (s *Server) Stop() error {
	var errs []error
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
			errs = append(errs, fmt.Errorf("%s did not stop within 15s of SIGTERM; killed", s.name()))
		}
	}
	errs = append(errs, s.cleanup())
	return errors.Join(errs...)
}

// name is what the server is, for messages.
func (s *Server) name() string {
	if s.API != APIMailsink {
		return s.Backend
	}
	return "mailsink"
}

// DataDir returns the embedded store's data directory ("" on Redis).
func (s *Server) DataDir() string {
	if s.API != APIMailsink {
		return ""
	}
	return s.dataDir
}

// RemoveData deletes a data directory Stop kept (KeepData).
func (s *Server) RemoveData() error {
	if s.dataDir == "" {
		return nil
	}
	return os.RemoveAll(s.dataDir)
}

func (s *Server) cleanup() error {
	var err error
	if s.dataDir != "" && !s.keepData {
		err = os.RemoveAll(s.dataDir)
	}
	if s.confDir != "" {
		err = errors.Join(err, os.RemoveAll(s.confDir))
	}
	if s.redis != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, derr := DeletePrefix(ctx, s.redis, s.prefix)
		err = errors.Join(err, derr, s.redis.Close())
	}
	return err
}

// RedisInfo returns a section of INFO of the server's Redis, or nil when it
// does not use Redis.
func (s *Server) RedisInfo(ctx context.Context, section string) (map[string]string, error) {
	if s.redis == nil {
		return nil, nil
	}
	text, err := s.redis.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// DeletePrefix deletes every key that starts with prefix, found with SCAN,
// and returns how many it deleted. prefix must not hold glob characters.
func DeletePrefix(ctx context.Context, c *redis.Client, prefix string) (int, error) {
	if prefix == "" || strings.ContainsAny(prefix, "*?[]\\") {
		return 0, fmt.Errorf("refusing to delete keys under prefix %q", prefix)
	}
	n := 0
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return n, err
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				return n, err
			}
			n += len(keys)
		}
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

func withoutEnvPrefix(env []string, prefix string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
