package config

import (
	"os"
	"strings"
	"testing"
)

func TestPProfAddr(t *testing.T) {
	for _, tc := range []struct {
		value, want, err string
	}{
		{"", "", ""},
		{"127.0.0.1:0", "127.0.0.1:0", ""},
		{"localhost:6060", "localhost:6060", ""},
		{"6060", "", "MAILSINK_PPROF_ADDR"},
		{"example.com:6060", "", "MAILSINK_PPROF_ADDR"},
	} {
		env := map[string]string{"MAILSINK_API_KEY": "k", "MAILSINK_PPROF_ADDR": tc.value}
		cfg, err := Load(func(k string) string { return env[k] }, os.ReadFile)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("MAILSINK_PPROF_ADDR=%q: got error %v, want one naming %s", tc.value, err, tc.err)
			}
		case err != nil:
			t.Errorf("MAILSINK_PPROF_ADDR=%q: %v", tc.value, err)
		case cfg.PProfAddr != tc.want:
			t.Errorf("MAILSINK_PPROF_ADDR=%q: PProfAddr = %q, want %q", tc.value, cfg.PProfAddr, tc.want)
		}
	}
}
