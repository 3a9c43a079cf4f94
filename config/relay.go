package config

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mailsink/mailsink/store"
)

// AccountRelay is an account's `relay:` entry: the mail server its emails
// are released to (POST /v1/emails/{id}/release), and who they may go to.
type AccountRelay struct {
	Host string
	Port int
	// TLS is RelayNone, RelayStartTLS or RelayTLS.
	TLS string
	// Username and Password authenticate with AUTH PLAIN (or LOGIN when
	// the server offers only that); empty Username: no AUTH.
	Username string
	Password Secret
	// RootCAs, when not nil, are the certificates of caFile: the server's
	// certificate must chain to one of them instead of the system's.
	RootCAs *x509.CertPool
	// From, when set, is the envelope sender of every release; empty, the
	// email's stored sender is.
	From string
	// AllowedRecipients are the patterns a recipient must match, whole and
	// regardless of case; none allows no recipient.
	AllowedRecipients []*regexp.Regexp
}

// The values of a relay's tls.
const (
	RelayNone     = "none"     // plain SMTP
	RelayStartTLS = "starttls" // plain, then STARTTLS before anything else
	RelayTLS      = "tls"      // TLS from the first byte (port 465)
)

// Addr returns the server's host:port.
func (r *AccountRelay) Addr() string { return net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) }

// Allows reports whether addr matches one of AllowedRecipients.
func (r *AccountRelay) Allows(addr string) bool {
	for _, p := range r.AllowedRecipients {
		if p.MatchString(addr) {
			return true
		}
	}
	return false
}

// Secret is a credential of the accounts file. It prints as [redacted]
// (fmt's verbs, slog, JSON) so that no log line or answer shows it; Reveal
// returns it.
type Secret string

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

// String hides the secret.
func (Secret) String() string { return "[redacted]" }

// GoString hides the secret from %#v.
func (Secret) GoString() string { return `"[redacted]"` }

// LogValue hides the secret from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalJSON hides the secret from encoding/json.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// relayKeys are the keys of a relay entry, for error messages.
const relayKeys = "host, port, tls, username, password, passwordEnv, caFile, from, allowedRecipients"

// defaultRelayPort is the port of each tls value when port is not given.
var defaultRelayPort = map[string]int{RelayNone: 25, RelayStartTLS: 587, RelayTLS: 465}

// parseRelay reads an account's relay entry, {host, port, tls, username,
// password or passwordEnv, caFile, from, allowedRecipients}; an absent or
// null entry is no relay. passwordEnv names an environment variable, read
// through getenv; caFile a PEM file, read through readFile. Every error
// names the line.
func parseRelay(n *yaml.Node, getenv func(string) string, readFile func(string) ([]byte, error)) (*AccountRelay, error) {
	switch {
	case n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return nil, nil
	case n.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("relay (line %d) must be a map like {host: smtp.example.com, port: 587, tls: starttls, allowedRecipients: ['.*@example\\.com']}", n.Line)
	}
	r := &AccountRelay{TLS: RelayStartTLS}
	var passwordEnv, caFile string
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return nil, fmt.Errorf("relay.%s (line %d) is given twice", k.Value, k.Line)
		}
		seen[k.Value] = true
		if k.Value == "allowedRecipients" {
			patterns, err := parsePatterns(v)
			if err != nil {
				return nil, err
			}
			r.AllowedRecipients = patterns
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, fmt.Errorf("relay.%s (line %d) needs a single value", k.Value, v.Line)
		}
		switch k.Value {
		case "host":
			if v.Value == "" || strings.ContainsAny(v.Value, " \t/@[]") {
				return nil, fmt.Errorf("relay.host %q (line %d) is not a host name or an IP address", v.Value, v.Line)
			}
			r.Host = v.Value
		case "port":
			p, err := strconv.Atoi(v.Value)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("relay.port %q (line %d) is not a port from 1 to 65535", v.Value, v.Line)
			}
			r.Port = p
		case "tls":
			if _, ok := defaultRelayPort[v.Value]; !ok {
				return nil, fmt.Errorf("relay.tls %q (line %d) must be none, starttls or tls", v.Value, v.Line)
			}
			r.TLS = v.Value
		case "username":
			r.Username = v.Value
		case "password":
			r.Password = Secret(v.Value)
		case "passwordEnv":
			passwordEnv = v.Value
			pw := getenv(passwordEnv)
			if pw == "" {
				return nil, fmt.Errorf("relay.passwordEnv (line %d): the environment variable %q is not set", v.Line, passwordEnv)
			}
			r.Password = Secret(pw)
		case "caFile":
			caFile = v.Value
			pool, err := loadCAFile(caFile, readFile)
			if err != nil {
				return nil, fmt.Errorf("relay.caFile (line %d): %w", v.Line, err)
			}
			r.RootCAs = pool
		case "from":
			if !store.ValidAddress(v.Value) {
				return nil, fmt.Errorf("relay.from %q (line %d) is not an email address", v.Value, v.Line)
			}
			r.From = v.Value
		default:
			return nil, fmt.Errorf("line %d: relay.%s: unknown key; the keys here are %s", k.Line, k.Value, relayKeys)
		}
	}
	switch {
	case r.Host == "":
		return nil, fmt.Errorf("relay (line %d) needs a host", n.Line)
	case seen["password"] && passwordEnv != "":
		return nil, fmt.Errorf("relay (line %d) has both password and passwordEnv: give one", n.Line)
	case r.Username != "" && r.Password == "":
		return nil, fmt.Errorf("relay (line %d) has a username but no password or passwordEnv", n.Line)
	case r.Username == "" && r.Password != "":
		return nil, fmt.Errorf("relay (line %d) has a password but no username", n.Line)
	case r.Username != "" && r.TLS == RelayNone:
		return nil, fmt.Errorf("relay (line %d): with tls: none the username and password would cross the network in clear; use tls: starttls or tls", n.Line)
	case caFile != "" && r.TLS == RelayNone:
		return nil, fmt.Errorf("relay (line %d): caFile is for TLS, but tls is none", n.Line)
	}
	if r.Port == 0 {
		r.Port = defaultRelayPort[r.TLS]
	}
	return r, nil
}

// parsePatterns compiles allowedRecipients: each pattern must match a
// whole address, regardless of case.
func parsePatterns(v *yaml.Node) ([]*regexp.Regexp, error) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("relay.allowedRecipients (line %d) must be a list of patterns like ['.*@example\\.com']", v.Line)
	}
	var out []*regexp.Regexp
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" || item.Value == "" {
			return nil, fmt.Errorf("relay.allowedRecipients (line %d): each item must be a pattern (a regular expression)", item.Line)
		}
		re, err := regexp.Compile(`(?i)^(?:` + item.Value + `)$`)
		if err != nil {
			return nil, fmt.Errorf("relay.allowedRecipients (line %d): %q is not a regular expression: %v", item.Line, item.Value, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// loadCAFile reads the PEM certificates of a relay's caFile.
func loadCAFile(path string, readFile func(string) ([]byte, error)) (*x509.CertPool, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
