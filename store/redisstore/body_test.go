package redisstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// TestBodyForms stores bodies in each of their forms (compressed, as they
// are, and a large one as a hash), one of them shared by two emails, and
// reads them back; every body is permanent once stored and goes with its
// last email.
func TestBodyForms(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		r := rand.New(rand.NewPCG(3, 4))
		random := func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(0x21 + r.IntN(94))
			}
			return b
		}
		for _, tc := range []struct {
			name string
			raw  []byte
			form string
		}{
			{"compressed", bytes.Repeat([]byte("a line of text\r\n"), 200), "string"},
			{"as it is", random(3000), "string"},
			{"large", random(largeBody + 10), "hash"},
		} {
			body := smtpLikeBody(1, 10)
			body.Raw = tc.raw
			e1 := testEmail(acct, "a@example.com", "s@example.com", 1000)
			e2 := testEmail(acct, "b@example.com", "s@example.com", 1000)
			if err := s.CreateEmails(ctx, body, []*store.Email{e1, e2}); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			for _, e := range []*store.Email{e1, e2} {
				got, err := s.GetBody(ctx, acct, e.ID)
				if err != nil || !bytes.Equal(got.Raw, tc.raw) || got.Given != nil || got.Transcript == nil || got.Transcript.Helo != "localhost" {
					t.Fatalf("%s: GetBody = %v; want the body stored", tc.name, err)
				}
			}
			m, _, err := s.fixedPart(ctx, s.account(acct), e1.ID)
			if err != nil {
				t.Fatal(err)
			}
			var f fixed
			if err := decodeJSON(m, &f); err != nil {
				t.Fatal(err)
			}
			key := s.account(acct).body(f.Body)
			if typ, err := s.client.Type(ctx, key).Result(); err != nil || typ != tc.form {
				t.Errorf("%s: the body is a %q (%v), want a %s", tc.name, typ, err, tc.form)
			}
			// A large body is read outside the script: the script's answer
			// names its key and holds none of it.
			k := s.account(acct)
			v, err := bodyScript.Run(ctx, s.client, []string{k.records(), k.email(e1.ID)}, k.body(""), e1.ID).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if tc.form == "hash" && (len(v) != 2 || v[0] != "h" || v[1] != key) {
				t.Errorf("%s: the body script answered %d values, want the hash's key", tc.name, len(v))
			}
			if ttl, err := s.client.TTL(ctx, key).Result(); err != nil || ttl != -1 {
				t.Errorf("%s: TTL of the body = %v, %v; want -1 (none)", tc.name, ttl, err)
			}
			if err := s.DeleteEmail(ctx, acct, e1.ID); err != nil {
				t.Fatal(err)
			}
			if got, err := s.GetBody(ctx, acct, e2.ID); err != nil || !bytes.Equal(got.Raw, tc.raw) {
				t.Fatalf("%s: GetBody of the email left = %v", tc.name, err)
			}
			if err := s.DeleteEmail(ctx, acct, e2.ID); err != nil {
				t.Fatal(err)
			}
			if n, err := s.BodyCount(ctx); err != nil || n != 0 {
				t.Errorf("%s: BodyCount after deleting both = %d, %v; want 0", tc.name, n, err)
			}
		}
	})
}
