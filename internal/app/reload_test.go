package app_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/app"
	"github.com/mailsink/mailsink/internal/testenv"
)

func accountsYAML(key, domain string) string {
	return fmt.Sprintf("accounts:\n  - slug: acme\n    name: Acme\n    apiKeys: [%s]\n    domains: [%s]\n  - slug: other\n    name: Other\n    apiKeys: [other-key]\n", key, domain)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// loadConfig is the configuration main would load from env, on loopback
// ports with an embedded store in a temporary directory.
func loadConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	env["MAILSINK_HTTP_ADDR"] = "127.0.0.1:0"
	env["MAILSINK_SMTP_ADDR"] = "127.0.0.1:0"
	if env["MAILSINK_DATA_DIR"] == "" {
		env["MAILSINK_DATA_DIR"] = t.TempDir()
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// status answers GET /v1/emails with key over client.
func status(t *testing.T, client *http.Client, a *app.App, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.HTTPAddr().String()+"/v1/emails", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// smtpLine sends one SMTP command on an open connection and returns the
// reply's first line.
func smtpLine(t *testing.T, c net.Conn, r *bufio.Reader, cmd string) string {
	t.Helper()
	if cmd != "" {
		fmt.Fprintf(c, "%s\r\n", cmd)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if len(line) < 4 || line[3] != '-' {
			return strings.TrimSpace(line)
		}
	}
}

// TestReloadBySignal runs mailsink as main does and sends on its SIGHUP
// channel: the new keys and domains apply, an HTTP keep-alive connection and
// an SMTP session opened before stay usable, and a bad file is refused with
// a log line while the accounts in force stay.
func TestReloadBySignal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "accounts.yaml")
	writeFile(t, path, accountsYAML("key-1", "one.test"))
	cfg := loadConfig(t, map[string]string{"MAILSINK_ACCOUNTS_FILE": path, "MAILSINK_ACCOUNTS_POLL_INTERVAL": "0"})
	logs := &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	started := make(chan *app.App, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- app.Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), hup, func(a *app.App) { started <- a })
	}()
	a := <-started
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	if got := status(t, client, a, "key-1"); got != http.StatusOK {
		t.Fatalf("key-1 before the reload: %d", got)
	}
	c, err := net.Dial("tcp", a.SMTPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	smtpLine(t, c, r, "")
	smtpLine(t, c, r, "EHLO test")

	writeFile(t, path, accountsYAML("key-2", "two.test"))
	hup <- syscall.SIGHUP
	testenv.WaitFor(t, 10*time.Second, "key-2 to work after SIGHUP", func() bool {
		return status(t, client, a, "key-2") == http.StatusOK
	})
	if got := status(t, client, a, "key-1"); got != http.StatusUnauthorized {
		t.Errorf("key-1 after the reload: %d, want 401", got)
	}
	// The session opened before the reload routes by the new domains.
	for _, step := range []struct{ cmd, want string }{
		{"MAIL FROM:<s@example.com>", "250"}, {"RCPT TO:<u@one.test>", "550"}, {"RCPT TO:<u@two.test>", "250"},
		{"DATA", "354"}, {"Subject: after the reload\r\n\r\nhi\r\n.", "250"}, {"QUIT", "221"},
	} {
		if got := smtpLine(t, c, r, step.cmd); !strings.HasPrefix(got, step.want) {
			t.Errorf("%q on the session opened before the reload: %q, want %s", step.cmd, got, step.want)
		}
	}

	writeFile(t, path, "accounts:\n  - slug: acme\n    name: Acme\n    apiKeys: [key-3]\n    domain: [three.test]\n")
	hup <- syscall.SIGHUP
	testenv.WaitFor(t, 10*time.Second, "the refusal in the log", func() bool {
		return strings.Contains(logs.String(), "accounts file refused")
	})
	if !strings.Contains(logs.String(), "line 5: accounts[0].domain: unknown key") {
		t.Errorf("the refusal does not name the line and key:\n%s", logs)
	}
	if got := status(t, client, a, "key-2"); got != http.StatusOK {
		t.Errorf("key-2 after a bad file: %d, want 200 (the old accounts stay)", got)
	}
	if got := status(t, client, a, "key-3"); got != http.StatusUnauthorized {
		t.Errorf("key-3 of the refused file: %d, want 401", got)
	}
}

// swapSecret puts content in force the way Kubernetes updates a mounted
// secret: a new directory, then the ..data symlink renamed over the old one.
func swapSecret(t *testing.T, dir, content string) {
	t.Helper()
	version, err := os.MkdirTemp(dir, "..version-")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(version, "accounts.yaml"), content)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// TestReloadOnChange checks that a change of the file's content, here a
// Kubernetes-style secret rotation, is put in force without a signal, and
// that a bad new file is refused and the old accounts stay.
func TestReloadOnChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	swapSecret(t, dir, accountsYAML("key-1", "one.test"))
	path := filepath.Join(dir, "accounts.yaml")
	if err := os.Symlink(filepath.Join("..data", "accounts.yaml"), path); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, map[string]string{"MAILSINK_ACCOUNTS_FILE": path, "MAILSINK_ACCOUNTS_POLL_INTERVAL": "20ms"})
	logs := &testenv.SyncBuffer{}
	a, err := app.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	client := &http.Client{}

	swapSecret(t, dir, accountsYAML("key-2", "two.test"))
	testenv.WaitFor(t, 10*time.Second, "key-2 to work after the rotation", func() bool {
		return status(t, client, a, "key-2") == http.StatusOK
	})
	if got := status(t, client, a, "key-1"); got != http.StatusUnauthorized {
		t.Errorf("key-1 after the rotation: %d, want 401", got)
	}

	swapSecret(t, dir, "accounts:\n  - slug: acme\n    name: Acme\n    apiKeys: key-3\n")
	testenv.WaitFor(t, 10*time.Second, "the refusal in the log", func() bool {
		return strings.Contains(logs.String(), "accounts file refused")
	})
	if got := status(t, client, a, "key-2"); got != http.StatusOK {
		t.Errorf("key-2 after a bad file: %d, want 200", got)
	}

	swapSecret(t, dir, accountsYAML("key-4", "four.test"))
	testenv.WaitFor(t, 10*time.Second, "key-4 to work after a good file again", func() bool {
		return status(t, client, a, "key-4") == http.StatusOK
	})
	// The same bad content is refused once, not at every poll.
	if n := strings.Count(logs.String(), "accounts file refused"); n != 1 {
		t.Errorf("the bad file was refused %d times, want once:\n%s", n, logs)
	}
}

// TestWaitForStore starts on a Redis that is not there yet: WaitForStore
// says what it waits for, then returns once Redis answers. The port is one
// the system gave out and took back, so another test may listen there
// meanwhile; the attempt is then made again on another port.
func TestWaitForStore(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	for range 5 {
		if waitForStore(t) {
			return
		}
	}
	t.Fatal("five ports in a row were taken before redis-server could listen on them")
}

// waitForStore makes one attempt of TestWaitForStore; it reports false when
// redis-server could not listen on the port because something else does.
func waitForStore(t *testing.T) bool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	cfg := loadConfig(t, map[string]string{"MAILSINK_REDIS_URL": url, "MAILSINK_API_KEY": "k"})
	a, err := app.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(&testenv.SyncBuffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	if want := fmt.Sprintf("Redis at 127.0.0.1:%d", port); a.StoreName() != want {
		t.Errorf("StoreName = %q, want %q", a.StoreName(), want)
	}

	waiting := make(chan error, 10)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- a.WaitForStore(ctx, 50*time.Millisecond, func(err error) { waiting <- err })
	}()
	select {
	case err := <-waiting:
		t.Logf("waiting: %v", err)
	case err := <-done:
		t.Fatalf("WaitForStore returned %v before Redis was started", err)
	case <-time.After(30 * time.Second):
		t.Fatal("WaitForStore did not report what it waits for")
	}
	redis := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	out, err := redis.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	// redis-server logs that it is ready, or why it is not and exits; its
	// log is read to the end before Wait.
	ready := make(chan bool, 1)
	logged := make(chan string, 1)
	go func() {
		var log strings.Builder
		lines := bufio.NewScanner(out)
		said := false
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			if !said && strings.Contains(lines.Text(), "Ready to accept connections") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
		logged <- log.String()
	}()
	defer func() {
		redis.Process.Kill()
		<-logged
		redis.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			log := <-logged
			logged <- log
			if strings.Contains(log, "Address already in use") {
				t.Logf("port %d was taken before redis-server could listen; trying another", port)
				return false
			}
			t.Fatalf("redis-server did not start:\n%s", log)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("redis-server neither got ready nor exited")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitForStore: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitForStore did not return once Redis was up")
	}
	return true
}
