package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"
)

// Account is one account of the accounts file.
type Account struct {
	ID   string
	Slug string
	Name string
	// KeyDigests are the SHA-256 digests of the account's API keys; plain
	// keys are never kept.
	KeyDigests [][32]byte
	// Domains route SMTP recipients at these domains, and their subdomains,
	// to this account. Lower case.
	Domains []string
	// Retention overrides the default retention for this account.
	Retention AccountRetention
	// Quota overrides the default storage quota for this account.
	Quota AccountQuota
	// Webhooks holds the account's webhook permissions.
	Webhooks AccountWebhooks
	// Inbound holds the account's secrets for provider webhooks.
	Inbound AccountInbound
	// Relay is the mail server the account's emails are released to; nil
	// when the account has none.
	Relay *AccountRelay
}

// AccountQuota is an account's override of the default quota (see
// Quota.For); a nil field keeps the default, 0 sets no limit.
type AccountQuota struct {
	MaxEmails *int64 `yaml:"maxEmails"`
	MaxBytes  *int64 `yaml:"maxBytes"`
}

// AccountWebhooks is what an account's webhooks may do.
type AccountWebhooks struct {
	// AllowPrivateTargets lets its webhooks reach private and loopback
	// addresses (link-local and metadata ones stay refused).
	AllowPrivateTargets bool
}

// AccountInbound is an account's `inbound:` entry: what its provider
// webhooks (/v1/inbound/mailgun, /v1/inbound/ses) are checked against.
type AccountInbound struct {
	// MailgunSigningKey, when set, makes Mailgun requests carry a valid
	// signature made with this key.
	MailgunSigningKey string
	// SNSTopicArns are the SNS topics accepted on /v1/inbound/ses; none
	// listed refuses every SNS message.
	SNSTopicArns []string
	// SendGridKey, when set, makes SendGrid Inbound Parse requests carry a
	// valid ECDSA signature under this public key (the
	// sendgridVerificationKey of the accounts file).
	SendGridKey *ecdsa.PublicKey
}

// AccountRetention is an account's override of the default retention (see
// Retention.For); a nil field keeps the default.
type AccountRetention struct {
	MaxAge    *time.Duration // 0 keeps emails forever
	MaxEmails *int64         // 0 sets no limit
}

// accountsFile is the YAML (or JSON) shape of MAILSINK_ACCOUNTS_FILE.
type accountsFile struct {
	Accounts []struct {
		Slug    string   `yaml:"slug"`
		Name    string   `yaml:"name"`
		ID      string   `yaml:"id"`
		APIKeys []string `yaml:"apiKeys"`
		Domains []string `yaml:"domains"`
		// Retention is checked by parseRetention, which names what is
		// wrong better than a typed field would.
		Retention yaml.Node    `yaml:"retention"`
		Quota     AccountQuota `yaml:"quota"`
		Webhooks  struct {
			AllowPrivateTargets bool `yaml:"allowPrivateTargets"`
		} `yaml:"webhooks"`
		Inbound struct {
			MailgunSigningKey       string   `yaml:"mailgunSigningKey"`
			SNSTopicArns            []string `yaml:"snsTopicArns"`
			SendGridVerificationKey string   `yaml:"sendgridVerificationKey"`
		} `yaml:"inbound"`
		// Relay is checked by parseRelay, which names the line of each
		// mistake and reads what it refers to (passwordEnv, caFile).
		Relay yaml.Node `yaml:"relay"`
	} `yaml:"accounts"`
}

// accountNamespace derives account ids from slugs, so the same file always
// yields the same ids.
var accountNamespace = uuid.MustParse("6f1d5a8e-3c1b-4f7e-9a2d-5b8c0e4d7f10")

// DeriveAccountID returns the stable id of an account that has none in the
// accounts file: a UUIDv5 of its slug.
func DeriveAccountID(slug string) string {
	return uuid.NewSHA1(accountNamespace, []byte(slug)).String()
}

// Digest returns the SHA-256 digest under which an API key is kept.
func Digest(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// ParseAccounts parses and validates an accounts file; what a relay entry
// refers to (passwordEnv, caFile) is read from the process's environment
// and files.
func ParseAccounts(data []byte) ([]Account, error) {
	return ParseAccountsWith(data, os.Getenv, os.ReadFile)
}

// ParseAccountsWith is ParseAccounts reading environment variables through
// getenv and files through readFile.
func ParseAccountsWith(data []byte, getenv func(string) string, readFile func(string) ([]byte, error)) ([]Account, error) {
	var f accountsFile
	if err := decodeStrict(data, &f); err != nil {
		return nil, err
	}
	if len(f.Accounts) == 0 {
		return nil, fmt.Errorf("no accounts: the file needs an accounts list with at least one entry")
	}
	var (
		out     []Account
		slugs   = map[string]bool{}
		ids     = map[string]bool{}
		keys    = map[[32]byte]string{}
		domains = map[string]string{}
	)
	for i, a := range f.Accounts {
		where := fmt.Sprintf("accounts[%d]", i)
		if !validSlug(a.Slug) {
			return nil, fmt.Errorf("%s: slug %q must be 1 to 63 of a-z, 0-9 and -", where, a.Slug)
		}
		where = fmt.Sprintf("account %q", a.Slug)
		if slugs[a.Slug] {
			return nil, fmt.Errorf("%s: slug is used twice", where)
		}
		slugs[a.Slug] = true
		if strings.TrimSpace(a.Name) == "" {
			return nil, fmt.Errorf("%s: name is required", where)
		}
		id := strings.TrimSpace(a.ID)
		if id == "" {
			id = DeriveAccountID(a.Slug)
		}
		if strings.ContainsAny(id, "{}\x00 \t\r\n") || len(id) > 128 {
			return nil, fmt.Errorf("%s: id %q must be at most 128 characters without spaces or braces", where, id)
		}
		if ids[id] {
			return nil, fmt.Errorf("%s: id %q is used twice", where, id)
		}
		ids[id] = true
		if len(a.APIKeys) == 0 {
			return nil, fmt.Errorf("%s: apiKeys needs at least one key", where)
		}
		acc := Account{ID: id, Slug: a.Slug, Name: a.Name}
		for _, k := range a.APIKeys {
			d, err := parseKey(k)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if other, dup := keys[d]; dup {
				return nil, fmt.Errorf("%s: an API key is also listed for account %q", where, other)
			}
			keys[d] = a.Slug
			acc.KeyDigests = append(acc.KeyDigests, d)
		}
		for _, d := range a.Domains {
			d = strings.ToLower(strings.Trim(strings.TrimSpace(d), "."))
			if d == "" || strings.ContainsAny(d, "@ \t") {
				return nil, fmt.Errorf("%s: domain %q is not a domain name", where, d)
			}
			if other, dup := domains[d]; dup {
				return nil, fmt.Errorf("%s: domain %q is also listed for account %q", where, d, other)
			}
			domains[d] = a.Slug
			acc.Domains = append(acc.Domains, d)
		}
		r, err := parseRetention(&a.Retention)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		acc.Retention = r
		for name, v := range map[string]*int64{"maxEmails": a.Quota.MaxEmails, "maxBytes": a.Quota.MaxBytes} {
			if v != nil && (*v < 0 || *v > 1<<53-1) {
				return nil, fmt.Errorf("%s: quota.%s %d must be a whole number from 0 (no limit) up", where, name, *v)
			}
		}
		acc.Quota = a.Quota
		acc.Webhooks.AllowPrivateTargets = a.Webhooks.AllowPrivateTargets
		if acc.Inbound, err = parseInbound(a.Inbound.MailgunSigningKey, a.Inbound.SNSTopicArns, a.Inbound.SendGridVerificationKey); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if acc.Relay, err = parseRelay(&a.Relay, getenv, readFile); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, acc)
	}
	return out, nil
}

// decodeStrict decodes an accounts file into f, refusing unknown keys (a
// misspelt key would otherwise be dropped in silence: `domain:` for
// `domains:` leaves an account without domains) and values of the wrong
// type. Its errors name each line and the key, as in
// `line 5: accounts[0].domain: unknown key; the keys are ...`.
func decodeStrict(data []byte, f *accountsFile) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("not valid YAML or JSON: %s", syntaxError(data, err))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(f)
	if errors.Is(err, io.EOF) {
		return nil // an empty file: ParseAccounts says what is missing
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		msgs = append(msgs, explain(&root, e))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// syntaxError says where the YAML of data breaks. yaml.v3's syntax errors
// often name the line where the enclosing block began (line 1 for a bad
// indent anywhere in the accounts list), so the position comes from
// goccy/go-yaml's parser, which names the line and column of the token
// at fault; err, yaml.v3's error, is the fallback.
func syntaxError(data []byte, err error) string {
	_, perr := goccyparser.ParseBytes(data, 0)
	var located goccy.Error
	if !errors.As(perr, &located) || located.GetToken() == nil {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	// The line itself is not repeated: it may hold an API key.
	pos := located.GetToken().Position
	return fmt.Sprintf("line %d, column %d: %s (look at the indentation, quotes and brackets there and just before)",
		pos.Line, pos.Column, located.GetMessage())
}

var (
	yamlLine    = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknown = regexp.MustCompile(`^field (\S+) not found in type`)
	yamlType    = regexp.MustCompile(`^cannot unmarshal (!!\w+)(?: .*)? into (.+)$`)
)

// explain rewrites one of yaml.v3's decoding errors ("line 5: field domain
// not found in type struct {...}") to name the key by its path.
func explain(root *yaml.Node, e string) string {
	m := yamlLine.FindStringSubmatch(e)
	if m == nil {
		return e
	}
	line, _ := strconv.Atoi(m[1])
	if u := yamlUnknown.FindStringSubmatch(m[2]); u != nil {
		path := keyAt(root, "", func(k, _ *yaml.Node) bool { return k.Line == line && k.Value == u[1] })
		known := accountKeys
		switch {
		case !strings.Contains(path, "."):
			known = "accounts"
		case strings.Contains(path, ".inbound."):
			known = inboundKeys
		}
		return fmt.Sprintf("line %d: %s: unknown key; the keys here are %s", line, path, known)
	}
	if t := yamlType.FindStringSubmatch(m[2]); t != nil {
		path := keyAt(root, "", func(_, v *yaml.Node) bool { return v.Line == line && v.Tag == t[1] })
		want := "a list of accounts (- slug: ...)"
		switch t[2] {
		case "string":
			want = "a single value"
		case "[]string":
			want = "a list like [a, b]"
		}
		got, ok := map[string]string{"!!str": "a string", "!!seq": "a list", "!!map": "a map", "!!int": "a number", "!!bool": "a boolean"}[t[1]]
		if !ok {
			got = t[1]
		}
		return fmt.Sprintf("line %d: %s: must be %s, not %s", line, path, want, got)
	}
	return e
}

// accountKeys are the keys of one account, for error messages.
const accountKeys = "slug, name, id, apiKeys, domains, retention, quota, webhooks, inbound, relay"

// inboundKeys are the keys of an account's inbound entry.
const inboundKeys = "mailgunSigningKey, snsTopicArns, sendgridVerificationKey"

// keyAt returns the path (accounts[0].domains) of the deepest key under n
// for which match holds of the key and its value, or "".
func keyAt(n *yaml.Node, path string, match func(k, v *yaml.Node) bool) string {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			if found := keyAt(c, p, match); found != "" {
				return found
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := strings.TrimPrefix(path+"."+k.Value, ".")
			if found := keyAt(v, p, match); found != "" {
				return found
			}
			if match(k, v) {
				return p
			}
		}
	}
	return ""
}

// parseRetention reads an account's retention entry:
// {maxAge: <Go duration, 0 keeps forever>, maxEmails: <whole number, 0 is
// no limit>}, both optional. An absent or null entry overrides nothing.
func parseRetention(n *yaml.Node) (AccountRetention, error) {
	var r AccountRetention
	switch {
	case n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return r, nil
	case n.Kind != yaml.MappingNode:
		return r, fmt.Errorf("retention (line %d) must be a map like {maxAge: 24h, maxEmails: 1000}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return r, fmt.Errorf("retention.%s (line %d) needs a value", k.Value, v.Line)
		}
		switch k.Value {
		case "maxAge":
			d, err := time.ParseDuration(v.Value)
			if err != nil || d < 0 {
				return r, fmt.Errorf("retention.maxAge %q (line %d) is not a duration like 24h or 90m, or 0 to keep emails forever", v.Value, v.Line)
			}
			r.MaxAge = &d
		case "maxEmails":
			m, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil || m < 0 || m > 1<<53-1 {
				return r, fmt.Errorf("retention.maxEmails %q (line %d) is not a whole number from 0 (no limit) up", v.Value, v.Line)
			}
			r.MaxEmails = &m
		default:
			return r, fmt.Errorf("retention (line %d): unknown field %q; the fields are maxAge and maxEmails", k.Line, k.Value)
		}
	}
	return r, nil
}

// snsTopicArn is the shape of an SNS topic ARN:
// arn:<partition>:sns:<region>:<account>:<topic>.
var snsTopicArn = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}$`)

// parseInbound checks an account's inbound entry.
func parseInbound(mailgunKey string, topics []string, sendgridKey string) (AccountInbound, error) {
	in := AccountInbound{MailgunSigningKey: mailgunKey}
	if sendgridKey != "" {
		key, err := parseECDSAKey(sendgridKey)
		if err != nil {
			return in, fmt.Errorf("inbound.sendgridVerificationKey: %w", err)
		}
		in.SendGridKey = key
	}
	if mailgunKey != "" && strings.TrimSpace(mailgunKey) != mailgunKey {
		return in, fmt.Errorf("inbound.mailgunSigningKey has surrounding spaces")
	}
	for _, t := range topics {
		if !snsTopicArn.MatchString(t) {
			return in, fmt.Errorf("inbound.snsTopicArns: %q is not an SNS topic ARN like arn:aws:sns:us-east-1:123456789012:inbound-mail", t)
		}
		in.SNSTopicArns = append(in.SNSTopicArns, t)
	}
	return in, nil
}

// parseECDSAKey reads a public key as SendGrid shows it: base64 of its DER
// (SubjectPublicKeyInfo), with or without the PEM lines.
func parseECDSAKey(s string) (*ecdsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	if block, _ := pem.Decode([]byte(s)); block != nil {
		s = base64.StdEncoding.EncodeToString(block.Bytes)
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, fmt.Errorf("is not base64 (paste the public key SendGrid shows, MFkw...)")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("is not a public key: %v", err)
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("is not an ECDSA public key")
	}
	return key, nil
}

// parseKey turns an apiKeys entry, a plain key or "sha256:" + hex digest,
// into its digest.
func parseKey(k string) ([32]byte, error) {
	var d [32]byte
	if hexDigest, ok := strings.CutPrefix(k, "sha256:"); ok {
		b, err := hex.DecodeString(hexDigest)
		if err != nil || len(b) != len(d) {
			return d, fmt.Errorf("API key %q: sha256: must be followed by 64 hex digits", truncate(k))
		}
		copy(d[:], b)
		return d, nil
	}
	if strings.TrimSpace(k) == "" || strings.TrimSpace(k) != k {
		return d, fmt.Errorf("an API key is empty or has surrounding spaces")
	}
	return Digest(k), nil
}

func truncate(s string) string {
	if len(s) > 16 {
		return s[:16] + "..."
	}
	return s
}

func validSlug(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
