package accounts

import (
	"testing"

	"github.com/mailsink/mailsink/config"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	accs, err := config.ParseAccounts([]byte(`
accounts:
  - slug: acme
    name: Acme QA
    apiKeys: [acme-key-1, "sha256:` + hexDigest("acme-key-2") + `"]
    domains: [acme.test]
  - slug: globex
    name: Globex
    id: globex-id
    apiKeys: [globex-key]
    domains: [globex.example.com]
`))
	if err != nil {
		t.Fatal(err)
	}
	r := New(accs)

	keyTests := []struct {
		key, want string
	}{
		{"acme-key-1", "acme"},
		{"acme-key-2", "acme"},
		{"globex-key", "globex"},
		{"", ""},
		{"acme-key-3", ""},
		{"ACME-KEY-1", ""},
	}
	for _, tt := range keyTests {
		a, ok := r.ByKey(tt.key)
		got := ""
		if ok {
			got = a.Slug
		}
		if got != tt.want {
			t.Errorf("ByKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}

	rcptTests := []struct {
		addr, want string
	}{
		{"qa@acme.test", "acme"},
		{"QA@ACME.TEST", "acme"},
		{"qa@mail.acme.test", "acme"},
		{"qa@deep.mail.acme.test", "acme"},
		{"qa@notacme.test", ""},
		{"qa@globex.example.com", "globex"},
		{"qa@example.com", ""},
		{"qa@other.test", ""},
	}
	for _, tt := range rcptTests {
		a, ok := r.ForRecipient(tt.addr)
		got := ""
		if ok {
			got = a.Slug
		}
		if got != tt.want {
			t.Errorf("ForRecipient(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
	if got := r.ByID("globex-id"); got == nil || got.Slug != "globex" {
		t.Errorf("ByID(globex-id) = %v, want globex", got)
	}
	if id := r.Accounts()[0].ID; id != config.DeriveAccountID("acme") {
		t.Errorf("derived id = %q, want %q", id, config.DeriveAccountID("acme"))
	}
}

func TestSingleAccountTakesEveryRecipient(t *testing.T) {
	t.Parallel()
	r := New([]config.Account{{ID: "x", Slug: "default", Name: "Default", KeyDigests: [][32]byte{config.Digest("k")}}})
	if a, ok := r.ForRecipient("anyone@anywhere.example"); !ok || a.Slug != "default" {
		t.Errorf("ForRecipient = %v, %v; want the default account", a, ok)
	}
}

func hexDigest(key string) string {
	d := config.Digest(key)
	const hexdigits = "0123456789abcdef"
	out := make([]byte, 0, 64)
	for _, b := range d {
		out = append(out, hexdigits[b>>4], hexdigits[b&15])
	}
	return string(out)
}

// TestReplaceWhileLooking replaces the accounts while lookups run (the race
// detector checks the swap), then checks that only the new ones answer.
func TestReplaceWhileLooking(t *testing.T) {
	old := []config.Account{{ID: "1", Slug: "old", Name: "Old", KeyDigests: [][32]byte{config.Digest("old-key")}, Domains: []string{"old.test"}}}
	next := []config.Account{{ID: "2", Slug: "new", Name: "New", KeyDigests: [][32]byte{config.Digest("new-key")}, Domains: []string{"new.test"}}}
	r := New(old)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			r.ByKey("old-key")
			r.ForRecipient("x@new.test")
			r.Accounts()
		}
	}()
	r.Replace(next)
	<-done
	if _, ok := r.ByKey("old-key"); ok {
		t.Error("the old key still works after Replace")
	}
	if a, ok := r.ForRecipient("x@new.test"); !ok || a.Slug != "new" {
		t.Errorf("ForRecipient after Replace = %v, %v; want new", a, ok)
	}
	if a := r.ByID("2"); a == nil || r.ByID("1") != nil {
		t.Errorf("ByID after Replace: %v, %v", a, r.ByID("1"))
	}
}
