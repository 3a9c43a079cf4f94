package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, env map[string]string) (*Config, error) {
	t.Helper()
	return Load(func(k string) string { return env[k] }, os.ReadFile)
}

func TestRetentionDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Retention{MaxAge: 168 * time.Hour, MaxEmails: 0, Grace: 5 * time.Minute, Interval: time.Minute}
	if c.Retention != want {
		t.Errorf("Retention = %+v, want %+v", c.Retention, want)
	}
}

func TestRetentionEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env     map[string]string
		want    Retention
		wantErr string // the variable the error names
	}{
		{
			env:  map[string]string{"MAILSINK_RETENTION_MAX_AGE": "24h", "MAILSINK_RETENTION_MAX_EMAILS": "1000", "MAILSINK_RETENTION_GRACE": "1m", "MAILSINK_RETENTION_INTERVAL": "30s"},
			want: Retention{MaxAge: 24 * time.Hour, MaxEmails: 1000, Grace: time.Minute, Interval: 30 * time.Second},
		},
		{
			env:  map[string]string{"MAILSINK_RETENTION_MAX_AGE": "0", "MAILSINK_RETENTION_GRACE": "0s"},
			want: Retention{MaxAge: 0, Grace: 0, Interval: time.Minute},
		},
		{env: map[string]string{"MAILSINK_RETENTION_MAX_AGE": "7d"}, wantErr: "MAILSINK_RETENTION_MAX_AGE"},
		{env: map[string]string{"MAILSINK_RETENTION_MAX_AGE": "-1h"}, wantErr: "MAILSINK_RETENTION_MAX_AGE"},
		{env: map[string]string{"MAILSINK_RETENTION_MAX_EMAILS": "-1"}, wantErr: "MAILSINK_RETENTION_MAX_EMAILS"},
		{env: map[string]string{"MAILSINK_RETENTION_MAX_EMAILS": "1e3"}, wantErr: "MAILSINK_RETENTION_MAX_EMAILS"},
		{env: map[string]string{"MAILSINK_RETENTION_GRACE": "soon"}, wantErr: "MAILSINK_RETENTION_GRACE"},
		{env: map[string]string{"MAILSINK_RETENTION_INTERVAL": "0"}, wantErr: "MAILSINK_RETENTION_INTERVAL"},
		{env: map[string]string{"MAILSINK_RETENTION_INTERVAL": "10ms"}, wantErr: "MAILSINK_RETENTION_INTERVAL"},
	}
	for _, tt := range tests {
		c, err := load(t, tt.env)
		if tt.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr+":") {
				t.Errorf("Load(%v): got error %v, want one naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Load(%v): %v", tt.env, err)
			continue
		}
		if c.Retention != tt.want {
			t.Errorf("Load(%v): Retention = %+v, want %+v", tt.env, c.Retention, tt.want)
		}
	}
}

func TestAccountRetention(t *testing.T) {
	t.Parallel()
	accs, err := ParseAccounts([]byte(`
accounts:
  - slug: both
    name: Both
    apiKeys: [k1]
    retention: {maxAge: 24h, maxEmails: 1000}
  - slug: forever
    name: Forever
    apiKeys: [k2]
    retention:
      maxAge: 0
  - slug: default
    name: Default
    apiKeys: [k3]
  - slug: null-entry
    name: Empty entry
    apiKeys: [k4]
    retention: null
`))
	if err != nil {
		t.Fatal(err)
	}
	global := Retention{MaxAge: 168 * time.Hour, MaxEmails: 50}
	want := []struct {
		maxAge    time.Duration
		maxEmails int64
	}{{24 * time.Hour, 1000}, {0, 50}, {168 * time.Hour, 50}, {168 * time.Hour, 50}}
	for i, a := range accs {
		age, n := global.For(a)
		if age != want[i].maxAge || n != want[i].maxEmails {
			t.Errorf("account %s: For = %s, %d; want %s, %d", a.Slug, age, n, want[i].maxAge, want[i].maxEmails)
		}
	}

	// JSON works too.
	accs, err = ParseAccounts([]byte(`{"accounts": [{"slug": "j", "name": "J", "apiKeys": ["k"], "retention": {"maxEmails": 0, "maxAge": "90m"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if age, n := global.For(accs[0]); age != 90*time.Minute || n != 0 {
		t.Errorf("JSON account: For = %s, %d; want 90m, 0", age, n)
	}
}

func TestAccountRetentionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		retention string
		want      string // in the error
	}{
		{`{maxAge: 1d}`, `retention.maxAge "1d"`},
		{`{maxAge: -1h}`, `retention.maxAge "-1h"`},
		{`{maxAge: 86400}`, `retention.maxAge "86400"`},
		{`{maxEmails: -5}`, `retention.maxEmails "-5"`},
		{`{maxEmails: lots}`, `retention.maxEmails "lots"`},
		{`{maxEmails: 1.5}`, `retention.maxEmails "1.5"`},
		{`{maxEmails: }`, `retention.maxEmails (line 6) needs a value`},
		{`{maxage: 24h}`, `unknown field "maxage"`},
		{`{maxAge: [24h]}`, `retention.maxAge (line 6) needs a value`},
		{`24h`, `retention (line 6) must be a map`},
	}
	for _, tt := range tests {
		_, err := ParseAccounts([]byte(`
accounts:
  - slug: acme
    name: Acme
    apiKeys: [k]
    retention: ` + tt.retention + "\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `account "acme"`) {
			t.Errorf("retention %s: got error %v, want one about account \"acme\" containing %s", tt.retention, err, tt.want)
		}
	}

	// Through Load, the error names the variable.
	path := t.TempDir() + "/accounts.yaml"
	if err := os.WriteFile(path, []byte("accounts:\n  - {slug: a, name: A, apiKeys: [k], retention: {maxAge: week}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, map[string]string{"MAILSINK_ACCOUNTS_FILE": path}); err == nil || !strings.HasPrefix(err.Error(), "MAILSINK_ACCOUNTS_FILE") {
		t.Errorf("Load with a bad retention: got %v, want an error naming MAILSINK_ACCOUNTS_FILE", err)
	}
}
