package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// testUpdate checks each mutable field, that UpdatedAt is set, that the other
// fields stay as they were, and that list filters see the change at once.
func testUpdate(t *testing.T, s Store) {
	updatedAt := at(3_600_007)
	tests := []struct {
		name string
		u    store.Update
		want func(e *store.Email)
	}{
		{"labels replaced", store.Update{Labels: &[]string{"x", "y", "x"}}, func(e *store.Email) { e.Labels = []string{"x", "y", "x"} }},
		{"labels cleared", store.Update{Labels: &[]string{}}, func(e *store.Email) { e.Labels = []string{} }},
		{"notes set", store.Update{Notes: &store.Nullable{Value: ptr("new notes")}}, func(e *store.Email) { e.Notes = ptr("new notes") }},
		{"notes set empty", store.Update{Notes: &store.Nullable{Value: ptr("")}}, func(e *store.Email) { e.Notes = ptr("") }},
		{"notes null", store.Update{Notes: &store.Nullable{}}, func(e *store.Email) { e.Notes = nil }},
		{"status processed", store.Update{Status: ptr(store.StatusProcessed)}, func(e *store.Email) { e.Status = store.StatusProcessed }},
		{"status archived", store.Update{Status: ptr(store.StatusArchived)}, func(e *store.Email) { e.Status = store.StatusArchived }},
		{"status same", store.Update{Status: ptr(store.StatusReceived)}, func(e *store.Email) {}},
		{"subject set", store.Update{Subject: &store.Nullable{Value: ptr("Changed Subject")}}, func(e *store.Email) { e.Subject = ptr("Changed Subject") }},
		{"subject null", store.Update{Subject: &store.Nullable{}}, func(e *store.Email) { e.Subject = nil }},
		{"every field", store.Update{
			Labels:  &[]string{"all"},
			Notes:   &store.Nullable{},
			Status:  ptr(store.StatusArchived),
			Subject: &store.Nullable{Value: ptr("changed everything")},
		}, func(e *store.Email) {
			e.Labels, e.Notes, e.Status, e.Subject = []string{"all"}, nil, store.StatusArchived, ptr("changed everything")
		}},
		{"no field", store.Update{}, func(e *store.Email) {}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			n := i + 1
			rcpt := fmt.Sprintf("r%d@example.com", n)
			orig := newEmail(acctA, n, withRecipient(rcpt), withLabels("old", "labels"), withNotes("old notes"), withSubject("Original subject"))
			create(t, s, orig)

			want := *orig
			want.Labels = slices.Clone(orig.Labels)
			tt.want(&want)
			want.UpdatedAt = updatedAt
			u := tt.u
			u.UpdatedAt = updatedAt

			got, err := s.UpdateEmail(ctx, acctA, orig.ID, u)
			if err != nil {
				t.Fatalf("UpdateEmail: %v", err)
			}
			if d := diffEmail(got, &want); d != "" {
				t.Errorf("UpdateEmail returned:%s", d)
			}
			if d := diffEmail(mustGet(t, s, acctA, orig.ID), &want); d != "" {
				t.Errorf("GetEmail after UpdateEmail:%s", d)
			}
			listed := list(t, s, store.ListQuery{AccountID: acctA, Recipient: rcpt, Limit: 10})
			if len(listed) != 1 {
				t.Fatalf("ListEmails(recipient=%s): got %v, want [%s]", rcpt, ids(listed), orig.ID)
			}
			if d := diffEmail(listed[0], &want); d != "" {
				t.Errorf("ListEmails after UpdateEmail:%s", d)
			}
			body, err := s.GetBody(ctx, acctA, orig.ID)
			if err != nil {
				t.Fatalf("GetBody: %v", err)
			}
			if d := diffBody(body, newBody(0)); d != "" {
				t.Errorf("GetBody after UpdateEmail:%s", d)
			}

			// Filters see the new status and subject, alone and combined
			// with an index-backed filter.
			for _, st := range []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived} {
				in := st == want.Status
				for _, q := range []store.ListQuery{
					{AccountID: acctA, Status: st, Limit: 100},
					{AccountID: acctA, Status: st, Recipient: rcpt, Limit: 100},
				} {
					if got := slices.Contains(listIDs(t, s, q), orig.ID); got != in {
						t.Errorf("ListEmails(%s) lists the email: %v, want %v", describe(q), got, in)
					}
				}
			}
			for _, subj := range []string{"original", "changed"} {
				in := want.Subject != nil && containsFold(*want.Subject, subj)
				for _, q := range []store.ListQuery{
					{AccountID: acctA, Subject: subj, Limit: 100},
					{AccountID: acctA, Subject: subj, Recipient: rcpt, Limit: 100},
				} {
					if got := slices.Contains(listIDs(t, s, q), orig.ID); got != in {
						t.Errorf("ListEmails(%s) lists the email: %v, want %v", describe(q), got, in)
					}
				}
			}
		})
	}
}

func containsFold(s, substr string) bool {
	return matches(&store.Email{Subject: &s}, store.ListQuery{Subject: substr})
}

// testUpdateNotFound checks UpdateEmail of unknown, deleted and other
// accounts' ids.
func testUpdateNotFound(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := newEmail(acctA, 1), newEmail(acctB, 2)
	create(t, s, a, b)
	u := store.Update{
		Labels:    &[]string{"hijacked"},
		Notes:     &store.Nullable{Value: ptr("hijacked")},
		Status:    ptr(store.StatusArchived),
		Subject:   &store.Nullable{Value: ptr("hijacked")},
		UpdatedAt: at(99_000),
	}
	_, err := s.UpdateEmail(ctx, acctA, id(3), u)
	wantCode(t, err, store.NotFound, "UpdateEmail of an unknown id")
	_, err = s.UpdateEmail(ctx, acctA, b.ID, u)
	wantCode(t, err, store.NotFound, "UpdateEmail of another account's email")
	_, err = s.UpdateEmail(ctx, acctB, a.ID, u)
	wantCode(t, err, store.NotFound, "UpdateEmail of another account's email")
	for _, e := range []*store.Email{a, b} {
		if d := diffEmail(mustGet(t, s, e.AccountID, e.ID), e); d != "" {
			t.Errorf("GetEmail(%s) after refused updates:%s", e.ID, d)
		}
	}
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Status: store.StatusArchived, Limit: 10}); len(got) != 0 {
		t.Errorf("ListEmails(status=archived) after refused updates: got %v, want none", got)
	}
	if err := s.DeleteEmail(ctx, acctA, a.ID); err != nil {
		t.Fatalf("DeleteEmail: %v", err)
	}
	_, err = s.UpdateEmail(ctx, acctA, a.ID, u)
	wantCode(t, err, store.NotFound, "UpdateEmail of a deleted email")
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 10}); len(got) != 0 {
		t.Errorf("ListEmails after updating a deleted email: got %v, want none", got)
	}
	if _, err := s.GetEmail(ctx, acctA, a.ID); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetEmail after updating a deleted email: got %v, want NotFound", err)
	}
}

// testDelete checks that a deleted email is gone from every read and every
// filter, and that its neighbours stay.
func testDelete(t *testing.T, s Store) {
	ctx := context.Background()
	gone := newEmail(acctA, 2, withRecipient("Gone@Example.com"), withSender("gone-sender@example.com"),
		withStatus(store.StatusProcessed), withSubject("to be deleted"))
	twin := newEmail(acctA, 3, withRecipient("gone@example.com"), withSender("gone-sender@example.com"),
		withStatus(store.StatusProcessed), withSubject("to be kept"))
	other := newEmail(acctA, 1)
	create(t, s, other, gone, twin)

	if err := s.DeleteEmail(ctx, acctA, gone.ID); err != nil {
		t.Fatalf("DeleteEmail: %v", err)
	}
	_, err := s.GetEmail(ctx, acctA, gone.ID)
	wantCode(t, err, store.NotFound, "GetEmail of a deleted email")
	_, err = s.GetBody(ctx, acctA, gone.ID)
	wantCode(t, err, store.NotFound, "GetBody of a deleted email")
	wantCode(t, s.DeleteEmail(ctx, acctA, gone.ID), store.NotFound, "DeleteEmail twice")

	tests := []struct {
		q    store.ListQuery
		want []int
	}{
		{store.ListQuery{}, []int{3, 1}},
		{store.ListQuery{Recipient: "gone@example.com"}, []int{3}},
		{store.ListQuery{Sender: "gone-sender@example.com"}, []int{3}},
		{store.ListQuery{Status: store.StatusProcessed}, []int{3}},
		{store.ListQuery{Subject: "to be"}, []int{3}},
		{store.ListQuery{Subject: "deleted"}, nil},
		{store.ListQuery{Since: at(1000)}, []int{3}},
		{store.ListQuery{Recipient: "gone@example.com", Sender: "gone-sender@example.com", Status: store.StatusProcessed, Subject: "to be", Since: at(1000)}, []int{3}},
		{store.ListQuery{Offset: 1}, []int{1}},
	}
	for _, tt := range tests {
		q := tt.q
		q.AccountID, q.Limit = acctA, 100
		if got, want := listIDs(t, s, q), idsOf(tt.want...); !equalIDs(got, want) {
			t.Errorf("ListEmails(%s) after delete: got %v, want %v", describe(q), got, want)
		}
	}

	// Another account cannot delete it.
	wantCode(t, s.DeleteEmail(ctx, acctB, twin.ID), store.NotFound, "DeleteEmail of another account's email")
	if d := diffEmail(mustGet(t, s, acctA, twin.ID), twin); d != "" {
		t.Errorf("GetEmail after another account's DeleteEmail:%s", d)
	}
	checkBodyCount(t, s, 2, "after deleting 1 of 3 emails with a body each")
}

// testIsolation checks that two accounts with look-alike emails see only
// their own, through every read and filter, and cannot touch each other's.
func testIsolation(t *testing.T, s Store) {
	ctx := context.Background()
	// Each account's ids in list order.
	own := map[string][]int{acctA: {3, 2, 1}, acctB: {6, 5, 4}}
	var all []*store.Email
	for acct, ns := range own {
		for i, n := range ns {
			// The same fields and times in both accounts.
			all = append(all, newEmail(acct, n, withReceivedAt(at(int64(len(ns)-i))), withRecipient("same@example.com"),
				withSender("same-sender@example.com"), withSubject("same subject")))
		}
	}
	createAll(t, s, all)
	queries := []store.ListQuery{
		{},
		{Recipient: "same@example.com"},
		{Sender: "SAME-sender@example.com"},
		{Status: store.StatusReceived},
		{Subject: "same"},
		{Since: at(0)},
		{Recipient: "same@example.com", Sender: "same-sender@example.com", Status: store.StatusReceived, Subject: "subject", Since: at(0)},
	}
	for acct, ns := range own {
		for _, q := range queries {
			q.AccountID, q.Limit = acct, 100
			got := list(t, s, q)
			if want := idsOf(ns...); !equalIDs(ids(got), want) {
				t.Errorf("ListEmails(%s): got %v, want %v", describe(q), ids(got), want)
			}
			for _, e := range got {
				if e.AccountID != acct {
					t.Errorf("ListEmails(%s) returned %s of account %q", describe(q), e.ID, e.AccountID)
				}
			}
		}
	}
	byID := map[string]*store.Email{}
	for _, e := range all {
		byID[e.ID] = e
	}
	for acct, ns := range own {
		intruder := acctB
		if acct == acctB {
			intruder = acctA
		}
		for _, n := range ns {
			_, err := s.GetEmail(ctx, intruder, id(n))
			wantCode(t, err, store.NotFound, "GetEmail of another account's email")
			_, err = s.GetBody(ctx, intruder, id(n))
			wantCode(t, err, store.NotFound, "GetBody of another account's email")
			_, err = s.UpdateEmail(ctx, intruder, id(n), store.Update{Status: ptr(store.StatusArchived), UpdatedAt: at(5)})
			wantCode(t, err, store.NotFound, "UpdateEmail of another account's email")
			wantCode(t, s.DeleteEmail(ctx, intruder, id(n)), store.NotFound, "DeleteEmail of another account's email")
			if d := diffEmail(mustGet(t, s, acct, id(n)), byID[id(n)]); d != "" {
				t.Errorf("GetEmail(%s) after another account's attempts:%s", id(n), d)
			}
		}
	}
	for acct, ns := range own {
		q := store.ListQuery{AccountID: acct, Status: store.StatusReceived, Limit: 100}
		if got, want := listIDs(t, s, q), idsOf(ns...); !equalIDs(got, want) {
			t.Errorf("ListEmails(%s) after another account's attempts: got %v, want %v", describe(q), got, want)
		}
	}
	checkBodyCount(t, s, len(all), "after another account's delete attempts")
}

// testReadState: new mail is unread; an update sets and clears the read
// flag, and every read of the email (get, list, the update's event) shows
// it; other updates leave it as it is.
func testReadState(t *testing.T, s Store) {
	ctx := context.Background()
	e := newEmail(acctA, 1)
	create(t, s, e)
	if mustGet(t, s, acctA, e.ID).Read {
		t.Fatal("new mail is read")
	}
	sub := s.Subscribe(acctA)
	defer sub.Close()
	yes, no := true, false
	got, err := s.UpdateEmail(ctx, acctA, e.ID, store.Update{Read: &yes, UpdatedAt: at(5000)})
	if err != nil || !got.Read {
		t.Fatalf("UpdateEmail(read) = %+v, %v; want read", got, err)
	}
	if !mustGet(t, s, acctA, e.ID).Read {
		t.Error("GetEmail after marking read: unread")
	}
	if l := list(t, s, store.ListQuery{AccountID: acctA, Limit: 10}); len(l) != 1 || !l[0].Read {
		t.Errorf("ListEmails after marking read: %+v", l)
	}
	timeout := time.After(10 * time.Second)
	for waiting := true; waiting; {
		select {
		case ev := <-sub.Events():
			if ev.Type != store.EmailUpdated {
				continue // the create's, published after the subscription began
			}
			if ev.Email == nil || !ev.Email.Read {
				t.Errorf("the update's event: %+v, want the email read", ev.Email)
			}
			waiting = false
		case <-timeout:
			t.Error("no event for the update")
			waiting = false
		}
	}
	labels := []string{"x"}
	if got, err := s.UpdateEmail(ctx, acctA, e.ID, store.Update{Labels: &labels, UpdatedAt: at(6000)}); err != nil || !got.Read {
		t.Errorf("another update cleared the read flag: %+v, %v", got, err)
	}
	if got, err := s.UpdateEmail(ctx, acctA, e.ID, store.Update{Read: &no, UpdatedAt: at(7000)}); err != nil || got.Read {
		t.Errorf("UpdateEmail(unread) = %+v, %v; want unread", got, err)
	}
	if mustGet(t, s, acctA, e.ID).Read {
		t.Error("GetEmail after marking unread: read")
	}
}
