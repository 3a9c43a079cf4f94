package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/app"
	"github.com/mailsink/mailsink/config"
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
		if !strings.Contains(text, "  Dashboard http://"+a.HTTPAddr().String()+"/\n") || !strings.HasSuffix(text, "mailsink is ready\n") {
			t.Errorf("start %d: banner without the dashboard or not ready:\n%s", i+1, text)
		}
		m := keyLine.FindStringSubmatch(text)
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
