package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/app"
	"github.com/mailsink/mailsink/internal/testenv"
)

// TestHelpListsEverySetting checks that --help, help and serve --help print
// every setting of config.Settings with its default.
func TestHelpListsEverySetting(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"serve", "--help"}} {
		var out bytes.Buffer
		if code := run(args, &out, io.Discard); code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, s := range config.Settings() {
			def := s.Default
			if def == "" {
				def = "unset"
			}
			if !strings.Contains(out.String(), s.Name+" (default: "+def+")") {
				t.Errorf("%v does not list %s (default: %s)", args, s.Name, def)
			}
		}
		// The help is plain text: no Markdown of the docs' table.
		if help := out.String(); strings.ContainsAny(help, "`") || strings.Contains(help, "](") {
			t.Errorf("%v prints Markdown: %s", args, help)
		}
		for _, cmd := range []string{"serve", "healthcheck", "mcp", "version"} {
			if !strings.Contains(strings.SplitN(out.String(), "\n", 2)[0], cmd) {
				t.Errorf("%v: the usage line does not name %s", args, cmd)
			}
		}
	}
	if code := run([]string{"serve", "extra"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("serve with an argument: exit %d, want 2", code)
	}
}

// TestBanner starts mailsink twice on one data directory without a key: the
// first banner prints the generated key, the second only where it is kept;
// both print the dashboard and end with "mailsink is ready".
func TestBanner(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"MAILSINK_DATA_DIR": dir, "MAILSINK_HTTP_ADDR": "127.0.0.1:0", "MAILSINK_SMTP_ADDR": "127.0.0.1:0"}
	keyLine := regexp.MustCompile(`(?m)API key of the default account.*: (\S+)$`)
	var firstKey string
	for i, want := range []string{"generated", "kept"} {
		cfg, err := config.Load(func(k string) string { return env[k] }, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		generated, err := cfg.UseKeyFile()
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		a, err := app.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		banner(context.Background(), &out, a, cfg, generated, nil)
		a.Shutdown(context.Background())
		text := out.String()
		if !strings.Contains(text, "  Dashboard http://"+a.HTTPAddr().String()+"/") || !strings.HasSuffix(text, "mailsink is ready\n") {
			t.Errorf("start %d: banner without the dashboard or not ready:\n%s", i+1, text)
		}
		m := keyLine.FindStringSubmatch(text)
		// The start that makes the key up links the dashboard with it, in
		// the URL fragment; later starts never print the key.
		signIn := m != nil && strings.Contains(text, "  Dashboard http://"+a.HTTPAddr().String()+"/#key="+m[1]+"\n")
		if (want == "generated") != signIn {
			t.Errorf("start %d (%s): dashboard sign-in link with the key = %v:\n%s", i+1, want, signIn, text)
		}
		switch want {
		case "generated":
			if m == nil {
				t.Fatalf("the first start printed no key:\n%s", text)
			}
			firstKey = m[1]
		case "kept":
			if m != nil || strings.Contains(text, firstKey) {
				t.Errorf("the second start printed the key:\n%s", text)
			}
			if !strings.Contains(text, filepath.Join(dir, "api-key")) {
				t.Errorf("the second start does not say where the key is kept:\n%s", text)
			}
		}
		if strings.Contains(logs.String(), firstKey) {
			t.Errorf("the key is in the logs:\n%s", logs.String())
		}
	}
}

// TestServeReloadsOnSIGHUP runs serve in this process, sends the process
// SIGHUP after a change of the accounts file, checks that the new key
// works, then stops serve with SIGINT.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	accounts := filepath.Join(dir, "accounts.yaml")
	write := func(key string) {
		t.Helper()
		if err := os.WriteFile(accounts, []byte("accounts: [{slug: a, name: A, apiKeys: ["+key+"]}]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("key-1")
	for k, v := range map[string]string{"MAILSINK_DATA_DIR": dir, "MAILSINK_HTTP_ADDR": "127.0.0.1:0", "MAILSINK_SMTP_ADDR": "127.0.0.1:0",
		"MAILSINK_ACCOUNTS_FILE": accounts, "MAILSINK_ACCOUNTS_POLL_INTERVAL": "0", "MAILSINK_API_KEY": ""} {
		t.Setenv(k, v)
	}
	var stdout, stderr testenv.SyncBuffer
	code := make(chan int, 1)
	go func() { code <- serve(&stdout, &stderr) }()
	testenv.WaitFor(t, 30*time.Second, "mailsink is ready", func() bool { return strings.Contains(stdout.String(), "mailsink is ready") })
	base := regexp.MustCompile(`HTTP  (http://\S+)`).FindStringSubmatch(stdout.String())[1]
	get := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/emails", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("key-1"); got != http.StatusOK {
		t.Fatalf("key-1: %d", got)
	}
	write("key-2")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "key-2 to work after SIGHUP", func() bool { return get("key-2") == http.StatusOK })
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 0 {
		t.Errorf("serve exited %d:\n%s", c, stderr.String())
	}
	if !strings.Contains(stderr.String(), "accounts file reloaded") {
		t.Errorf("no log line of the reload:\n%s", stderr.String())
	}
}

// TestBannerInMemory starts mailsink twice with MAILSINK_DATA_DIR=:memory:
// and a TLS_AUTO certificate: each banner says nothing survives a restart,
// prints a key made for the run (another at each start) and a certificate
// kept in memory, and nothing is written to the working directory.
func TestBannerInMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	env := map[string]string{"MAILSINK_DATA_DIR": ":memory:", "MAILSINK_HTTP_ADDR": "127.0.0.1:0", "MAILSINK_SMTP_ADDR": "127.0.0.1:0",
		"MAILSINK_SMTP_TLS_AUTO": "mailsink.test"}
	keyLine := regexp.MustCompile(`(?m)API key of the default account.*: (\S+)$`)
	fingerprint := regexp.MustCompile(`SHA-256 fingerprint:\n\s+(\S+)`)
	seen := map[string]bool{}
	for i := range 2 {
		cfg, err := config.Load(func(k string) string { return env[k] }, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		generated, err := cfg.UseKeyFile()
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		banner(context.Background(), &out, a, cfg, generated, nil)
		a.Shutdown(context.Background())
		text := out.String()
		key, fp := keyLine.FindStringSubmatch(text), fingerprint.FindStringSubmatch(text)
		if key == nil || fp == nil || !strings.Contains(text, "nothing survives a restart") ||
			!strings.Contains(text, "kept nowhere") || !strings.Contains(text, "TLS certificate made for this run, kept in memory") {
			t.Fatalf("start %d: the banner does not say what is kept:\n%s", i+1, text)
		}
		if seen[key[1]] || seen[fp[1]] {
			t.Errorf("start %d has the first start's key or certificate:\n%s", i+1, text)
		}
		seen[key[1]], seen[fp[1]] = true, true
	}
	if entries, err := os.ReadDir("."); err != nil || len(entries) != 0 {
		t.Errorf("the working directory holds %v (%v); want nothing written", entries, err)
	}
}

// TestVersion: `mailsink version` reports the stamped version, else what Go
// recorded of the build: the module version (go install of a tag, go build
// in a checkout) or the commit, never a made-up "dev".
func TestVersion(t *testing.T) {
	info := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/mailsink/mailsink", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"v1.4.0", info("(devel)"), "v1.4.0"},
		{"", info("v1.4.0"), "v1.4.0"},
		{"", info("v0.0.0-20261127170717-ba2469bbd112+dirty", "vcs.revision", "ba2469bbd1124d6e93926c56add29130e112822f"), "v0.0.0-20261127170717-ba2469bbd112+dirty"},
		{"", info("(devel)", "vcs.revision", "ba2469bbd1124d6e93926c56add29130e112822f", "vcs.modified", "true"), "ba2469bbd112-dirty"},
		{"", info("(devel)", "vcs.revision", "ba2469bbd1124d6e93926c56add29130e112822f", "vcs.modified", "false"), "ba2469bbd112"},
		{"", info("(devel)"), "devel"},
		{"", nil, "devel"},
	} {
		if got := versionOf(tc.stamped, tc.info); got != tc.want {
			t.Errorf("versionOf(%q, %+v) = %q, want %q", tc.stamped, tc.info, got, tc.want)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, io.Discard); code != 0 || !strings.HasPrefix(out.String(), "mailsink ") || strings.Contains(out.String(), " dev\n") {
		t.Errorf("mailsink version: exit %d, %q", code, out.String())
	}
}

// TestBannerNamesTheBoundAddresses: a listener on every interface is named
// as bound, not as 127.0.0.1; the links still reach it from this host.
func TestBannerNamesTheBoundAddresses(t *testing.T) {
	env := map[string]string{"MAILSINK_DATA_DIR": t.TempDir(), "MAILSINK_HTTP_ADDR": ":0", "MAILSINK_SMTP_ADDR": "127.0.0.1:0", "MAILSINK_API_KEY": "k"}
	cfg, err := config.Load(func(k string) string { return env[k] }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	var out bytes.Buffer
	banner(context.Background(), &out, a, cfg, "", nil)
	port := a.HTTPAddr().(*net.TCPAddr).Port
	for _, want := range []string{
		"  SMTP  " + a.SMTPAddr().String() + "\n",
		fmt.Sprintf("  HTTP  %s (all interfaces)\n", a.HTTPAddr()),
		fmt.Sprintf("  Dashboard http://127.0.0.1:%d/\n", port),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the banner has no %q:\n%s", want, out.String())
		}
	}
}
