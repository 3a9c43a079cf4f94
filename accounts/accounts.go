// Package accounts answers the two questions every edge asks about an
// account: whose is this API key, and whose is this recipient. It is built
// once from the configuration and is read-only afterwards.
package accounts

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/store"
)

// Registry looks accounts up by API key and by recipient domain.
type Registry struct {
	accounts []*store.Account
	keys     []keyEntry
	domains  map[string]*store.Account
}

type keyEntry struct {
	digest  [32]byte
	account *store.Account
}

// New builds a Registry from configured accounts.
func New(cfg []config.Account) *Registry {
	r := &Registry{domains: map[string]*store.Account{}}
	for _, c := range cfg {
		a := &store.Account{ID: c.ID, Slug: c.Slug, Name: c.Name}
		r.accounts = append(r.accounts, a)
		for _, d := range c.KeyDigests {
			r.keys = append(r.keys, keyEntry{digest: d, account: a})
		}
		for _, d := range c.Domains {
			r.domains[d] = a
		}
	}
	return r
}

// Accounts returns every account, in configuration order.
func (r *Registry) Accounts() []*store.Account { return r.accounts }

// ByID returns the account with id, or nil.
func (r *Registry) ByID(id string) *store.Account {
	for _, a := range r.accounts {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// ByKey returns the account that owns key. It compares the key's digest with
// every known digest in constant time and does the same work whether the key
// is unknown, wrong or right.
func (r *Registry) ByKey(key string) (*store.Account, bool) {
	d := sha256.Sum256([]byte(key))
	var found *store.Account
	for i := range r.keys {
		if subtle.ConstantTimeCompare(d[:], r.keys[i].digest[:]) == 1 {
			found = r.keys[i].account
		}
	}
	return found, found != nil
}

// ForRecipient returns the account a recipient address belongs to without
// SMTP AUTH: the account listing the address's domain or a parent domain of
// it, else the only account when there is exactly one.
func (r *Registry) ForRecipient(addr string) (*store.Account, bool) {
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		domain := strings.ToLower(addr[at+1:])
		for domain != "" {
			if a, ok := r.domains[domain]; ok {
				return a, true
			}
			dot := strings.IndexByte(domain, '.')
			if dot < 0 {
				break
			}
			domain = domain[dot+1:]
		}
	}
	if len(r.accounts) == 1 {
		return r.accounts[0], true
	}
	return nil, false
}
