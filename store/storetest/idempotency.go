package storetest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// testIdempotency checks Reserve: the first reservation of a key wins, a
// repeat gets it back, accounts do not share keys, concurrent reservations
// agree on one winner, and a key is forgotten after its ttl.
func testIdempotency(t *testing.T, s Store) {
	st := s
	ctx := context.Background()
	first := store.Reservation{Digest: "d1", IDs: []string{id(1), id(2)}}
	got, fresh, err := st.Reserve(ctx, acctA, "key-1", first, time.Hour)
	if err != nil || !fresh || !reflect.DeepEqual(got, first) {
		t.Fatalf("first Reserve = %+v, %v, %v; want the reservation, fresh", got, fresh, err)
	}
	got, fresh, err = st.Reserve(ctx, acctA, "key-1", store.Reservation{Digest: "d2", IDs: []string{id(3)}}, time.Hour)
	if err != nil || fresh || !reflect.DeepEqual(got, first) {
		t.Errorf("repeat Reserve = %+v, %v, %v; want the first reservation, not fresh", got, fresh, err)
	}
	if _, fresh, err := st.Reserve(ctx, acctB, "key-1", first, time.Hour); err != nil || !fresh {
		t.Errorf("the same key in another account: fresh %v, %v; want fresh", fresh, err)
	}
	if _, fresh, err := st.Reserve(ctx, acctA, "key-\x00\n with odd bytes \xff", first, time.Hour); err != nil || !fresh {
		t.Errorf("a key with odd bytes: fresh %v, %v", fresh, err)
	}

	// Concurrent reservations of one key: exactly one is fresh, and all
	// get its reservation.
	var wg sync.WaitGroup
	results := make([]store.Reservation, 8)
	freshes := make([]bool, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := store.Reservation{Digest: "d", IDs: []string{id(100 + i)}}
			var err error
			results[i], freshes[i], err = st.Reserve(ctx, acctA, "race", r, time.Hour)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	winners := 0
	for i := range results {
		if freshes[i] {
			winners++
		}
		if !reflect.DeepEqual(results[i], results[0]) {
			t.Errorf("concurrent Reserve %d got %+v, another got %+v", i, results[i], results[0])
		}
	}
	if winners != 1 {
		t.Errorf("%d concurrent reservations were fresh, want 1", winners)
	}

	// Settle marks a reservation stored; a repeat then says so.
	if err := st.Settle(ctx, acctA, "key-1"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Reserve(ctx, acctA, "key-1", first, time.Hour); err != nil || !got.Stored || !reflect.DeepEqual(got.IDs, first.IDs) {
		t.Errorf("Reserve after Settle = %+v, %v; want the first reservation, stored", got, err)
	}
	if err := st.Settle(ctx, acctA, "never-reserved"); err != nil {
		t.Errorf("Settle of an unknown key: %v", err)
	}

	// Release forgets a reservation that is not stored, and keeps one that is.
	if err := st.Release(ctx, acctA, "key-1"); err != nil {
		t.Fatal(err)
	}
	if got, fresh, err := st.Reserve(ctx, acctA, "key-1", first, time.Hour); err != nil || fresh || !got.Stored {
		t.Errorf("Reserve after releasing a stored key = %+v, fresh %v, %v; want it kept", got, fresh, err)
	}
	if _, _, err := st.Reserve(ctx, acctB, "to-release", first, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, acctB, "to-release"); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := st.Reserve(ctx, acctB, "to-release", first, time.Hour); err != nil || !fresh {
		t.Errorf("Reserve after Release: fresh %v, %v; want fresh", fresh, err)
	}

	// A key is forgotten after its ttl.
	if _, _, err := st.Reserve(ctx, acctA, "short", first, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, fresh, err := st.Reserve(ctx, acctA, "short", first, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if fresh {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a key with a 50ms ttl was still reserved after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
