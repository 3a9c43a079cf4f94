package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEverySettingRefusesNonsense sets each setting that is parsed (not a
// plain text or path) to a value no parser accepts, and checks that Load
// fails naming that variable.
func TestEverySettingRefusesNonsense(t *testing.T) {
	text := map[string]bool{"MAILSINK_DATA_DIR": true, "MAILSINK_REDIS_PREFIX": true, "MAILSINK_API_KEY": true}
	for _, s := range Settings() {
		if text[s.Name] {
			continue
		}
		value := "no such value:"
		if s.Name == "MAILSINK_ACCOUNTS_FILE" {
			value = "/nonexistent/accounts.yaml"
		}
		_, err := load(t, map[string]string{s.Name: value})
		if err == nil || !strings.Contains(err.Error(), s.Name) {
			t.Errorf("%s=%q: error %v, want one naming %s", s.Name, value, err, s.Name)
		}
	}
}

func TestEveryBadValueIsReported(t *testing.T) {
	_, err := load(t, map[string]string{"MAILSINK_HTTP_ADDR": "x", "MAILSINK_STORE_TIMEOUT": "0"})
	if err == nil || !strings.Contains(err.Error(), "MAILSINK_HTTP_ADDR") || !strings.Contains(err.Error(), "MAILSINK_STORE_TIMEOUT") {
		t.Errorf("two bad values: %v, want both named", err)
	}
}

func TestNewSettings(t *testing.T) {
	c, err := load(t, map[string]string{"MAILSINK_API_KEY": "k", "MAILSINK_STORE_TIMEOUT": "2s",
		"MAILSINK_SSE_HEARTBEAT": "3s", "MAILSINK_SSE_WRITE_TIMEOUT": "4s", "MAILSINK_ACCOUNTS_POLL_INTERVAL": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Timeout != 2*time.Second || c.HTTP.SSEHeartbeat != 3*time.Second || c.HTTP.SSEWriteTimeout != 4*time.Second || c.AccountsPollInterval != 0 {
		t.Errorf("got %v %v %v %v, want 2s 3s 4s 0", c.Store.Timeout, c.HTTP.SSEHeartbeat, c.HTTP.SSEWriteTimeout, c.AccountsPollInterval)
	}
	if got := Value(func(string) string { return "" }, "MAILSINK_HTTP_ADDR"); got != ":8025" {
		t.Errorf("Value of an unset MAILSINK_HTTP_ADDR = %q, want :8025", got)
	}
}

func TestAPIKeyWithAccountsFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(path, []byte("accounts: [{slug: a, name: A, apiKeys: [k]}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, map[string]string{"MAILSINK_ACCOUNTS_FILE": path, "MAILSINK_API_KEY": "k"})
	if err == nil || !strings.Contains(err.Error(), "drop MAILSINK_API_KEY") {
		t.Errorf("both set: %v, want an error saying to drop MAILSINK_API_KEY", err)
	}
	c, err := load(t, map[string]string{"MAILSINK_ACCOUNTS_FILE": path})
	if err != nil || len(c.Accounts) != 1 || c.KeyFile != "" || c.AccountsFile != path {
		t.Errorf("accounts file alone: %+v, %v", c, err)
	}
}

// TestKeyFile checks the default account's key: made once with mode 0600
// (the data directory too), then reused; an empty file is an error.
func TestKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	c, err := load(t, map[string]string{"MAILSINK_DATA_DIR": dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "api-key"); c.KeyFile != want || c.Accounts != nil {
		t.Fatalf("KeyFile = %q, accounts %v; want %q and none yet", c.KeyFile, c.Accounts, want)
	}
	key, err := c.UseKeyFile()
	if err != nil || !strings.HasPrefix(key, "msk_") {
		t.Fatalf("first UseKeyFile = %q, %v; want a new key", key, err)
	}
	fi, err := os.Stat(c.KeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	if len(c.Accounts) != 1 || c.Accounts[0].KeyDigests[0] != Digest(key) {
		t.Errorf("default account %+v does not have the key", c.Accounts)
	}

	again, _ := load(t, map[string]string{"MAILSINK_DATA_DIR": dir})
	if k, err := again.UseKeyFile(); err != nil || k != "" {
		t.Errorf("second UseKeyFile = %q, %v; want the kept key, not a new one", k, err)
	}
	if again.Accounts[0].KeyDigests[0] != Digest(key) {
		t.Errorf("the second start has another key")
	}

	if err := os.WriteFile(c.KeyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	empty, _ := load(t, map[string]string{"MAILSINK_DATA_DIR": dir})
	if _, err := empty.UseKeyFile(); err == nil || !strings.Contains(err.Error(), "MAILSINK_DATA_DIR") {
		t.Errorf("empty key file: %v, want an error naming MAILSINK_DATA_DIR", err)
	}

	withKey, _ := load(t, map[string]string{"MAILSINK_DATA_DIR": filepath.Join(dir, "other"), "MAILSINK_API_KEY": "k"})
	if k, err := withKey.UseKeyFile(); k != "" || err != nil || withKey.KeyFile != "" {
		t.Errorf("with MAILSINK_API_KEY: %q, %v, KeyFile %q; want nothing done", k, err, withKey.KeyFile)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("with MAILSINK_API_KEY the data directory was made: %v", err)
	}
}

// TestAccountsFileIsStrict checks that a misspelt key or a value of the
// wrong type is an error naming the line and the key, in YAML and JSON.
func TestAccountsFileIsStrict(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		want       []string
	}{
		{"misspelt key", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    domain: [a.test]\n",
			[]string{"line 5", "accounts[0].domain", "unknown key", "domains"}},
		{"misspelt top key", "acounts:\n  - slug: a\n", []string{"line 1", "acounts", "unknown key"}},
		{"string for list", "accounts:\n  - slug: a\n    name: A\n    apiKeys: k\n", []string{"line 4", "accounts[0].apiKeys", "must be a list"}},
		{"map for list", "accounts:\n  - slug: a\n    name: A\n    apiKeys:\n      k: v\n", []string{"line 5", "accounts[0].apiKeys", "not a map"}},
		{"list for string", "accounts:\n  - slug: a\n    name: [A]\n    apiKeys: [k]\n", []string{"line 3", "accounts[0].name", "single value"}},
		{"map for accounts", "accounts: {slug: a}\n", []string{"line 1", "accounts:", "list of accounts"}},
		{"JSON", `{"accounts": [{"slug": "a", "name": "A", "apiKeys": ["k"], "domian": ["x"]}]}`,
			[]string{"line 1", "accounts[0].domian", "unknown key"}},
		{"retention", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    retention: {maxAge: 1h, max: 3}\n",
			[]string{"line 5", `unknown field "max"`}},
		{"quota key", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    quota: {maxEmail: 3}\n",
			[]string{"line 5", "maxEmail", "unknown key"}},
		{"quota type", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    quota: {maxBytes: lots}\n",
			[]string{"line 5", "maxBytes"}},
		{"negative quota", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    quota: {maxEmails: -1}\n",
			[]string{"quota.maxEmails"}},
		// Syntax errors name the line at fault, not where its block began.
		{"key indented too little", "accounts:\n  - slug: a\n    name: A\n   apiKeys: [k]\n", []string{"not valid YAML", "line 4, column 4"}},
		{"key of the list's parent", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n  domains: [x.test]\n", []string{"line 5, column 3"}},
		{"list item out of line", "accounts:\n  - slug: a\n    name: A\n    apiKeys:\n      - k1\n     - k2\n", []string{"line 6, column 6"}},
		{"unclosed list", "accounts:\n  - slug: a\n    name: A\n    apiKeys: [secret-key\n    domains: [x.test]\n", []string{"line 5, column 5", "']'"}},
		{"tab", "accounts:\n  - slug: a\n    name: A\n\tapiKeys: [k]\n", []string{"line 4, column 1"}},
		{"unclosed quote", "accounts:\n  - slug: a\n    name: \"A\n    apiKeys: [k]\n", []string{"line 3, column 11"}},
	} {
		_, err := ParseAccounts([]byte(tt.file))
		if err != nil && strings.Contains(err.Error(), "secret-key") {
			t.Errorf("%s: the error repeats a key: %v", tt.name, err)
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to contain %q", tt.name, err, w)
			}
		}
	}
}

func TestAccountQuota(t *testing.T) {
	accs, err := ParseAccounts([]byte("accounts:\n  - slug: a\n    name: A\n    apiKeys: [k]\n    quota: {maxEmails: 5}\n  - slug: b\n    name: B\n    apiKeys: [k2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	def := Quota{MaxEmails: 100, MaxBytes: 1000}
	if got := def.For(accs[0]); got != (Quota{MaxEmails: 5, MaxBytes: 1000}) {
		t.Errorf("a's quota = %+v, want its maxEmails and the default bytes", got)
	}
	if got := def.For(accs[1]); got != def {
		t.Errorf("b's quota = %+v, want the default", got)
	}
}

// TestUnknownVariablesAreReported: a MAILSINK_ variable that is no setting
// is reported with the setting it likely means; settings and other
// programs' variables are not.
func TestUnknownVariablesAreReported(t *testing.T) {
	got := UnknownVariables([]string{
		"MAILSINK_SMTP_PORT=2525", "MAILSINK_HTTP_ADDR=:8025", "HOME=/root", "MAILSINK_TEST_REDIS_URL=redis://x",
		"MAILSINK_URL=http://127.0.0.1:8025", "MAILSINK_LOG_LEVLE=debug", "MAILSINK_COLOUR=blue", "MAILSINK_DATA_DIR",
	})
	want := []struct{ name, hint string }{
		{"MAILSINK_SMTP_PORT", "did you mean MAILSINK_SMTP_ADDR? it takes host:port (:1025 by default)"},
		{"MAILSINK_LOG_LEVLE", "did you mean MAILSINK_LOG_LEVEL?"},
		{"MAILSINK_COLOUR", "mailsink --help lists the settings"},
	}
	if len(got) != len(want) {
		t.Fatalf("UnknownVariables = %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || !strings.Contains(got[i].Hint, w.hint) {
			t.Errorf("%d: %+v, want %s with %q", i, got[i], w.name, w.hint)
		}
	}
}

func TestRedisURLAndClusterTogetherAreRefused(t *testing.T) {
	_, err := load(t, map[string]string{"MAILSINK_API_KEY": "k", "MAILSINK_REDIS_URL": "redis://127.0.0.1:6379/0",
		"MAILSINK_REDIS_CLUSTER": "127.0.0.1:7000"})
	if err == nil || !strings.Contains(err.Error(), "MAILSINK_REDIS_URL and MAILSINK_REDIS_CLUSTER are both set") {
		t.Errorf("both Redis settings: %v, want a refusal naming both", err)
	}
}

// The checks' servers are host:port with a name or an address.
func TestCheckServers(t *testing.T) {
	c, err := load(t, map[string]string{"MAILSINK_API_KEY": "k", "MAILSINK_SPAMD_ADDR": "spamd:783", "MAILSINK_DNS_RESOLVER": "[::1]:5353"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Checks.SpamdAddr != "spamd:783" || c.Checks.DNSResolver != "[::1]:5353" {
		t.Errorf("checks = %+v", c.Checks)
	}
	for _, bad := range []string{":783", "spamd", "spamd:0", "bad_host!:53"} {
		if _, err := load(t, map[string]string{"MAILSINK_API_KEY": "k", "MAILSINK_SPAMD_ADDR": bad}); err == nil {
			t.Errorf("MAILSINK_SPAMD_ADDR=%q was accepted", bad)
		}
	}
}

// TestKeyInMemory: with MAILSINK_DATA_DIR=:memory: the default account's
// key is made for the run and kept nowhere, a new one at each start.
func TestKeyInMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := load(t, map[string]string{"MAILSINK_DATA_DIR": ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Store.InMemory() || c.KeyFile != "" || c.Store.MemoryMaxBytes != 1<<30 {
		t.Fatalf("in memory: InMemory %v, KeyFile %q, MemoryMaxBytes %d; want true, none, 1 GiB",
			c.Store.InMemory(), c.KeyFile, c.Store.MemoryMaxBytes)
	}
	key, err := c.UseKeyFile()
	if err != nil || !strings.HasPrefix(key, "msk_") || len(c.Accounts) != 1 || c.Accounts[0].KeyDigests[0] != Digest(key) {
		t.Fatalf("UseKeyFile = %q, %v, accounts %+v; want a new key for the default account", key, err, c.Accounts)
	}
	again, _ := load(t, map[string]string{"MAILSINK_DATA_DIR": ":memory:"})
	if k, _ := again.UseKeyFile(); k == "" || k == key {
		t.Errorf("second start's key %q; want a new one", k)
	}
	if entries, err := os.ReadDir("."); err != nil || len(entries) != 0 {
		t.Errorf("the working directory holds %v (%v); want nothing written", entries, err)
	}
	withKey, _ := load(t, map[string]string{"MAILSINK_DATA_DIR": ":memory:", "MAILSINK_API_KEY": "k"})
	if k, err := withKey.UseKeyFile(); k != "" || err != nil {
		t.Errorf("with MAILSINK_API_KEY: %q, %v; want the given key used", k, err)
	}
}
