package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := load(t, map[string]string{"MAILSINK_API_KEY": "k"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"http addr", c.HTTP.Addr, ":8025"},
		{"smtp addr", c.SMTP.Addr, ":1025"},
		{"data dir", c.Store.DataDir, "./data"},
		{"max message", c.MaxMessageBytes, int64(26214400)},
		{"insecure auth", c.SMTP.AllowInsecureAuth, true},
		{"smtp max connections", c.SMTP.MaxConnections, 1000},
		{"smtp max connections per address", c.SMTP.MaxConnectionsPerAddress, 100},
		{"smtp max connections per network", c.SMTP.MaxConnectionsPerNetwork, 250},
		{"smtp limit loopback", c.SMTP.LimitLoopback, false},
		{"smtp max buffered bytes", c.SMTP.MaxBufferedBytes, int64(64 << 20)},
		{"smtp data timeout", c.SMTP.DataTimeout, 5 * time.Minute},
		{"held per account", c.HTTP.MaxHeldPerAccount, 100},
		{"read header timeout", c.HTTP.ReadHeaderTimeout, 10 * time.Second},
		{"max json", c.HTTP.MaxJSONBytes, int64(1 << 20)},
		{"auth failures", c.HTTP.AuthFailuresPerMinute, 60},
		{"key file", c.KeyFile, ""},
		{"store timeout", c.Store.Timeout, 30 * time.Second},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestBadValuesNameTheVariable checks that a value that does not parse stops
// start-up with an error that names its variable.
func TestBadValuesNameTheVariable(t *testing.T) {
	for name, value := range map[string]string{
		"MAILSINK_HTTP_ADDR":                "nope",
		"MAILSINK_SMTP_ADDR":                ":99999",
		"MAILSINK_MAX_MESSAGE_BYTES":        "-1",
		"MAILSINK_SMTP_AUTH_ALLOW_INSECURE": "maybe",
		"MAILSINK_SMTP_MAX_CONNECTIONS":     "0",
		"MAILSINK_SMTP_DATA_TIMEOUT":        "5",
		"MAILSINK_SMTP_READ_TIMEOUT":        "-1s",
		"MAILSINK_MAX_HELD_PER_ACCOUNT":     "x",
		"MAILSINK_HTTP_READ_HEADER_TIMEOUT": "soon",
		"MAILSINK_HTTP_MAX_JSON_BYTES":      "10",
		"MAILSINK_AUTH_FAILURES_PER_MINUTE": "-3",
		"MAILSINK_LOG_FORMAT":               "xml",
		"MAILSINK_REDIS_URL":                "http://x",
		"MAILSINK_REDIS_CLUSTER":            "a,b",
	} {
		_, err := load(t, map[string]string{name: value})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: error %v, want one naming %s", name, value, err, name)
		}
	}
	if _, err := load(t, map[string]string{"MAILSINK_ACCOUNTS_FILE": "/missing.yaml"}); err == nil || !strings.Contains(err.Error(), "MAILSINK_ACCOUNTS_FILE") {
		t.Errorf("unreadable accounts file: %v", err)
	}
}
