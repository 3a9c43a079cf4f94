package redisstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// The release before the records hash stored each email in a metadata hash
// of its own (P{T}:e:<id>) and each body in a hash with "raw", "meta" and
// "refs" (P{T}:b:<bodyid>). olderCreateScript and createOlder are that
// release's create, copied, so that the tests below write what it wrote and
// check that this store reads, changes and deletes it.

// olderCreateScript is the older release's createScript, unchanged.
var olderCreateScript = redis.NewScript(publishFn + `
local n = (#KEYS - 4) / 4
local e = 3 + 9 * n
local bodyID, deadline, fence = ARGV[e + 2 + n], tonumber(ARGV[e + 3 + n]), ARGV[e + 4 + n]
if deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= deadline then
    return -1
  end
end
for i = 0, n - 1 do
  if redis.call('EXISTS', fence .. ARGV[3 + 9 * i]) == 1 then
    return -1
  end
end
for i = 0, n - 1 do
  local m = redis.call('HGET', KEYS[4 + 4 * i], 'm')
  if m then
    if cjson.decode(m).b == bodyID then return {} end
    return i + 1
  end
end
redis.call('HSET', KEYS[2], 'raw', ARGV[2], 'meta', ARGV[1], 'refs', n)
for i = 0, n - 1 do
  local a = 3 + 9 * i
  local id, score, size = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  redis.call('HSET', KEYS[4 + 4 * i], 'm', ARGV[a + 3], 'st', ARGV[a + 4], 'subj', ARGV[a + 5],
    'notes', ARGV[a + 6], 'labels', ARGV[a + 7], 'upd', ARGV[a + 8], 'sb', size)
  redis.call('ZADD', KEYS[1], score, id)
  redis.call('ZADD', KEYS[5 + 4 * i], score, id)
  redis.call('ZADD', KEYS[6 + 4 * i], score, id)
  redis.call('ZADD', KEYS[7 + 4 * i], score, id)
  redis.call('HINCRBY', KEYS[3], 'bytes', size)
end
local ids = {}
for i = 0, n - 1 do
  local id = redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[e], '*', 'e', ARGV[e + 2 + i])
  publish(ARGV[e + 1], id .. ' ' .. ARGV[e + 2 + i])
  ids[#ids + 1] = id
end
return ids
`)

// encodeBody returns the bodyRecord of b as the older release wrote it
// (json.Marshal's form, with nil headers as {} and nil attachments as []).
func encodeBody(b *store.Body) string {
	r := bodyRecord{Headers: map[string]string{}, Attachments: []attachmentRecord{}, Transcript: b.Transcript, Unparsed: b.Given == nil}
	if g := b.Given; g != nil {
		r.Text, r.HTML = g.Text, g.HTML
		if g.Headers != nil {
			r.Headers = g.Headers
		}
		for _, a := range g.Attachments {
			r.Attachments = append(r.Attachments, attachmentRecord(a))
		}
	}
	return marshal(&r)
}

// createOlder stores emails sharing body as the older release did, and
// publishes their events.
func createOlder(t testing.TB, s *Store, body *store.Body, emails ...*store.Email) {
	t.Helper()
	ctx := context.Background()
	accountID, bodyID := emails[0].AccountID, store.NewID()
	k := s.account(accountID)
	keys := []string{k.all(), k.body(bodyID), k.stats()}
	args := []any{encodeBody(body), body.Raw}
	var events []any
	for _, e := range emails {
		id := store.NormalizeID(e.ID)
		vals := newRecord(e, id, bodyID).values()
		keys = append(keys, k.email(id), k.recipient(e.Recipient), k.sender(e.Sender), k.status(e.Status))
		args = append(args, id, formatInt(e.ReceivedAt.UnixMilli()), formatInt(e.RawSize))
		for _, v := range vals {
			args = append(args, v)
		}
		events = append(events, createdPayload(accountID, id, vals))
	}
	keys = append(keys, k.events())
	args = append(args, eventHistory, s.target(k))
	args = append(args, events...)
	args = append(args, bodyID, "0", k.fencePrefix())
	res, err := olderCreateScript.Run(ctx, s.client, keys, args...).Result()
	if err != nil {
		t.Fatalf("older create: %v", err)
	}
	if v, ok := res.([]any); !ok || len(v) != len(emails) {
		t.Fatalf("older create answered %v", res)
	}
}

// TestOlderLayout stores emails as the older release did next to emails of
// this one in one account, and checks every read and write of the store on
// both: gets, bodies (shared and parsed), pages and scans in list order,
// counts, stats, the oldest, updates and their events, the events of the
// older creates, conflicts with an older id, and deletes down to an empty
// account without a body or a stats key left.
func TestOlderLayout(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		text, html := "older text", "<p>older</p>"
		parsed := &store.Body{Raw: []byte("Subject: Older\\r\\n\\r\\nolder text\\r\\n"), Given: &store.Parts{Text: &text, HTML: &html, Headers: map[string]string{"subject": "Older"}, Attachments: []store.Attachment{{Filename: ptr("a.pdf"), ContentType: ptr("application/pdf"), Size: 10}}}}
		older := func(rcpt string, ms int64, subject string, labels ...string) *store.Email {
			e := testEmail(acct, rcpt, "o@example.com", ms)
			e.Subject, e.RawSize, e.Labels = ptr(subject), int64(len(parsed.Raw)), append([]string{}, labels...)
			return e
		}
		oa, ob := older("a@example.com", 1000, "Older one", "x"), older("b@example.com", 1001, "Older two")
		createOlder(t, s, parsed, oa, ob)
		oc := older("c@example.com", 3000, "Older three")
		oc.Status = store.StatusProcessed
		createOlder(t, s, testBody("older c"), oc)
		na := testEmail(acct, "a@example.com", "n@example.com", 2000)
		nb := testEmail(acct, "A@example.com", "n@example.com", 4000)
		for _, e := range []*store.Email{na, nb} {
			e.Subject = ptr("Newer")
			if err := s.CreateEmails(ctx, smtpLikeBody(1, 2048), []*store.Email{e}); err != nil {
				t.Fatal(err)
			}
		}
		listIDs := func(q store.ListQuery) []string {
			t.Helper()
			q.AccountID, q.Limit = acct, 10
			got, err := s.ListEmails(ctx, q)
			if err != nil {
				t.Fatalf("ListEmails(%+v): %v", q, err)
			}
			return ids(got)
		}
		for _, tc := range []struct {
			q    store.ListQuery
			want []*store.Email
		}{
			{store.ListQuery{}, []*store.Email{nb, oc, na, ob, oa}},
			{store.ListQuery{Recipient: "a@example.com"}, []*store.Email{nb, na, oa}},
			{store.ListQuery{Sender: "o@example.com"}, []*store.Email{oc, ob, oa}},
			{store.ListQuery{Status: store.StatusProcessed}, []*store.Email{oc}},
			{store.ListQuery{Label: "x"}, []*store.Email{oa}},
			{store.ListQuery{Subject: "older", Recipient: "a@example.com"}, []*store.Email{oa}},
			{store.ListQuery{Subject: "OLDER"}, []*store.Email{oc, ob, oa}},
			{store.ListQuery{Before: na.ID}, []*store.Email{ob, oa}},
		} {
			if got := listIDs(tc.q); !slices.Equal(got, ids(tc.want)) {
				t.Errorf("ListEmails(%+v) = %v, want %v", tc.q, got, ids(tc.want))
			}
			tc.q.AccountID = acct
			if n, err := s.CountEmails(ctx, tc.q); err != nil || n != int64(len(tc.want)) {
				t.Errorf("CountEmails(%+v) = %d, %v; want %d", tc.q, n, err, len(tc.want))
			}
		}
		for _, e := range []*store.Email{oa, ob, oc, na, nb} {
			got, err := s.GetEmail(ctx, acct, e.ID)
			if err != nil || got.ID != e.ID || got.Recipient != e.Recipient || *got.Subject != *e.Subject ||
				got.Status != e.Status || !slices.Equal(got.Labels, e.Labels) || !got.ReceivedAt.Equal(e.ReceivedAt) {
				t.Errorf("GetEmail(%s) = %+v, %v; want %+v", e.ID, got, err, e)
			}
		}
		for _, e := range []*store.Email{oa, ob} {
			b, err := s.GetBody(ctx, acct, e.ID)
			if err != nil || string(b.Raw) != string(parsed.Raw) || b.Given == nil || *b.Given.Text != text || *b.Given.HTML != html ||
				len(b.Given.Attachments) != 1 || *b.Given.Attachments[0].Filename != "a.pdf" || b.Given.Headers["subject"] != "Older" {
				t.Errorf("GetBody(%s) = %+v, %v", e.ID, b, err)
			}
		}
		wantBytes := 3*int64(len(parsed.Raw)) + na.RawSize + nb.RawSize
		if n, b, err := s.AccountStats(ctx, acct); err != nil || n != 5 || b != wantBytes {
			t.Errorf("AccountStats = %d, %d, %v; want 5, %d", n, b, err, wantBytes)
		}
		if got, err := s.OldestEmails(ctx, acct, 0, 0, 3); err != nil || !slices.Equal(ids(got), ids([]*store.Email{oa, ob, na})) {
			t.Errorf("OldestEmails = %v, %v; want %v", ids(got), err, ids([]*store.Email{oa, ob, na}))
		}
		if err := s.CreateEmails(ctx, testBody("again"), []*store.Email{na, oa}); !store.IsCode(err, store.Conflict) {
			t.Errorf("CreateEmails with an older email's id: %v, want Conflict", err)
		}

		events, _, err := s.EventsAfter(ctx, acct, "0-0")
		if err != nil || len(events) != 5 {
			t.Fatalf("EventsAfter = %d events, %v; want 5", len(events), err)
		}
		if e := events[0]; e.Type != store.EmailCreated || e.Email == nil || e.Email.ID != oa.ID || e.Email.Recipient != oa.Recipient {
			t.Errorf("the older create's event = %+v", e)
		}

		archived, read := store.StatusArchived, true
		if got, err := s.GetEmail(ctx, acct, ob.ID); err != nil || got.Read {
			t.Errorf("an older email (no read state kept) reads as read = %v, %v; want unread", got.Read, err)
		}
		up, err := s.UpdateEmail(ctx, acct, ob.ID, store.Update{Status: &archived, Labels: &[]string{"y"}, Read: &read})
		if err != nil || up.Status != archived || !slices.Equal(up.Labels, []string{"y"}) || *up.Subject != "Older two" || !up.Read {
			t.Fatalf("UpdateEmail(older) = %+v, %v", up, err)
		}
		if got, err := s.GetEmail(ctx, acct, ob.ID); err != nil || !got.Read {
			t.Errorf("the older email after marking it read: read = %v, %v", got.Read, err)
		}
		if got := listIDs(store.ListQuery{Status: archived}); !slices.Equal(got, []string{ob.ID}) {
			t.Errorf("archived after the update = %v, want %v", got, ob.ID)
		}
		if got := listIDs(store.ListQuery{Label: "y"}); !slices.Equal(got, []string{ob.ID}) {
			t.Errorf("label y after the update = %v, want %v", got, ob.ID)
		}
		events, _, err = s.EventsAfter(ctx, acct, events[4].ID)
		if err != nil || len(events) != 1 || events[0].Type != store.EmailUpdated || events[0].Email.Status != archived {
			t.Errorf("the update's event = %+v, %v", events, err)
		}

		// One PutChecks finds emails of either layout, and keeps nothing
		// for an id without an email.
		absent := testEmail(acct, "m@example.com", "n@example.com", 5000)
		err = s.PutChecks(ctx, acct, "digest", map[string][]byte{oa.ID: []byte("older"), na.ID: []byte("newer"), absent.ID: []byte("none")})
		if err != nil {
			t.Fatalf("PutChecks: %v", err)
		}
		if got, err := s.GetChecks(ctx, acct, []string{oa.ID, na.ID, absent.ID}, "digest"); err != nil ||
			len(got) != 2 || string(got[oa.ID]) != "older" || string(got[na.ID]) != "newer" {
			t.Errorf("GetChecks after PutChecks = %q, %v; want the older and the newer email's", got, err)
		}
		if n, err := s.client.Exists(ctx, s.account(acct).checks(absent.ID)).Result(); err != nil || n != 0 {
			t.Errorf("check results of an id without an email: EXISTS = %d, %v; want 0", n, err)
		}

		// The shared older body stays until its last email goes.
		if err := s.DeleteEmail(ctx, acct, oa.ID); err != nil {
			t.Fatal(err)
		}
		if b, err := s.GetBody(ctx, acct, ob.ID); err != nil || b.Given == nil || *b.Given.Text != text {
			t.Errorf("GetBody of the other email sharing the body: %+v, %v", b, err)
		}
		if n, err := s.BodyCount(ctx); err != nil || n != 4 {
			t.Errorf("BodyCount = %d, %v; want 4", n, err)
		}
		for _, e := range []*store.Email{ob, oc, na, nb} {
			if err := s.DeleteEmail(ctx, acct, e.ID); err != nil {
				t.Fatalf("DeleteEmail(%s): %v", e.ID, err)
			}
		}
		if n, err := s.BodyCount(ctx); err != nil || n != 0 {
			t.Errorf("BodyCount after deleting all = %d, %v; want 0", n, err)
		}
		if n, b, err := s.AccountStats(ctx, acct); err != nil || n != 0 || b != 0 {
			t.Errorf("AccountStats after deleting all = %d, %d, %v", n, b, err)
		}
		k := s.account(acct)
		if n, err := s.client.Exists(ctx, k.stats(), k.records(), k.bodyRefs()).Result(); err != nil || n != 0 {
			t.Errorf("stats, records and body refs of an empty account: EXISTS = %d, %v; want 0", n, err)
		}
		// Deleted emails leave no check results, and a PutChecks after
		// the deletes makes none.
		if err := s.PutChecks(ctx, acct, "digest", map[string][]byte{oa.ID: []byte("late"), na.ID: []byte("late")}); err != nil {
			t.Fatalf("PutChecks after the deletes: %v", err)
		}
		if n, err := s.client.Exists(ctx, k.checks(oa.ID), k.checks(na.ID)).Result(); err != nil || n != 0 {
			t.Errorf("check results of deleted emails: EXISTS = %d, %v; want 0", n, err)
		}
	})
}

// TestOlderLayoutReadInLists marks emails of the older layout read, as a
// user does after the upgrade, and checks that every way of listing them
// (a page of one index, a scan for a subject or a label, a page after a
// cursor) says they are read, as GetEmail does, and the others unread.
func TestOlderLayoutReadInLists(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(t testing.TB) *Store) {
		t.Parallel()
		ctx := context.Background()
		s := newStore(t)
		var older []*store.Email
		for i := range 4 {
			e := testEmail(acct, "a@example.com", "o@example.com", 1000+int64(i))
			e.Subject, e.Labels = ptr(fmt.Sprintf("Older %d", i)), []string{"x"}
			createOlder(t, s, testBody("older"), e)
			older = append(older, e)
		}
		read := map[string]bool{older[1].ID: true, older[3].ID: true}
		for id := range read {
			if _, err := s.UpdateEmail(ctx, acct, id, store.Update{Read: ptr(true), UpdatedAt: time.UnixMilli(2000).UTC()}); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []store.ListQuery{{}, {Recipient: "a@example.com"}, {Status: store.StatusReceived}, {Subject: "older"},
			{Label: "x"}, {Sender: "o@example.com", Recipient: "a@example.com"}, {Before: older[3].ID}} {
			q.AccountID, q.Limit = acct, 10
			got, err := s.ListEmails(ctx, q)
			if err != nil {
				t.Fatalf("ListEmails(%+v): %v", q, err)
			}
			if len(got) == 0 {
				t.Fatalf("ListEmails(%+v) found none", q)
			}
			for _, e := range got {
				if e.Read != read[e.ID] {
					t.Errorf("ListEmails(%+v): email %s read %v, want %v", q, e.ID, e.Read, read[e.ID])
				}
			}
		}
		for _, e := range older {
			if got, err := s.GetEmail(ctx, acct, e.ID); err != nil || got.Read != read[e.ID] {
				t.Errorf("GetEmail(%s) = %+v, %v; want read %v", e.ID, got, err, read[e.ID])
			}
		}
	})
}
