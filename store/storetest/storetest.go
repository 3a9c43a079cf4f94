// Package storetest is the conformance suite every store.Store must pass. A
// backend's own test runs it in a few lines:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks what the doc comments of store.Store's roles promise,
// and, through BodyCount, that a shared body is freed with the last email
// that uses it.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// Store is an engine under test: the whole contract, and a count of the
// bodies it holds, with which the suite checks that bodies are freed. It
// must count bodies in the whole store, and the store given to each
// subtest starts empty.
type Store interface {
	store.Store
	BodyCount(ctx context.Context) (int, error)
}

// Run runs the conformance suite against the stores that newStore returns.
// Each call must return a new, empty store that no other call shares; the
// caller registers its cleanup with t.Cleanup. newStore is called from
// parallel subtests, so it must be safe for concurrent use.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"LargeRaw", testLargeRaw},
		{"SharedBody", testSharedBody},
		{"CreateValidation", testCreateValidation},
		{"NotFound", testNotFound},
		{"Ping", testPing},
		{"CancelledContext", testCancelledContext},
		{"Order", testOrder},
		{"Filters", testFilters},
		{"FilterCombinations", testFilterCombinations},
		{"SubjectIsLiteral", testSubjectIsLiteral},
		{"Since", testSince},
		{"LimitOffset", testLimitOffset},
		{"Pagination", testPagination},
		{"PaginationWhileInserting", testPaginationWhileInserting},
		{"Label", testLabel},
		{"Before", testBefore},
		{"CursorCombinations", testCursorCombinations},
		{"Count", testCount},
		{"PagingByCursor", testPagingByCursor},
		{"Update", testUpdate},
		{"UpdateNotFound", testUpdateNotFound},
		{"Delete", testDelete},
		{"Isolation", testIsolation},
		{"ConcurrentCreates", testConcurrentCreates},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ConcurrentDeletes", testConcurrentDeletes},
		{"Events", testEvents},
		{"EventsInCommitOrder", testEventsInCommitOrder},
		{"EventsAfterLongGap", testEventsAfterLongGap},
		{"Stats", testStats},
		{"StatsConcurrent", testStatsConcurrent},
		{"OldestEmails", testOldestEmails},
		{"OldestConcurrentKeep", testOldestConcurrentKeep},
		{"Idempotency", testIdempotency},
		{"FaultRules", testFaultRules},
		{"FaultExpiry", testFaultExpiry},
		{"FaultLimit", testFaultLimit},
		{"FaultConsumeConcurrent", testFaultConsumeConcurrent},
		{"FaultReadsDuringChanges", testFaultReadsDuringChanges},
		{"Webhooks", testWebhooks},
		{"DeliveryQueue", testDeliveryQueue},
		{"ConcurrentClaims", testConcurrentClaims},
		{"DeliveryLogBound", testDeliveryLogBound},
		{"ConcurrentWebhookCap", testConcurrentWebhookCap},
		{"DeliveryOfDeletedWebhook", testDeliveryOfDeletedWebhook},
		{"Sessions", testSessions},
		{"ReadState", testReadState},
		{"Checks", testChecks},
		{"PutChecks", testPutChecks},
		{"MailboxUIDs", testMailboxUIDs},
		{"MailboxUIDsConcurrent", testMailboxUIDsConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

// Accounts used by the suite. Every subtest has a store of its own, so they
// can be constants.
const (
	acctA = "acct-a"
	acctB = "acct-b"
)

// base is the receivedAt of email 0 unless a test says otherwise:
// 2026-01-01T00:00:00.123Z, with milliseconds to show they are kept.
var base = time.UnixMilli(1_767_225_600_123).UTC()

// id returns the n-th test id: a valid UUIDv7 whose order is n's order.
func id(n int) string {
	return fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012x", n)
}

func ptr[T any](v T) *T { return &v }

// at returns base plus d milliseconds.
func at(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

// emailOpt changes one field of a test email.
type emailOpt func(*store.Email)

func withRecipient(s string) emailOpt    { return func(e *store.Email) { e.Recipient = s } }
func withSender(s string) emailOpt       { return func(e *store.Email) { e.Sender = s } }
func withSubject(s string) emailOpt      { return func(e *store.Email) { e.Subject = &s } }
func withNoSubject() emailOpt            { return func(e *store.Email) { e.Subject = nil } }
func withStatus(s store.Status) emailOpt { return func(e *store.Email) { e.Status = s } }
func withNotes(s string) emailOpt        { return func(e *store.Email) { e.Notes = &s } }
func withLabels(l ...string) emailOpt    { return func(e *store.Email) { e.Labels = l } }
func withReceivedAt(t time.Time) emailOpt {
	return func(e *store.Email) { e.ReceivedAt, e.CreatedAt, e.UpdatedAt = t, t, t }
}

// newEmail returns email n of accountID: received n seconds after base by
// rcpt@example.com from sender@example.com, subject "email n", status
// received, no labels.
func newEmail(accountID string, n int, opts ...emailOpt) *store.Email {
	t := base.Add(time.Duration(n) * time.Second)
	e := &store.Email{
		ID:         id(n),
		AccountID:  accountID,
		MessageID:  ptr(fmt.Sprintf("<%d@example.com>", n)),
		Sender:     "sender@example.com",
		Recipient:  "rcpt@example.com",
		Subject:    ptr(fmt.Sprintf("email %d", n)),
		Status:     store.StatusReceived,
		Labels:     []string{},
		RawSize:    int64(len(rawFor(n))),
		ReceivedAt: t,
		CreatedAt:  t,
		UpdatedAt:  t,
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

func rawFor(n int) string {
	return fmt.Sprintf("Subject: email %d\r\n\r\nbody %d\r\n", n, n)
}

// newBody returns a small body for email n.
func newBody(n int) *store.Body {
	return &store.Body{
		Raw: []byte(rawFor(n)),
		Given: &store.Parts{
			Text:        ptr(fmt.Sprintf("body %d\r\n", n)),
			Headers:     map[string]string{"subject": fmt.Sprintf("email %d", n)},
			Attachments: []store.Attachment{},
		},
	}
}

// create stores each email with a body of its own.
func create(t *testing.T, s Store, emails ...*store.Email) {
	t.Helper()
	for _, e := range emails {
		if err := s.CreateEmails(context.Background(), newBody(0), []*store.Email{e}); err != nil {
			t.Fatalf("CreateEmails(%s): %v", e.ID, err)
		}
	}
}

// createAll stores each email with a body of its own from a few goroutines,
// so that large fixtures do not wait for one commit after another.
func createAll(t *testing.T, s Store, emails []*store.Email) {
	t.Helper()
	const workers = 8
	errs := make(chan error, len(emails))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(emails); i += workers {
				if err := s.CreateEmails(context.Background(), newBody(i), emails[i:i+1]); err != nil {
					errs <- fmt.Errorf("CreateEmails(%s): %w", emails[i].ID, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// list returns the emails that q selects, failing the test on an error.
func list(t *testing.T, s Store, q store.ListQuery) []*store.Email {
	t.Helper()
	got, err := s.ListEmails(context.Background(), q)
	if err != nil {
		t.Fatalf("ListEmails(%s): %v", describe(q), err)
	}
	return got
}

// listIDs returns the ids of the emails that q selects, in list order.
func listIDs(t *testing.T, s Store, q store.ListQuery) []string {
	t.Helper()
	return ids(list(t, s, q))
}

func ids(emails []*store.Email) []string {
	out := make([]string, len(emails))
	for i, e := range emails {
		out[i] = e.ID
	}
	return out
}

func idsOf(ns ...int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = id(n)
	}
	return out
}

// describe renders the set fields of q for failure messages.
func describe(q store.ListQuery) string {
	var b strings.Builder
	fmt.Fprintf(&b, "account=%q", q.AccountID)
	if q.Recipient != "" {
		fmt.Fprintf(&b, " recipient=%q", q.Recipient)
	}
	if q.Sender != "" {
		fmt.Fprintf(&b, " sender=%q", q.Sender)
	}
	if q.Status != "" {
		fmt.Fprintf(&b, " status=%q", q.Status)
	}
	if q.Subject != "" {
		fmt.Fprintf(&b, " subject=%q", q.Subject)
	}
	if q.Label != "" {
		fmt.Fprintf(&b, " label=%q", q.Label)
	}
	if !q.Since.IsZero() {
		fmt.Fprintf(&b, " since=%s", q.Since.Format(time.RFC3339Nano))
	}
	if q.Before != "" {
		fmt.Fprintf(&b, " before=%s", q.Before)
	}
	fmt.Fprintf(&b, " limit=%d offset=%d", q.Limit, q.Offset)
	return b.String()
}

// sortListOrder sorts emails in list order: ReceivedAt descending, then ID
// descending.
func sortListOrder(emails []*store.Email) {
	slices.SortFunc(emails, func(a, b *store.Email) int {
		if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// matches is the reference for ListQuery's filters other than paging and
// Before.
func matches(e *store.Email, q store.ListQuery) bool {
	switch {
	case e.AccountID != q.AccountID,
		q.Recipient != "" && !strings.EqualFold(e.Recipient, q.Recipient),
		q.Sender != "" && !strings.EqualFold(e.Sender, q.Sender),
		q.Status != "" && e.Status != q.Status,
		q.Subject != "" && (e.Subject == nil || !strings.Contains(strings.ToLower(*e.Subject), strings.ToLower(q.Subject))),
		q.Label != "" && !slices.Contains(e.Labels, q.Label),
		!q.Since.IsZero() && !e.ReceivedAt.After(q.Since):
		return false
	}
	return true
}

// listsAfter reports whether a comes after b in list order.
func listsAfter(a, b *store.Email) bool {
	if c := a.ReceivedAt.Compare(b.ReceivedAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// selected returns the emails that q's filters and Before select from
// emails, in list order; q.Before must name one of emails.
func selected(emails []*store.Email, q store.ListQuery) []*store.Email {
	var cursor *store.Email
	for _, e := range emails {
		if q.Before != "" && e.ID == q.Before {
			cursor = e
		}
	}
	var sel []*store.Email
	for _, e := range emails {
		if matches(e, q) && (cursor == nil || listsAfter(e, cursor)) {
			sel = append(sel, e)
		}
	}
	sortListOrder(sel)
	return sel
}

// expect returns the ids that q should list from emails, per the reference.
func expect(emails []*store.Email, q store.ListQuery) []string {
	sel := selected(emails, q)
	if q.Offset >= int64(len(sel)) {
		return []string{}
	}
	sel = sel[q.Offset:]
	if len(sel) > q.Limit {
		sel = sel[:q.Limit]
	}
	return ids(sel)
}

func equalIDs(got, want []string) bool {
	return slices.Equal(got, want) || len(got) == 0 && len(want) == 0
}

// wantCode fails the test unless err carries code.
func wantCode(t *testing.T, err error, code store.Code, what string) {
	t.Helper()
	if got := store.CodeOf(err); got != code {
		t.Errorf("%s: got error %v (code %v), want code %v", what, err, got, code)
	}
}

// mustGet returns the email, failing the test when it cannot.
func mustGet(t *testing.T, s Store, accountID, id string) *store.Email {
	t.Helper()
	e, err := s.GetEmail(context.Background(), accountID, id)
	if err != nil {
		t.Fatalf("GetEmail(%s, %s): %v", accountID, id, err)
	}
	return e
}

// checkBodyCount fails the test when the store has other than want
// bodies.
func checkBodyCount(t *testing.T, s Store, want int, when string) {
	t.Helper()
	got, err := s.BodyCount(context.Background())
	if err != nil {
		t.Fatalf("BodyCount: %v", err)
	}
	if got != want {
		t.Errorf("%s: BodyCount() = %d, want %d", when, got, want)
	}
}
