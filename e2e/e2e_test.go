package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/client"
	"github.com/mailsink/mailsink/internal/testenv"
)

func (p *process) env() *testenv.Env { return &testenv.Env{BaseURL: p.HTTP, SMTP: p.SMTP} }

// sendOne delivers one message over a new SMTP connection.
func sendOne(addr, from, to, raw string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SendMail(from, []string{to}, strings.NewReader(raw)); err != nil {
		return err
	}
	return c.Quit()
}

// TestAutomationPattern follows the docs' automation pattern against the binary on
// the embedded store with the generated key, with the Go client: send over
// SMTP, wait for the email to the address, read its code, get the detail,
// patch, delete.
func TestAutomationPattern(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir())
	if p.APIKey == "" {
		t.Fatalf("no generated key printed:\n%s", p.Output())
	}
	c := client.New(p.HTTP, p.APIKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw := "From: App <noreply@app.example>\r\nTo: new-user@example.com\r\nSubject: Confirm your account\r\n\r\n" +
		"Your code is 314159.\r\n"
	if err := sendOne(p.SMTP, "noreply@app.example", "new-user@example.com", raw); err != nil {
		t.Fatal(err)
	}
	email, err := c.Wait(ctx, client.Filter{Recipient: "new-user@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if codes, err := c.Codes(ctx, email.ID); err != nil || len(codes) != 1 || codes[0] != "314159" {
		t.Errorf("codes = %q, %v; want [314159]", codes, err)
	}
	detail, err := c.Get(ctx, email.ID)
	if err != nil || detail.Body == nil || detail.Body.Text == nil || !strings.Contains(*detail.Body.Text, "314159") ||
		detail.Subject == nil || *detail.Subject != "Confirm your account" {
		t.Fatalf("detail = %+v, %v", detail, err)
	}
	if _, err := c.Update(ctx, email.ID, client.Update{Status: "processed", Labels: []string{"signup"}}); err != nil {
		t.Fatalf("patch: %v", err)
	}
	if err := c.Delete(ctx, email.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Get(ctx, email.ID); !client.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want 404", err)
	}
}

// TestBadSettingsStopStartup checks that a setting that does not parse
// stops mailsink with a message naming the variable.
func TestBadSettingsStopStartup(t *testing.T) {
	t.Parallel()
	tests := []struct{ env, name string }{
		{"MAILSINK_HTTP_ADDR=nonsense", "MAILSINK_HTTP_ADDR"},
		{"MAILSINK_SMTP_ADDR=127.0.0.1:99999", "MAILSINK_SMTP_ADDR"},
		{"MAILSINK_MAX_MESSAGE_BYTES=-5", "MAILSINK_MAX_MESSAGE_BYTES"},
		{"MAILSINK_ACCOUNTS_FILE=/nonexistent/accounts.yaml", "MAILSINK_ACCOUNTS_FILE"},
		{"MAILSINK_SMTP_AUTH_ALLOW_INSECURE=maybe", "MAILSINK_SMTP_AUTH_ALLOW_INSECURE"},
		{"MAILSINK_REDIS_URL=redis://127.0.0.1:6379/0 MAILSINK_REDIS_CLUSTER=127.0.0.1:7000", "MAILSINK_REDIS_URL and MAILSINK_REDIS_CLUSTER are both set"},
	}
	for _, tt := range tests {
		cmd := execMailsink(t, append([]string{"MAILSINK_DATA_DIR=" + t.TempDir()}, strings.Fields(tt.env)...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.name) {
			t.Errorf("%s: err %v, output %q; want a failure naming %s", tt.env, err, out, tt.name)
		}
	}
}

// TestUnknownVariableIsReported: a MAILSINK_ variable that is no setting
// does not pass in silence; mailsink starts, and says what was likely meant.
func TestUnknownVariableIsReported(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir(), "MAILSINK_API_KEY=k", "MAILSINK_SMTP_PORT=2525")
	p.kill()
	out := p.Output()
	if !strings.Contains(out, `level=WARN msg="not a setting, ignored" variable=MAILSINK_SMTP_PORT hint="did you mean MAILSINK_SMTP_ADDR?`) {
		t.Errorf("no warning about MAILSINK_SMTP_PORT:\n%s", out)
	}
}

// TestAccountsFile starts the binary with an accounts file and checks keys,
// digests and domain routing.
func TestAccountsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	accounts := filepath.Join(dir, "accounts.yaml")
	// sha256("digest-key")
	yaml := `accounts:
  - slug: web
    name: Web team
    apiKeys: [web-key, "sha256:` + sha256hex("digest-key") + `"]
    domains: [web.test]
  - slug: mobile
    name: Mobile team
    id: mobile-account
    apiKeys: [mobile-key]
    domains: [mobile.test]
`
	if err := os.WriteFile(accounts, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "MAILSINK_DATA_DIR="+filepath.Join(dir, "data"), "MAILSINK_ACCOUNTS_FILE="+accounts)
	if p.APIKey != "" {
		t.Errorf("a key was generated although an accounts file is set")
	}
	raw := "From: a@example.com\r\nSubject: x\r\n\r\nx\r\n"
	if err := sendOne(p.SMTP, "a@example.com", "u@web.test", raw); err != nil {
		t.Fatal(err)
	}
	if err := sendOne(p.SMTP, "a@example.com", "u@mobile.test", raw); err != nil {
		t.Fatal(err)
	}
	err := sendOne(p.SMTP, "a@example.com", "u@other.test", raw)
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 550 {
		t.Errorf("unroutable recipient: %v, want 550", err)
	}
	ctx := context.Background()
	for _, tt := range []struct{ key, rcpt, account string }{
		{"web-key", "u@web.test", "web"}, {"digest-key", "u@web.test", "web"}, {"mobile-key", "u@mobile.test", "mobile"},
	} {
		items, err := client.New(p.HTTP, tt.key).List(ctx, client.ListOptions{})
		if err != nil || len(items) != 1 {
			t.Fatalf("%s sees %d emails (%v), want 1", tt.key, len(items), err)
		}
		if it := items[0]; it.Recipient != tt.rcpt || it.Account == nil || it.Account.Slug != tt.account {
			t.Errorf("%s sees %+v", tt.key, it)
		}
	}
	items, err := client.New(p.HTTP, "mobile-key").List(ctx, client.ListOptions{})
	if err != nil || len(items) != 1 || items[0].Account.ID != "mobile-account" {
		t.Errorf("mobile-key lists %+v, %v; want the account id mobile-account", items, err)
	}
	var apiErr *client.Error
	if _, err := client.New(p.HTTP, "no-such-key").List(ctx, client.ListOptions{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("an unknown key lists: %v, want 401", err)
	}
}

// TestCrashKeepsAcknowledged sends over SMTP from several connections,
// kills mailsink with SIGKILL in the middle, restarts it on the same data
// directory, and checks that every message that got a 250 is stored.
func TestCrashKeepsAcknowledged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"MAILSINK_DATA_DIR=" + dir, "MAILSINK_API_KEY=crash-key"}
	p := startProcess(t, env...)

	var (
		mu      sync.Mutex
		acked   []string
		sent    atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		reached = make(chan struct{})
		once    sync.Once
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				token := fmt.Sprintf("crash-%d-%d", w, i)
				sent.Add(1)
				raw := "From: app@example.com\r\nTo: crash@example.com\r\nSubject: " + token + "\r\n\r\nbody\r\n"
				if err := sendOne(p.SMTP, "app@example.com", "crash@example.com", raw); err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked = append(acked, token)
				if len(acked) >= 200 {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
			}
		}(w)
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("200 messages were not acknowledged in 60s")
	}
	p.kill() // SIGKILL while the senders are still sending
	close(stop)
	wg.Wait()

	p2 := startProcess(t, env...)
	e := p2.env()
	stored := map[string]bool{}
	for offset := 0; ; offset += 100 {
		items := e.Do(t, http.MethodGet, fmt.Sprintf("/v1/emails?limit=100&offset=%d", offset), "crash-key", nil).JSON(t)["items"].([]any)
		for _, it := range items {
			stored[it.(map[string]any)["subject"].(string)] = true
		}
		if len(items) < 100 {
			break
		}
	}
	lost := 0
	for _, token := range acked {
		if !stored[token] {
			lost++
			t.Errorf("acknowledged message %s is lost", token)
		}
	}
	t.Logf("crash test: sent %d, acknowledged %d, stored after restart %d, lost %d", sent.Load(), len(acked), len(stored), lost)
	figures("crash test (SIGKILL, embedded store): sent %d, acknowledged %d, stored %d, lost %d", sent.Load(), len(acked), len(stored), lost)
}

// TestMemoryKeepsNothing runs mailsink with MAILSINK_DATA_DIR=:memory:
// twice in one working directory: the first keeps a message until it is
// killed, the second starts empty with another key, and neither writes a
// file.
func TestMemoryKeepsNothing(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	count := func(p *process) float64 {
		t.Helper()
		return p.env().Do(t, http.MethodGet, "/v1/emails/count", p.APIKey, nil).JSON(t)["count"].(float64)
	}
	first := startProcessIn(t, wd, "MAILSINK_DATA_DIR=:memory:", "MAILSINK_API_KEY=")
	if first.APIKey == "" || !strings.Contains(first.Output(), "nothing survives a restart") {
		t.Fatalf("the banner does not print a key or say nothing survives:\n%s", first.Output())
	}
	if err := sendOne(first.SMTP, "app@example.com", "r@example.com", "Subject: kept in memory\r\n\r\nbody\r\n"); err != nil {
		t.Fatal(err)
	}
	if n := count(first); n != 1 {
		t.Fatalf("count after one message: %v, want 1", n)
	}
	first.kill()
	second := startProcessIn(t, wd, "MAILSINK_DATA_DIR=:memory:", "MAILSINK_API_KEY=")
	if second.APIKey == "" || second.APIKey == first.APIKey {
		t.Errorf("the second start's key %q; want a new one", second.APIKey)
	}
	if n := count(second); n != 0 {
		t.Errorf("count after a restart: %v, want 0", n)
	}
	if entries, err := os.ReadDir(wd); err != nil || len(entries) != 0 {
		t.Errorf("the working directory holds %v (%v); want nothing written", entries, err)
	}
}

// TestHealthcheckCommand checks `mailsink healthcheck`, which the compose
// file uses: 0 while the service is ready, 1 once it is gone.
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir())
	addr := strings.TrimPrefix(p.HTTP, "http://")
	check := func() int {
		cmd := exec.Command(binary, "healthcheck")
		cmd.Env = append(os.Environ(), "MAILSINK_HTTP_ADDR="+addr)
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode()
			}
			t.Fatal(err)
		}
		return 0
	}
	if code := check(); code != 0 {
		t.Fatalf("healthcheck of a running mailsink exited %d", code)
	}
	p.kill()
	if code := check(); code != 1 {
		t.Errorf("healthcheck of a stopped mailsink exited %d, want 1", code)
	}
}

// TestLogsKeepSecretsOut sends a message and API calls with keys, right and
// wrong, and checks the log lines: one per SMTP message and HTTP request,
// JSON when asked, and never a key, a password or a message body.
func TestLogsKeepSecretsOut(t *testing.T) {
	t.Parallel()
	p := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir(), "MAILSINK_API_KEY=log-secret-key", "MAILSINK_LOG_FORMAT=json")
	const body = "body-secret-314159"
	if err := sendOne(p.SMTP, "app@example.com", "logs@example.com", "Subject: hi\r\n\r\n"+body+"\r\n"); err != nil {
		t.Fatal(err)
	}
	e := p.env()
	e.Do(t, http.MethodGet, "/v1/emails", "log-secret-key", nil)
	e.Do(t, http.MethodGet, "/v1/emails", "wrong-secret-key", nil)
	c, err := smtp.Dial(p.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	c.Auth(sasl.NewPlainClient("", "user", "smtp-secret-password"))
	c.Close()
	// The process's stderr is read whole when it exits.
	p.kill()
	<-p.exited
	out := p.Output()
	smtpLines := strings.Count(out, `"msg":"smtp message"`)
	if httpLines := strings.Count(out, `"msg":"http request"`); httpLines != 2 {
		t.Errorf("%d http request lines for 2 requests:\n%s", httpLines, out)
	}
	for _, secret := range []string{"log-secret-key", "wrong-secret-key", "smtp-secret-password", body} {
		if strings.Contains(out, secret) {
			t.Errorf("the logs contain %q:\n%s", secret, out)
		}
	}
	if smtpLines != 1 {
		t.Errorf("%d smtp message lines for one message", smtpLines)
	}
}

// TestMemoryLimit checks the soft memory limit mailsink gives Go's garbage
// collector (go_gc_gomemlimit_bytes in /metrics): computed from the large
// transfers, the message size and the read budget, unless GOMEMLIMIT sets
// one; and its GOGC
// (go_gc_gogc_percent): 400 unless GOGC sets one.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	metric := func(p *process, name string) string {
		t.Helper()
		resp, err := http.Get(p.HTTP + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		t.Fatalf("/metrics has no %s:\n%s", name, body)
		return ""
	}
	computed := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir(), "GOMEMLIMIT=", "GOGC=", "MAILSINK_API_KEY=k",
		"MAILSINK_SMTP_MAX_LARGE_TRANSFERS=3", "MAILSINK_MAX_MESSAGE_BYTES=10485760", "MAILSINK_READ_BUDGET_BYTES=16777216")
	// waitLimit waits until the limit is between least and most MiB.
	waitLimit := func(least, most float64, why string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		got := ""
		for time.Now().Before(deadline) {
			got = metric(computed, "go_gc_gomemlimit_bytes")
			if v, err := strconv.ParseFloat(got, 64); err == nil && v >= least*(1<<20) && v <= most*(1<<20) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: go_gc_gomemlimit_bytes %s, want %.0f to %.0f MiB", why, got, least, most)
	}
	// At rest: the floor, 64 MiB (the live heap and the 32 MiB of headroom
	// are under it).
	waitLimit(64, 64, "at rest")
	if got, want := metric(computed, "go_gc_gogc_percent"), "400"; got != want {
		t.Errorf("default GOGC: go_gc_gogc_percent %s, want %s", got, want)
	}
	// While a large message arrives: the worst case, 256 MiB + 3 transfers
	// x 3 x 10 MiB + the read budget, 16 MiB = 362 MiB; after it, the
	// floor again (the limit moves only by more than a sixteenth, so a
	// read finishing just then may leave it a little above).
	c, err := smtp.Dial(computed.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("app@example.com", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("large@example.com", nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "Subject: large\r\n\r\n")
	line := strings.Repeat("x", 998) + "\r\n"
	for range 2 << 10 { // 2 MiB: past the first MiB, the message takes a turn
		fmt.Fprint(w, line)
	}
	waitLimit(362, 362, "during a large message")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	waitLimit(64, 68, "after the large message")
	chosen := startProcess(t, "MAILSINK_DATA_DIR="+t.TempDir(), "GOMEMLIMIT=300MiB", "GOGC=150")
	if got, want := metric(chosen, "go_gc_gomemlimit_bytes"), "3.145728e+08"; got != want {
		t.Errorf("with GOMEMLIMIT=300MiB: go_gc_gomemlimit_bytes %s, want %s", got, want)
	}
	if got, want := metric(chosen, "go_gc_gogc_percent"), "150"; got != want {
		t.Errorf("with GOGC=150: go_gc_gogc_percent %s, want %s", got, want)
	}
}
