package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

const acct = "7a0c2b6e-0000-4000-8000-000000000001"

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)

		raw := make([]byte, 0, 512)
		for i := range 256 {
			raw = append(raw, byte(i)) // every byte value, NUL and invalid UTF-8 included
		}
		raw = append(raw, "\r\nSubject: <b>&</b>\r\n"...)
		body := &store.Body{Raw: raw, Given: &store.Parts{Text: ptr("héllo\n"), HTML: nil, Headers: map[string]string{"subject": "Hi", "x-empty": ""}, Attachments: []store.Attachment{
			{ContentType: ptr("image/png"), Filename: ptr("a.png"), Size: 9007199254740991},
			{ContentID: ptr("<c1>"), Disposition: ptr("inline")},
		}}}
		e := testEmail(acct, "Bob@Example.COM", "alice@example.org", 1700000000123)
		e.ID = strings.ToUpper(e.ID) // stored in lower case
		e.Subject = nil
		e.Notes = ptr("a note")
		e.Labels = []string{"x", "y"}
		e.RawSize = 9007199254740991
		e.CreatedAt = e.ReceivedAt.Add(time.Millisecond)
		e.UpdatedAt = e.ReceivedAt.Add(2 * time.Millisecond)
		if err := s.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}

		want := *e
		want.ID = strings.ToLower(e.ID)
		for _, id := range []string{want.ID, e.ID} {
			got, err := s.GetEmail(ctx, acct, id)
			if err != nil {
				t.Fatalf("GetEmail(%s): %v", id, err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("GetEmail(%s) = %+v, want %+v", id, got, &want)
			}
		}
		gotBody, err := s.GetBody(ctx, acct, want.ID)
		if err != nil {
			t.Fatalf("GetBody: %v", err)
		}
		if !reflect.DeepEqual(gotBody, body) {
			t.Errorf("GetBody = %+v, want %+v", gotBody, body)
		}

		// A body with nil maps and slices comes back with empty ones.
		e2 := testEmail(acct, "c@example.com", "d@example.com", 1700000000124)
		e2.Labels = nil
		if err := s.CreateEmails(ctx, &store.Body{Given: &store.Parts{}}, []*store.Email{e2}); err != nil {
			t.Fatalf("CreateEmails(empty body): %v", err)
		}
		gotBody, err = s.GetBody(ctx, acct, e2.ID)
		if err != nil {
			t.Fatalf("GetBody: %v", err)
		}
		if len(gotBody.Raw) != 0 || gotBody.Given == nil || gotBody.Given.Headers == nil || gotBody.Given.Attachments == nil {
			t.Errorf("empty body came back as %+v; want empty raw, non-nil headers and attachments", gotBody)
		}
		got2, err := s.GetEmail(ctx, acct, e2.ID)
		if err != nil {
			t.Fatalf("GetEmail: %v", err)
		}
		if got2.Labels == nil {
			t.Errorf("labels of an email created with nil labels are nil, want empty")
		}
	})
}

func TestTimestampsKeptToTheMillisecond(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		ctx := context.Background()
		s := newStore(t)
		e := testEmail(acct, "a@example.com", "b@example.com", 0)
		at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
		e.ReceivedAt, e.CreatedAt, e.UpdatedAt = at, at, at
		if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		got, err := s.GetEmail(ctx, acct, e.ID)
		if err != nil {
			t.Fatalf("GetEmail: %v", err)
		}
		want := time.Date(2026, 11, 22, 9, 0, 0, 123000000, time.UTC)
		if got.ReceivedAt != want || got.CreatedAt != want || got.UpdatedAt != want {
			t.Errorf("timestamps = %v %v %v, want %v", got.ReceivedAt, got.CreatedAt, got.UpdatedAt, want)
		}
	})
}

func TestCreateInvalidAndConflict(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		e := func() *store.Email { return testEmail(acct, "a@example.com", "b@example.com", 1700000000000) }
		other := e()
		other.AccountID = "other"
		noID := e()
		noID.ID = ""
		badStatus := e()
		badStatus.Status = "new"
		dup := e()
		tests := []struct {
			name   string
			body   *store.Body
			emails []*store.Email
		}{
			{"empty", testBody("x"), nil},
			{"nil body", nil, []*store.Email{e()}},
			{"nil email", testBody("x"), []*store.Email{e(), nil}},
			{"two accounts", testBody("x"), []*store.Email{e(), other}},
			{"no id", testBody("x"), []*store.Email{noID}},
			{"bad status", testBody("x"), []*store.Email{badStatus}},
			{"same id twice", testBody("x"), []*store.Email{dup, dup}},
		}
		for _, tt := range tests {
			wantCode(t, tt.name, s.CreateEmails(ctx, tt.body, tt.emails), store.Invalid)
		}

		first := e()
		if err := s.CreateEmails(ctx, testBody("one"), []*store.Email{first}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		again := *first
		again.ID = strings.ToUpper(first.ID)
		again.Recipient = "z@example.com"
		fresh := e()
		err := s.CreateEmails(ctx, testBody("two"), []*store.Email{fresh, &again})
		wantCode(t, "create with an existing id", err, store.Conflict)
		// Nothing of the refused create is visible.
		if _, err := s.GetEmail(ctx, acct, fresh.ID); !store.IsCode(err, store.NotFound) {
			t.Errorf("GetEmail(fresh) after conflict: %v, want NotFound", err)
		}
		list, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 100})
		if err != nil {
			t.Fatalf("ListEmails: %v", err)
		}
		if got, want := ids(list), []string{first.ID}; !slices.Equal(got, want) {
			t.Errorf("list after conflict = %v, want %v", got, want)
		}
		if n, err := s.BodyCount(ctx); err != nil || n != 1 {
			t.Errorf("BodyCount = %d, %v; want 1", n, err)
		}
		b, err := s.GetBody(ctx, acct, first.ID)
		if err != nil || string(b.Raw) != "one" {
			t.Errorf("GetBody(first) = %v, %v; want raw \"one\"", b, err)
		}
	})
}

func TestOrderingWithTies(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		var all []*store.Email
		// Ids are random, not time ordered, so ties are broken by id alone.
		for i := range 30 {
			e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000+int64(i%4))
			e.ID = randomUUID()
			all = append(all, e)
			if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
				t.Fatalf("CreateEmails: %v", err)
			}
		}
		sortListOrder(all)
		want := ids(all)
		for _, limit := range []int{1, 3, 7, 30, 100} {
			var got []string
			for off := int64(0); off < 40; off += int64(limit) {
				page, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: limit, Offset: off})
				if err != nil {
					t.Fatalf("ListEmails: %v", err)
				}
				got = append(got, ids(page)...)
			}
			if !slices.Equal(got, want) {
				t.Errorf("pages of %d = %v, want %v", limit, got, want)
			}
		}
		page, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 10, Offset: 9007199254740991})
		if err != nil || len(page) != 0 {
			t.Errorf("ListEmails(huge offset) = %v, %v; want empty", ids(page), err)
		}
	})
}

func TestListInvalid(t *testing.T) {
	t.Parallel()
	s := New(singleClient(t), Options{Prefix: "mailsinktest:" + randomHex(8) + ":"})
	defer s.Close()
	for _, q := range []store.ListQuery{
		{AccountID: acct, Limit: 0},
		{AccountID: acct, Limit: 101},
		{AccountID: acct, Limit: 10, Offset: -1},
		{AccountID: acct, Limit: 10, Status: "new"},
	} {
		_, err := s.ListEmails(context.Background(), q)
		wantCode(t, fmt.Sprintf("ListEmails(%+v)", q), err, store.Invalid)
	}
}

// TestFilters compares every combination of filters, offsets and limits with
// a model, with scan batches small enough that every scan takes many.
func TestFilters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		rng := rand.New(rand.NewPCG(1, 2))
		recipients := []string{"Ann@Example.com", "bob@example.com", "carl@example.net"}
		senders := []string{"shop@example.com", "News@Example.org"}
		subjects := []*string{nil, ptr("Hello world"), ptr("HELLO again"), ptr("Größe 100%"), ptr("100_% off"), ptr(""), ptr("\u212Aelvin <b>&amp;</b>")}
		statuses := []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived}
		var model []*store.Email
		for len(model) < 240 {
			// One message to one to three recipients, sharing a body.
			ms := 1700000000000 + rng.Int64N(60)
			n := 1 + rng.IntN(3)
			sender := senders[rng.IntN(len(senders))]
			subject := subjects[rng.IntN(len(subjects))]
			var group []*store.Email
			for _, r := range rng.Perm(len(recipients))[:n] {
				e := testEmail(acct, recipients[r], sender, ms)
				e.ID = randomUUID()
				e.Subject = subject
				group = append(group, e)
			}
			if err := s.CreateEmails(ctx, testBody("x"), group); err != nil {
				t.Fatalf("CreateEmails: %v", err)
			}
			model = append(model, group...)
		}
		for _, e := range model {
			if st := statuses[rng.IntN(3)]; st != e.Status {
				got, err := s.UpdateEmail(ctx, acct, e.ID, store.Update{Status: &st})
				if err != nil {
					t.Fatalf("UpdateEmail: %v", err)
				}
				*e = *got
			}
		}
		// Another account's emails must never show.
		noise := testEmail("other-account", recipients[0], senders[0], 1700000000030)
		if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{noise}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		sortListOrder(model)

		type filter struct{ rcpt, sender, subject string }
		var queries []store.ListQuery
		for _, rcpt := range []string{"", "ANN@example.COM", "carl@example.net", "nobody@example.com"} {
			for _, sender := range []string{"", "news@example.org", "SHOP@example.com"} {
				for _, st := range []store.Status{"", store.StatusProcessed, store.StatusArchived} {
					for _, subj := range []string{"", "hello", "GRÖSSE", "größe", "0%", "_%", "%", "zzz", "kelvin", "<B>&"} {
						for _, since := range []time.Time{{}, time.UnixMilli(1700000000029).Add(time.Microsecond)} {
							queries = append(queries, store.ListQuery{
								AccountID: acct, Recipient: rcpt, Sender: sender, Status: st, Subject: subj, Since: since,
							})
						}
					}
				}
			}
		}
		nonEmpty := 0
		for _, q := range queries {
			if len(modelList(model, q)) > 0 {
				nonEmpty++
			}
		}
		if nonEmpty < len(queries)/4 {
			t.Fatalf("only %d of %d queries match anything; the data set is too sparse to test", nonEmpty, len(queries))
		}
		for _, batch := range []int{scanBatch, 3} {
			s.batch = batch
			for _, q := range queries {
				want := modelList(model, q)
				for _, page := range []struct {
					offset int64
					limit  int
				}{{0, 100}, {0, 1}, {1, 2}, {5, 3}, {int64(len(want)) - 1, 100}, {int64(len(want)), 5}} {
					if page.offset < 0 {
						continue
					}
					q.Offset, q.Limit = page.offset, page.limit
					got, err := s.ListEmails(ctx, q)
					if err != nil {
						t.Fatalf("ListEmails(%+v): %v", q, err)
					}
					w := want[min(int(q.Offset), len(want)):]
					w = w[:min(q.Limit, len(w))]
					if !reflect.DeepEqual(got, w) && !(len(got) == 0 && len(w) == 0) {
						t.Fatalf("batch %d: ListEmails(%+v) = %v, want %v", batch, q, ids(got), ids(w))
					}
				}
			}
		}
	})
}

// modelList is what ListEmails must answer for q, without offset and limit,
// from emails in list order.
func modelList(emails []*store.Email, q store.ListQuery) []*store.Email {
	var out []*store.Email
	for _, e := range emails {
		switch {
		case e.AccountID != q.AccountID,
			q.Recipient != "" && !strings.EqualFold(e.Recipient, q.Recipient),
			q.Sender != "" && !strings.EqualFold(e.Sender, q.Sender),
			q.Status != "" && e.Status != q.Status,
			q.Subject != "" && (e.Subject == nil || !strings.Contains(strings.ToLower(*e.Subject), strings.ToLower(q.Subject))),
			!q.Since.IsZero() && !e.ReceivedAt.After(q.Since):
			continue
		}
		out = append(out, e)
	}
	return out
}

func sortListOrder(es []*store.Email) {
	slices.SortFunc(es, func(a, b *store.Email) int {
		if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// randomUUID returns a random lower-case version 4 UUID: unlike NewID's
// version 7 its order has nothing to do with creation time.
func randomUUID() string {
	b := []byte(randomHex(16))
	b[12] = '4'
	b[16] = "89ab"[rand.IntN(4)]
	s := string(b)
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// TestScanCursor checks that a scan continues right after its cursor when
// the cursor's email is deleted and newer emails arrive between batches.
func TestScanCursor(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		var all []*store.Email
		for i := range 12 {
			e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000+int64(i/4))
			e.ID = randomUUID()
			all = append(all, e)
			if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
				t.Fatalf("CreateEmails: %v", err)
			}
		}
		sortListOrder(all)
		k := s.account(acct)
		batch := func(cursorScore, cursorID string) (string, string, []string) {
			t.Helper()
			v, err := scanScript.Run(ctx, s.client, []string{k.all()}, k.emailPrefix(), 1, cursorScore, cursorID, "-inf", 3, 0, 3, "", "",
				k.records()).Slice()
			if err != nil {
				t.Fatalf("scan script: %v", err)
			}
			var got []string
			for i := 5; i < len(v); i += itemLen {
				got = append(got, v[i].(string))
			}
			return v[2].(string), v[3].(string), got
		}
		cs, cid, got := batch("", "")
		if want := ids(all[:3]); !slices.Equal(got, want) {
			t.Fatalf("first batch = %v, want %v", got, want)
		}
		// The cursor (third email) goes away; a newer email arrives.
		if err := s.DeleteEmail(ctx, acct, cid); err != nil {
			t.Fatalf("DeleteEmail: %v", err)
		}
		newer := testEmail(acct, "a@example.com", "b@example.com", 1700000000999)
		if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{newer}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		var rest []string
		for {
			var page []string
			cs, cid, page = batch(cs, cid)
			if len(page) == 0 {
				break
			}
			rest = append(rest, page...)
		}
		if want := ids(all[3:]); !slices.Equal(rest, want) {
			t.Errorf("batches after the cursor = %v, want %v", rest, want)
		}
	})
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000)
		if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		statusIDs := func(st store.Status) []string {
			t.Helper()
			l, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Status: st, Limit: 10})
			if err != nil {
				t.Fatalf("ListEmails: %v", err)
			}
			return ids(l)
		}
		if got := statusIDs(store.StatusReceived); !slices.Equal(got, []string{e.ID}) {
			t.Fatalf("received = %v, want [%s]", got, e.ID)
		}

		later := e.UpdatedAt.Add(time.Hour)
		archived := store.StatusArchived
		got, err := s.UpdateEmail(ctx, acct, strings.ToUpper(e.ID), store.Update{
			Labels:    &[]string{"l1", "l2"},
			Notes:     &store.Nullable{Value: ptr("seen")},
			Status:    &archived,
			Subject:   &store.Nullable{},
			UpdatedAt: later,
		})
		if err != nil {
			t.Fatalf("UpdateEmail: %v", err)
		}
		want := *e
		want.Labels = []string{"l1", "l2"}
		want.Notes = ptr("seen")
		want.Status = store.StatusArchived
		want.Subject = nil
		want.UpdatedAt = later
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("UpdateEmail = %+v, want %+v", got, &want)
		}
		if again, err := s.GetEmail(ctx, acct, e.ID); err != nil || !reflect.DeepEqual(again, &want) {
			t.Errorf("GetEmail after update = %+v, %v; want %+v", again, err, &want)
		}
		if got := statusIDs(store.StatusReceived); len(got) != 0 {
			t.Errorf("received after update = %v, want none", got)
		}
		if got := statusIDs(store.StatusArchived); !slices.Equal(got, []string{e.ID}) {
			t.Errorf("archived after update = %v, want [%s]", got, e.ID)
		}

		// An empty update changes nothing; clearing labels leaves [] not nil.
		got, err = s.UpdateEmail(ctx, acct, e.ID, store.Update{Labels: &[]string{}})
		if err != nil || got.Labels == nil || len(got.Labels) != 0 || got.UpdatedAt != later {
			t.Errorf("UpdateEmail(clear labels) = %+v, %v", got, err)
		}

		bad := store.Status("new")
		_, err = s.UpdateEmail(ctx, acct, e.ID, store.Update{Status: &bad})
		wantCode(t, "UpdateEmail(bad status)", err, store.Invalid)
		_, err = s.UpdateEmail(ctx, acct, store.NewID(), store.Update{Status: &archived})
		wantCode(t, "UpdateEmail(missing)", err, store.NotFound)
		_, err = s.UpdateEmail(ctx, "other", e.ID, store.Update{Status: &archived})
		wantCode(t, "UpdateEmail(other account)", err, store.NotFound)
	})
}

// TestConcurrentUpdates races updates of one email: every one must land
// exactly once and the status indexes must end consistent.
func TestConcurrentUpdates(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000)
		if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		statuses := []store.Status{store.StatusReceived, store.StatusProcessed, store.StatusArchived}
		errs := make(chan error, 40)
		for i := range 40 {
			go func() {
				st := statuses[i%3]
				_, err := s.UpdateEmail(ctx, acct, e.ID, store.Update{Status: &st, Notes: &store.Nullable{Value: ptr(fmt.Sprint(i))}})
				errs <- err
			}()
		}
		for range 40 {
			if err := <-errs; err != nil {
				t.Errorf("UpdateEmail: %v", err)
			}
		}
		final, err := s.GetEmail(ctx, acct, e.ID)
		if err != nil {
			t.Fatalf("GetEmail: %v", err)
		}
		for _, st := range statuses {
			l, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Status: st, Limit: 10})
			if err != nil {
				t.Fatalf("ListEmails: %v", err)
			}
			if want := st == final.Status; (len(l) == 1) != want || len(l) > 1 {
				t.Errorf("status %s lists %v; final status is %s", st, ids(l), final.Status)
			}
		}
	})
}

func TestDeleteFreesSharedBody(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		var group []*store.Email
		for _, r := range []string{"a@example.com", "b@example.com", "c@example.com"} {
			group = append(group, testEmail(acct, r, "s@example.com", 1700000000000))
		}
		if err := s.CreateEmails(ctx, testBody("shared"), group); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		solo := testEmail(acct, "a@example.com", "s@example.com", 1700000000001)
		if err := s.CreateEmails(ctx, testBody("solo"), []*store.Email{solo}); err != nil {
			t.Fatalf("CreateEmails: %v", err)
		}
		bodies := func() int {
			t.Helper()
			n, err := s.BodyCount(ctx)
			if err != nil {
				t.Fatalf("BodyCount: %v", err)
			}
			return n
		}
		if n := bodies(); n != 2 {
			t.Fatalf("BodyCount = %d, want 2", n)
		}
		for i, e := range group {
			if err := s.DeleteEmail(ctx, acct, strings.ToUpper(e.ID)); err != nil {
				t.Fatalf("DeleteEmail: %v", err)
			}
			wantCode(t, "DeleteEmail again", s.DeleteEmail(ctx, acct, e.ID), store.NotFound)
			_, err := s.GetEmail(ctx, acct, e.ID)
			wantCode(t, "GetEmail after delete", err, store.NotFound)
			_, err = s.GetBody(ctx, acct, e.ID)
			wantCode(t, "GetBody after delete", err, store.NotFound)
			for _, other := range group[i+1:] {
				if b, err := s.GetBody(ctx, acct, other.ID); err != nil || string(b.Raw) != "shared" {
					t.Fatalf("GetBody(sharing email) = %v, %v", b, err)
				}
			}
			if want := 2 - (i+1)/len(group); bodies() != want {
				t.Fatalf("after %d deletes BodyCount = %d, want %d", i+1, bodies(), want)
			}
		}
		l, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Recipient: "a@example.com", Limit: 10})
		if err != nil || !slices.Equal(ids(l), []string{solo.ID}) {
			t.Errorf("list after deletes = %v, %v; want [%s]", ids(l), err, solo.ID)
		}
		// Indexes of deleted emails are gone, not just filtered out.
		k := s.account(acct)
		for _, key := range []string{k.recipient("b@example.com"), k.recipient("c@example.com")} {
			if n, err := s.client.Exists(ctx, key).Result(); err != nil || n != 0 {
				t.Errorf("index %s still exists (%d, %v)", key, n, err)
			}
		}
	})
}

func TestAccountIsolation(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		// Ids that would break a naive key layout, and their escaped forms.
		accounts := []string{acct, "acme", "a}b{c", "a:b", "~61", "a b", "ü"}
		byAccount := map[string]*store.Email{}
		for _, a := range accounts {
			e := testEmail(a, "same@example.com", "s@example.com", 1700000000000)
			if err := s.CreateEmails(ctx, testBody(a), []*store.Email{e}); err != nil {
				t.Fatalf("CreateEmails(%q): %v", a, err)
			}
			byAccount[a] = e
		}
		for _, a := range accounts {
			e := byAccount[a]
			for _, q := range []store.ListQuery{
				{AccountID: a, Limit: 100},
				{AccountID: a, Recipient: "same@example.com", Limit: 100},
				{AccountID: a, Recipient: "same@example.com", Subject: "hello", Limit: 100},
			} {
				l, err := s.ListEmails(ctx, q)
				if err != nil || !slices.Equal(ids(l), []string{e.ID}) {
					t.Errorf("ListEmails(%+v) = %v, %v; want [%s]", q, ids(l), err, e.ID)
				}
			}
			if b, err := s.GetBody(ctx, a, e.ID); err != nil || string(b.Raw) != a {
				t.Errorf("GetBody(%q) = %v, %v", a, b, err)
			}
			for _, other := range accounts {
				if other == a {
					continue
				}
				_, err := s.GetEmail(ctx, other, e.ID)
				wantCode(t, "GetEmail from another account", err, store.NotFound)
				_, err = s.GetBody(ctx, other, e.ID)
				wantCode(t, "GetBody from another account", err, store.NotFound)
				_, err = s.UpdateEmail(ctx, other, e.ID, store.Update{Notes: &store.Nullable{}})
				wantCode(t, "UpdateEmail from another account", err, store.NotFound)
				wantCode(t, "DeleteEmail from another account", s.DeleteEmail(ctx, other, e.ID), store.NotFound)
			}
		}
		if l, err := s.ListEmails(ctx, store.ListQuery{AccountID: "nobody", Limit: 100}); err != nil || len(l) != 0 {
			t.Errorf("ListEmails(unknown account) = %v, %v", ids(l), err)
		}
	})
}

func TestLargeRaw(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		ctx := context.Background()
		s := newStore(t)
		raw := make([]byte, 25<<20)
		rng := rand.NewChaCha8([32]byte{1})
		_, _ = rng.Read(raw)
		e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000)
		e.RawSize = int64(len(raw))
		if err := s.CreateEmails(ctx, &store.Body{Raw: raw}, []*store.Email{e}); err != nil {
			t.Fatalf("CreateEmails(25 MiB): %v", err)
		}
		b, err := s.GetBody(ctx, acct, e.ID)
		if err != nil {
			t.Fatalf("GetBody: %v", err)
		}
		if !bytes.Equal(b.Raw, raw) {
			t.Errorf("raw of %d bytes came back as %d different bytes", len(raw), len(b.Raw))
		}
		l, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 10})
		if err != nil || len(l) != 1 || l[0].RawSize != int64(len(raw)) {
			t.Errorf("ListEmails = %v, %v", l, err)
		}
		if err := s.DeleteEmail(ctx, acct, e.ID); err != nil {
			t.Fatalf("DeleteEmail: %v", err)
		}
		if n, err := s.BodyCount(ctx); err != nil || n != 0 {
			t.Errorf("BodyCount after delete = %d, %v", n, err)
		}
	})
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000)
		for name, err := range map[string]error{
			"CreateEmails": s.CreateEmails(ctx, testBody("x"), []*store.Email{e}),
			"Ping":         s.Ping(ctx),
			"DeleteEmail":  s.DeleteEmail(ctx, acct, e.ID),
		} {
			wantCode(t, name, err, store.Unavailable)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: error %v is not context.Canceled", name, err)
			}
		}
		_, err := s.ListEmails(ctx, store.ListQuery{AccountID: acct, Limit: 1})
		wantCode(t, "ListEmails", err, store.Unavailable)
	})
}

func TestAccountTag(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"7a0c2b6e-0000-4000-8000-000000000001", "7a0c2b6e-0000-4000-8000-000000000001"},
		{"acme_Q.a", "acme_Q.a"},
		{"", "~"},
		{"a}b", "~617d62"},
		{"a:b", "~613a62"},
		{"~61", "~7e3631"},
	}
	for _, tt := range tests {
		if got := accountTag(tt.in); got != tt.want {
			t.Errorf("accountTag(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := escapeGlob(`a*b?[c]\`), `a\*b\?\[c\]\\`; got != want {
		t.Errorf("escapeGlob = %q, want %q", got, want)
	}
}

func TestNewClient(t *testing.T) {
	t.Parallel()
	if _, err := NewClient("", nil); err == nil {
		t.Error("NewClient with nothing: no error")
	}
	_, err := NewClient("redis://user:s3cret@host:port/0", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("NewClient(bad URL) error = %v; want one without the password", err)
	}
	if _, err := NewClient("http://host", nil); err == nil {
		t.Error("NewClient(http URL): no error")
	}
	c, err := NewClient("redis://u:p@127.0.0.1:1/0?dial_timeout=1s", []string{" 127.0.0.1:1 ", "", "127.0.0.1:2"})
	if err != nil {
		t.Fatalf("NewClient(cluster): %v", err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("NewClient(cluster) = %T, want *redis.ClusterClient", c)
	}
	o := cc.Options()
	if !slices.Equal(o.Addrs, []string{"127.0.0.1:1", "127.0.0.1:2"}) || o.Username != "u" || o.Password != "p" ||
		o.DialTimeout != time.Second || !o.ContextTimeoutEnabled {
		t.Errorf("cluster options = %+v", o)
	}
	c2, err := NewClient("redis://127.0.0.1:1/3", nil)
	if err != nil {
		t.Fatalf("NewClient(single): %v", err)
	}
	defer c2.Close()
	if o := c2.(*redis.Client).Options(); o.Addr != "127.0.0.1:1" || o.DB != 3 || !o.ContextTimeoutEnabled {
		t.Errorf("single options = %+v", o)
	}
}

// TestNewDoesNotNeedRedis creates a store on a port where nothing listens:
// creating it succeeds at once, and calls fail with Unavailable.
func TestNewDoesNotNeedRedis(t *testing.T) {
	t.Parallel()
	c, err := NewClient("redis://127.0.0.1:"+freePort(t)+"/0?dial_timeout=1s", nil)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	s := New(c, Options{})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wantCode(t, "Ping", s.Ping(ctx), store.Unavailable)
}

// TestStatsOfOlderEmails checks emails stored before the stats hash existed
// (no "sb" field): they are counted but their bytes are not, deleting them
// never makes the bytes wrong, and the hash goes with the last email.
func TestStatsOfOlderEmails(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		k := s.account(acct)
		old := testEmail(acct, "a@example.com", "s@example.com", 1000)
		old.RawSize = 100
		createOlder(t, s, testBody("old"), old)
		// What an older release wrote: no sb, nothing in the stats.
		if err := s.client.HDel(ctx, k.email(old.ID), "sb").Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.client.Del(ctx, k.stats()).Err(); err != nil {
			t.Fatal(err)
		}
		e := testEmail(acct, "b@example.com", "s@example.com", 2000)
		e.RawSize = 30
		if err := s.CreateEmails(ctx, testBody("new"), []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
		check := func(when string, emails, bytes int64) {
			t.Helper()
			n, b, err := s.AccountStats(ctx, acct)
			if err != nil || n != emails || b != bytes {
				t.Errorf("%s: AccountStats = %d, %d, %v; want %d, %d", when, n, b, err, emails, bytes)
			}
		}
		check("with an older email", 2, 30)
		if err := s.DeleteEmail(ctx, acct, old.ID); err != nil {
			t.Fatal(err)
		}
		check("after deleting the older email", 1, 30)
		if err := s.DeleteEmail(ctx, acct, e.ID); err != nil {
			t.Fatal(err)
		}
		check("after deleting both", 0, 0)
		if n, err := s.client.Exists(ctx, k.stats()).Result(); err != nil || n != 0 {
			t.Errorf("the stats hash of an empty account: EXISTS = %d, %v; want 0", n, err)
		}
	})
}
