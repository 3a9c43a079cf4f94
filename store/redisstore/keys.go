package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/mailsink/mailsink/store"
)

// accountKeys names the keys of one account. Every name starts with base,
// "<prefix>{<tag>}:", so all of an account's keys hash to one cluster slot.
type accountKeys struct {
	base string
}

func (s *Store) account(accountID string) accountKeys {
	return accountKeys{base: s.prefix + "{" + accountTag(accountID) + "}:"}
}

// records is the hash of the account's email records, by email id.
// hashed is the key of kind for name, hashed so that what a client sends
// never shapes key names.
func (k accountKeys) hashed(kind, name string) string {
	sum := sha256.Sum256([]byte(name))
	return k.base + kind + hex.EncodeToString(sum[:])
}

func (k accountKeys) records() string { return k.base + "em" }

// emailPrefix is the part of an email's metadata key of the older layout
// before its id; the Lua scripts that load pages append ids to it.
func (k accountKeys) emailPrefix() string { return k.base + "e:" }

// email is the metadata key of an email of the older layout.
func (k accountKeys) email(id string) string { return k.base + "e:" + id }

// bodyRefs is the hash of how many emails share each body of the current
// layout that more than one email shares, by body id.
func (k accountKeys) bodyRefs() string { return k.base + "br" }

func (k accountKeys) body(bodyID string) string { return k.base + "b:" + bodyID }

func (k accountKeys) all() string { return k.base + "all" }

// stats is the account's totals hash: "bytes", the sum of the raw sizes of
// its emails (the count is the cardinality of all).
func (k accountKeys) stats() string { return k.base + "stats" }

func (k accountKeys) recipient(addr string) string {
	return k.base + "r:" + store.NormalizeAddress(addr)
}

func (k accountKeys) sender(addr string) string {
	return k.base + "s:" + store.NormalizeAddress(addr)
}

func (k accountKeys) status(st store.Status) string { return k.base + "st:" + string(st) }

// statuses returns the status indexes in the order the scripts expect them:
// received, processed, archived.
func (k accountKeys) statuses() []string {
	return []string{k.status(store.StatusReceived), k.status(store.StatusProcessed), k.status(store.StatusArchived)}
}

// accountTag returns the hash tag of an account: the id itself when it is
// made of letters, digits, '.', '_' and '-' (UUIDs and slugs are), otherwise
// "~" and the hex of its bytes. The escape keeps '{', '}' and ':' out of the
// tag, so every key of the account carries exactly the same tag and no two
// accounts share one.
func accountTag(id string) string {
	if id != "" && strings.IndexFunc(id, func(r rune) bool { return !isTagRune(r) }) < 0 {
		return id
	}
	return "~" + hex.EncodeToString([]byte(id))
}

func isTagRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// escapeGlob quotes the characters SCAN MATCH treats specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\', '^':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
