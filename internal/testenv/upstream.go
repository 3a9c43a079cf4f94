package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/certs"
)

// Upstream is a second mailsink for tests of release to send to: on the
// embedded store, with the two test accounts, STARTTLS and an implicit-TLS
// listener under a self-signed certificate for localhost (CAFile), and AUTH
// with an API key as the password.
type Upstream struct {
	*Env
	// CAFile is the upstream's certificate, for a relay's caFile.
	CAFile string
	// SMTPS is the implicit-TLS listener's address.
	SMTPS string
}

// StartUpstream starts an Upstream, stopped at the end of the test.
func StartUpstream(t *testing.T) *Upstream {
	t.Helper()
	dir := t.TempDir()
	env := Start(t, Backend{Name: "embedded", Open: OpenEmbedded}, func(c *config.Config) {
		c.Store.DataDir = dir
		c.TLS.AutoHosts = []string{"localhost"}
		c.SMTP.TLSAddr = "127.0.0.1:0"
	})
	return &Upstream{Env: env, CAFile: filepath.Join(dir, certs.AutoCertFile), SMTPS: env.App.SMTPSAddr().String()}
}

// Relay returns an accounts file's relay entry (a YAML flow map) that sends
// to u, allowing the given recipient patterns. With tls "none" it sends in
// clear without AUTH; with "starttls" or "tls" it trusts CAFile and
// authenticates with AcmeKey, so that released mail lands in u's acme
// account whatever its recipients.
func (u *Upstream) Relay(tls string, allowed ...string) string {
	quoted := make([]string, len(allowed))
	for i, p := range allowed {
		quoted[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	patterns := "[" + strings.Join(quoted, ", ") + "]"
	_, port, _ := net.SplitHostPort(u.SMTP)
	switch tls {
	case config.RelayNone:
		return fmt.Sprintf("{host: 127.0.0.1, port: %s, tls: none, allowedRecipients: %s}", port, patterns)
	case config.RelayTLS:
		_, port, _ = net.SplitHostPort(u.SMTPS)
	}
	return fmt.Sprintf("{host: localhost, port: %s, tls: %s, username: qa, password: %s, caFile: %q, allowedRecipients: %s}",
		port, tls, AcmeKey, u.CAFile, patterns)
}

// Raws returns the raw sources u's acme account holds for recipient,
// newest first.
func (u *Upstream) Raws(t *testing.T, recipient string) []string {
	t.Helper()
	resp := u.Do(t, http.MethodGet, "/v1/emails?recipient="+url.QueryEscape(recipient), AcmeKey, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("upstream list: %d %s", resp.Status, resp.Body)
	}
	var out []string
	for _, it := range resp.JSON(t)["items"].([]any) {
		raw := u.Do(t, http.MethodGet, "/v1/emails/"+it.(map[string]any)["id"].(string)+"/raw", AcmeKey, nil)
		out = append(out, string(raw.Body))
	}
	return out
}

// ParseRelay parses a relay entry as the accounts file would.
func ParseRelay(t *testing.T, relay string) *config.AccountRelay {
	t.Helper()
	accs, err := config.ParseAccounts([]byte("accounts:\n  - {slug: r, name: R, apiKeys: [k], relay: " + relay + "}\n"))
	if err != nil {
		t.Fatalf("relay %s: %v", relay, err)
	}
	return accs[0].Relay
}

// WithRelay returns an edit for Start that gives the account slug the
// relay entry.
func WithRelay(t *testing.T, slug, relay string) func(*config.Config) {
	t.Helper()
	r := ParseRelay(t, relay)
	return func(c *config.Config) {
		for i := range c.Accounts {
			if c.Accounts[i].Slug == slug {
				c.Accounts[i].Relay = r
				return
			}
		}
		t.Fatalf("no account %q to give a relay", slug)
	}
}
