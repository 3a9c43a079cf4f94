package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSignedPEM writes a self-signed certificate to a file and returns its
// path.
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"relay.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func parseRelayYAML(t *testing.T, relay string, env map[string]string) ([]Account, error) {
	t.Helper()
	doc := "accounts:\n  - slug: acme\n    name: Acme\n    apiKeys: [k]\n    relay: " + relay + "\n"
	return ParseAccountsWith([]byte(doc), func(k string) string { return env[k] }, os.ReadFile)
}

func TestAccountRelay(t *testing.T) {
	t.Parallel()
	ca := selfSignedPEM(t)
	accs, err := parseRelayYAML(t, fmt.Sprintf(`{host: smtp.example.com, port: 2525, tls: starttls, username: qa, passwordEnv: RELAY_PW,
      caFile: %q, from: release@acme.test, allowedRecipients: ['.*@example\.com', 'boss@acme\.test']}`, ca),
		map[string]string{"RELAY_PW": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	r := accs[0].Relay
	if r == nil {
		t.Fatal("the relay entry was not read")
	}
	if r.Addr() != "smtp.example.com:2525" || r.TLS != RelayStartTLS || r.Username != "qa" || r.Password.Reveal() != "s3cret" ||
		r.From != "release@acme.test" || r.RootCAs == nil {
		t.Errorf("relay = %+v", r)
	}
	for addr, want := range map[string]bool{
		"anyone@example.com":      true,
		"Anyone@EXAMPLE.com":      true, // addresses compare regardless of case
		"boss@acme.test":          true,
		"anyone@example.com.evil": false, // a pattern matches the whole address
		"x@notexample.com":        false,
		"boss@acme.test.example":  false,
		"other@acme.test":         false,
	} {
		if got := r.Allows(addr); got != want {
			t.Errorf("Allows(%q) = %v, want %v", addr, got, want)
		}
	}

	accs, err = parseRelayYAML(t, `{host: mail.test, tls: tls}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := accs[0].Relay; r.Port != 465 || r.Allows("a@mail.test") {
		t.Errorf("a relay without port or allowedRecipients: port %d (want 465), allows a@mail.test: %v (want false)", r.Port, r.Allows("a@mail.test"))
	}
	accs, err = parseRelayYAML(t, `{host: 127.0.0.1}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := accs[0].Relay; r.TLS != RelayStartTLS || r.Port != 587 {
		t.Errorf("tls and port default to starttls and 587, got %s and %d", r.TLS, r.Port)
	}
	accs, err = parseRelayYAML(t, `null`, nil)
	if err != nil || accs[0].Relay != nil {
		t.Errorf("relay: null gives relay %+v, error %v; want none", accs[0].Relay, err)
	}
}

func TestAccountRelayMistakesNameTheLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ relay, want string }{
		{`{port: 25}`, "relay (line 5) needs a host"},
		{`{host: a.test, hostname: b}`, "line 5: relay.hostname: unknown key; the keys here are host, port"},
		{`{host: a.test, tls: ssl}`, `relay.tls "ssl" (line 5) must be none, starttls or tls`},
		{`{host: a.test, port: 70000}`, `relay.port "70000" (line 5) is not a port`},
		{`{host: "a b"}`, "is not a host name"},
		{`{host: a.test, username: u}`, "has a username but no password"},
		{`{host: a.test, password: p}`, "has a password but no username"},
		{`{host: a.test, username: u, password: p, passwordEnv: PW}`, "has both password and passwordEnv"},
		{`{host: a.test, username: u, passwordEnv: UNSET_PW}`, `relay.passwordEnv (line 5): the environment variable "UNSET_PW" is not set`},
		{`{host: a.test, tls: none, username: u, password: p}`, "would cross the network in clear"},
		{`{host: a.test, caFile: /nonexistent/ca.pem}`, "relay.caFile (line 5): open /nonexistent/ca.pem"},
		{`{host: a.test, from: not-an-address}`, `relay.from "not-an-address" (line 5) is not an email address`},
		{`{host: a.test, allowedRecipients: '.*'}`, "relay.allowedRecipients (line 5) must be a list"},
		{`{host: a.test, allowedRecipients: ['(']}`, `relay.allowedRecipients (line 5): "(" is not a regular expression`},
		{`smtp.example.com`, "relay (line 5) must be a map"},
	} {
		_, err := parseRelayYAML(t, tc.relay, map[string]string{"PW": "set"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("relay: %s: error %v, want %q", tc.relay, err, tc.want)
		}
	}
	_, err := parseRelayYAML(t, "{host: a.test, caFile: "+os.Args[0]+"}", nil)
	if err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a caFile without certificates: error %v", err)
	}
}

func TestRelayPasswordNeverPrints(t *testing.T) {
	t.Parallel()
	accs, err := parseRelayYAML(t, `{host: a.test, username: qa, password: hunter2-secret}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("account", "relay", accs[0].Relay, "password", accs[0].Relay.Password)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("account", "account", accs[0])
	js, _ := json.Marshal(accs[0])
	for _, shown := range []string{
		fmt.Sprintf("%v", accs[0]), fmt.Sprintf("%+v", accs[0]), fmt.Sprintf("%#v", accs[0]), fmt.Sprint(accs[0].Relay.Password),
		logged.String(), string(js),
	} {
		if strings.Contains(shown, "hunter2") {
			t.Errorf("the relay password shows in %s", shown)
		}
	}
	if accs[0].Relay.Password.Reveal() != "hunter2-secret" {
		t.Errorf("Reveal = %q", accs[0].Relay.Password.Reveal())
	}
}
