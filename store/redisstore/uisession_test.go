package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// Dashboard sessions: found by account and id only, ended by delete,
// expiring by Redis's clock, and at most the limit per account, the ones
// closest to expiry ending first.
func TestUISessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		s := newStore(t)
		ctx := context.Background()
		sess := uiSession("acme", 1)
		if err := s.CreateUISession(ctx, "id-1", sess, time.Hour, 3); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.UISession(ctx, "acme", "id-1"); err != nil || !ok || got != sess {
			t.Fatalf("UISession(acme, id-1) = %+v, %v, %v; want %+v", got, ok, err, sess)
		}
		for _, tc := range [][2]string{{"globex", "id-1"}, {"acme", "id-2"}, {"acme", ""}} {
			if _, ok, err := s.UISession(ctx, tc[0], tc[1]); ok || err != nil {
				t.Errorf("UISession(%q, %q) found a session (err %v)", tc[0], tc[1], err)
			}
		}
		k := s.account("acme")
		if ttl := s.client.PTTL(ctx, k.uiSession("id-1")).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("session key expires in %v, want within an hour", ttl)
		}

		// The fourth and fifth sessions end the two oldest.
		for i := 2; i <= 5; i++ {
			if err := s.CreateUISession(ctx, fmt.Sprintf("id-%d", i), uiSession("acme", byte(i)), time.Hour+time.Duration(i)*time.Minute, 3); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i <= 5; i++ {
			_, ok, err := s.UISession(ctx, "acme", fmt.Sprintf("id-%d", i))
			if err != nil || ok != (i > 2) {
				t.Errorf("session %d after five with a limit of 3: found %v (err %v), want %v", i, ok, err, i > 2)
			}
		}
		if n := s.client.ZCard(ctx, k.uiSessions()).Val(); n != 3 {
			t.Errorf("the account lists %d sessions, want 3", n)
		}
		if n := s.client.Exists(ctx, k.uiSession("id-1")).Val() + s.client.Exists(ctx, k.uiSession("id-2")).Val(); n != 0 {
			t.Errorf("%d keys of ended sessions are still there", n)
		}
		// The list lives as long as its longest session (id-5's).
		if ttl := s.client.PTTL(ctx, k.uiSessions()).Val(); ttl <= time.Hour+4*time.Minute || ttl > time.Hour+5*time.Minute {
			t.Errorf("the session list expires in %v, want with id-5, in 1h05m", ttl)
		}
		// Another account's sessions are not counted against it.
		if err := s.CreateUISession(ctx, "id-1", uiSession("globex", 9), time.Hour, 1); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.UISession(ctx, "acme", "id-5"); !ok {
			t.Error("a globex session ended an acme one")
		}

		if err := s.DeleteUISession(ctx, "acme", "id-5"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.UISession(ctx, "acme", "id-5"); ok {
			t.Error("session found after DeleteUISession")
		}
		if n := s.client.ZCard(ctx, k.uiSessions()).Val(); n != 2 {
			t.Errorf("after a delete the account lists %d sessions, want 2", n)
		}
		if err := s.DeleteUISession(ctx, "acme", "never"); err != nil {
			t.Errorf("DeleteUISession of an unknown id: %v", err)
		}

		// Expiry is Redis's.
		if err := s.CreateUISession(ctx, "short", uiSession("acme", 7), time.Millisecond, 3); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, ok, _ := s.UISession(ctx, "acme", "short"); !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a session of 1 ms still there after 5 s")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

func uiSession(accountID string, b byte) store.UISession {
	s := store.UISession{AccountID: accountID}
	s.KeyDigest[0] = b
	return s
}
