package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

func uiSession(accountID string, b byte) store.UISession {
	return store.UISession{AccountID: accountID, KeyDigest: [32]byte{b}}
}

// testSessions: a dashboard session is found by its account and id only,
// ends when deleted or when its time is up, and an account keeps at most
// the limit of them, the ones closest to expiry ending first.
func testSessions(t *testing.T, s Store) {
	ctx := context.Background()
	sess := uiSession(acctA, 1)
	if err := s.CreateUISession(ctx, "id-1", sess, time.Hour, 3); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.UISession(ctx, acctA, "id-1"); err != nil || !ok || got != sess {
		t.Fatalf("UISession(a, id-1) = %+v, %v, %v; want %+v", got, ok, err, sess)
	}
	for _, tc := range [][2]string{{acctB, "id-1"}, {acctA, "id-2"}, {acctA, ""}} {
		if _, ok, err := s.UISession(ctx, tc[0], tc[1]); ok || err != nil {
			t.Errorf("UISession(%q, %q) found a session (err %v)", tc[0], tc[1], err)
		}
	}
	// The fourth and fifth sessions end the two closest to expiry.
	for i := 2; i <= 5; i++ {
		if err := s.CreateUISession(ctx, fmt.Sprintf("id-%d", i), uiSession(acctA, byte(i)), time.Hour+time.Duration(i)*time.Minute, 3); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5; i++ {
		_, ok, err := s.UISession(ctx, acctA, fmt.Sprintf("id-%d", i))
		if err != nil || ok != (i > 2) {
			t.Errorf("session %d after five with a limit of 3: found %v (err %v), want %v", i, ok, err, i > 2)
		}
	}
	// Another account's sessions are not counted against it.
	if err := s.CreateUISession(ctx, "id-1", uiSession(acctB, 9), time.Hour, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.UISession(ctx, acctA, "id-5"); !ok {
		t.Error("another account's session ended one of the first's")
	}
	if err := s.DeleteUISession(ctx, acctA, "id-5"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.UISession(ctx, acctA, "id-5"); ok {
		t.Error("session found after DeleteUISession")
	}
	if err := s.DeleteUISession(ctx, acctA, "never"); err != nil {
		t.Errorf("DeleteUISession of an unknown id: %v", err)
	}
	if err := s.CreateUISession(ctx, "short", uiSession(acctA, 7), time.Millisecond, 3); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, ok, err := s.UISession(ctx, acctA, "short")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a session of a millisecond is still there after 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
