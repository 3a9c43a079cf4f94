// Package accounts answers the two questions every edge asks about an
// account: whose is this API key, and whose is this recipient. The accounts
// can be replaced while mailsink runs (the accounts file is reloaded): each
// lookup sees either the old accounts or the new ones, never a mix.
package accounts

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/store"
)

// Registry looks accounts up by API key and by recipient domain. It is safe
// for concurrent use, Replace included.
type Registry struct {
	current atomic.Pointer[snapshot]
}

// snapshot is one immutable set of accounts.
type snapshot struct {
	accounts []*store.Account
	configs  map[string]config.Account // by account id
	keys     []keyEntry
	domains  map[string]*store.Account
	inbound  map[string]config.AccountInbound // by account id
}

type keyEntry struct {
	digest  [32]byte
	account *store.Account
}

// New builds a Registry from configured accounts.
func New(cfg []config.Account) *Registry {
	r := &Registry{}
	r.Replace(cfg)
	return r
}

// Replace puts cfg in force in one step: lookups that have begun finish
// with the accounts they started with, later ones see cfg. An SMTP session
// that authenticated keeps its account until it ends.
func (r *Registry) Replace(cfg []config.Account) {
	s := &snapshot{domains: map[string]*store.Account{}, configs: make(map[string]config.Account, len(cfg)), inbound: map[string]config.AccountInbound{}}
	for _, c := range cfg {
		s.configs[c.ID] = c
		a := &store.Account{ID: c.ID, Slug: c.Slug, Name: c.Name}
		s.accounts = append(s.accounts, a)
		for _, d := range c.KeyDigests {
			s.keys = append(s.keys, keyEntry{digest: d, account: a})
		}
		for _, d := range c.Domains {
			s.domains[d] = a
		}
		s.inbound[c.ID] = c.Inbound
	}
	r.current.Store(s)
}

// Accounts returns every account, in configuration order.
func (r *Registry) Accounts() []*store.Account { return r.current.Load().accounts }

// Config returns the configuration of the account with id, as the accounts
// in force give it (per-account overrides of quota and retention).
func (r *Registry) Config(id string) (config.Account, bool) {
	c, ok := r.current.Load().configs[id]
	return c, ok
}

// ByID returns the account with id, or nil.
func (r *Registry) ByID(id string) *store.Account {
	for _, a := range r.current.Load().accounts {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// Inbound returns the provider webhook settings of the account with id
// (zero when it has none).
func (r *Registry) Inbound(id string) config.AccountInbound {
	return r.current.Load().inbound[id]
}

// ByKey returns the account that owns key. It compares the key's digest with
// every known digest in constant time and does the same work whether the key
// is unknown, wrong or right.
func (r *Registry) ByKey(key string) (*store.Account, bool) {
	return r.ByDigest(sha256.Sum256([]byte(key)))
}

// ByDigest is ByKey for the SHA-256 digest of a key: what a holder of a key
// may keep instead of the key (a dashboard session), to find out later
// whether the key still belongs to an account.
func (r *Registry) ByDigest(d [32]byte) (*store.Account, bool) {
	keys := r.current.Load().keys
	var found *store.Account
	for i := range keys {
		if subtle.ConstantTimeCompare(d[:], keys[i].digest[:]) == 1 {
			found = keys[i].account
		}
	}
	return found, found != nil
}

// RequestKey returns the API key a request carries: "Authorization: Bearer
// KEY", else "x-api-key: KEY", else, when basic is set, the password of HTTP
// Basic auth (the only way a provider's webhook can carry one); "" for none.
func RequestKey(r *http.Request, basic bool) string {
	key := r.Header.Get("X-Api-Key")
	if auth := r.Header.Get("Authorization"); auth != "" {
		if scheme, token, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
			key = strings.TrimSpace(token)
		} else if _, password, ok := r.BasicAuth(); ok && basic {
			key = password
		}
	}
	return key
}

// ForRecipient returns the account a recipient address belongs to without
// SMTP AUTH: the account listing the address's domain or a parent domain of
// it, else the only account when there is exactly one.
func (r *Registry) ForRecipient(addr string) (*store.Account, bool) {
	s := r.current.Load()
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		domain := strings.ToLower(addr[at+1:])
		for domain != "" {
			if a, ok := s.domains[domain]; ok {
				return a, true
			}
			dot := strings.IndexByte(domain, '.')
			if dot < 0 {
				break
			}
			domain = domain[dot+1:]
		}
	}
	if len(s.accounts) == 1 {
		return s.accounts[0], true
	}
	return nil, false
}
