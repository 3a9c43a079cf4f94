package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/smtp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/api"
	"github.com/mailsink/mailsink/client"
	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// start runs a mailsink on the embedded store and returns a client of its
// acme account.
func start(t *testing.T) (*testenv.Env, *client.Client) {
	t.Helper()
	return startOn(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded})
}

func startOn(t *testing.T, b testenv.Backend) (*testenv.Env, *client.Client) {
	t.Helper()
	e := testenv.Start(t, b, nil)
	return e, newClient(t, e.BaseURL, testenv.AcmeKey)
}

// newClient returns a client whose every request and answer is checked
// against the API contract (api/openapi.yaml): each call must be a
// documented operation, send a body its schema allows and get an answer the
// document describes.
func newClient(t *testing.T, baseURL, key string) *client.Client {
	o := testenv.NewOpenAPI(t, api.OpenAPIJSON())
	return client.New(baseURL, key, client.WithHTTPClient(&http.Client{Transport: o.Transport(t)}))
}

func ptr[T any](v T) *T { return &v }

func TestCreateListGetUpdateDelete(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := context.Background()
	a, err := c.Create(ctx, client.NewEmail{Recipient: "a@acme.test", Sender: "app@example.com",
		Subject: ptr("Welcome"), Text: ptr("Hello"), HTML: ptr("<p>Hello</p>")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, client.NewEmail{Recipient: "b@acme.test", Sender: "app@example.com", Subject: ptr("Receipt")})
	if err != nil {
		t.Fatal(err)
	}
	if a.Account == nil || a.Account.Slug != "acme" || a.Status != "received" || a.ReceivedAt.IsZero() {
		t.Errorf("created = %+v", a)
	}

	all, err := c.List(ctx, client.ListOptions{})
	if err != nil || len(all) != 2 || all[0].ID != b.ID || all[1].ID != a.ID {
		t.Fatalf("List = %v, %v; want [b a]", all, err)
	}
	page, err := c.List(ctx, client.ListOptions{Limit: 1, Before: b.ID})
	if err != nil || len(page) != 1 || page[0].ID != a.ID {
		t.Errorf("List(limit 1, before b) = %v, %v; want [a]", page, err)
	}
	if got, err := c.List(ctx, client.ListOptions{Filter: client.Filter{Recipient: "A@acme.test"}}); err != nil || len(got) != 1 || got[0].ID != a.ID {
		t.Errorf("List(recipient) = %v, %v", got, err)
	}
	if got, err := c.List(ctx, client.ListOptions{Offset: 1}); err != nil || len(got) != 1 || got[0].ID != a.ID {
		t.Errorf("List(offset 1) = %v, %v", got, err)
	}
	if n, err := c.Count(ctx, client.Filter{Subject: "welc"}, ""); err != nil || n != 1 {
		t.Errorf("Count(subject) = %d, %v; want 1", n, err)
	}
	if n, err := c.Count(ctx, client.Filter{}, b.ID); err != nil || n != 1 {
		t.Errorf("Count(before b) = %d, %v; want 1", n, err)
	}

	d, err := c.Get(ctx, a.ID)
	if err != nil || d.Body == nil || d.Body.Text == nil || *d.Body.Text != "Hello" || *d.Subject != "Welcome" {
		t.Fatalf("Get = %+v, %v", d, err)
	}

	u, err := c.Update(ctx, a.ID, client.Update{Labels: []string{"signup"}, Status: "processed", Notes: ptr("seen")})
	if err != nil || !slices.Equal(u.Labels, []string{"signup"}) || u.Status != "processed" || *u.Notes != "seen" {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	if got, err := c.List(ctx, client.ListOptions{Filter: client.Filter{Label: "signup", Status: "processed"}}); err != nil || len(got) != 1 {
		t.Errorf("List(label, status) = %v, %v", got, err)
	}
	if u, err := c.Update(ctx, a.ID, client.Update{ClearNotes: true, Labels: []string{}}); err != nil || u.Notes != nil || len(u.Labels) != 0 {
		t.Errorf("Update(clear) = %+v, %v", u, err)
	}

	if err := c.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, a.ID); !client.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want 404", err)
	}
	if n, err := c.DeleteMatching(ctx, client.Filter{Sender: "app@example.com"}); err != nil || n != 1 {
		t.Errorf("DeleteMatching = %d, %v; want 1", n, err)
	}
	c.Create(ctx, client.NewEmail{Recipient: "c@acme.test", Sender: "app@example.com"})
	if n, err := c.DeleteAll(ctx); err != nil || n != 1 {
		t.Errorf("DeleteAll = %d, %v; want 1", n, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	e, c := start(t)
	ctx := context.Background()
	_, err := c.List(ctx, client.ListOptions{Limit: 1000})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || len(apiErr.FieldErrors["limit"]) == 0 || !strings.Contains(apiErr.Message, "limit") {
		t.Errorf("List(limit 1000) error = %#v, want a 400 with a limit field error", err)
	}
	_, err = c.Create(ctx, client.NewEmail{Recipient: "not an address", Sender: "app@example.com"})
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.FieldErrors["recipient"] == nil {
		t.Errorf("Create(bad recipient) error = %#v", err)
	}
	if _, err := c.Get(ctx, "0190b6d2-7c3e-7a1b-8c2d-1234567890ab"); !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Message == "" {
		t.Errorf("Get(missing) error = %#v, want 404", err)
	}
	if _, err := c.DeleteMatching(ctx, client.Filter{}); !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("DeleteMatching(no filter) error = %#v, want 400", err)
	}
	wrong := newClient(t, e.BaseURL, "wrong-key")
	if _, err := wrong.List(ctx, client.ListOptions{}); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("List with a wrong key: %#v, want 401", err)
	}
	// Another account's email is not found.
	mine, err := c.Create(ctx, client.NewEmail{Recipient: "a@acme.test", Sender: "app@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	globex := newClient(t, e.BaseURL, testenv.GlobexKey)
	if _, err := globex.Codes(ctx, mine.ID); !client.IsNotFound(err) {
		t.Errorf("Codes of another account's email: %v, want 404", err)
	}
}

// TestWaitSMTP waits with the server-held wait for a message sent over
// SMTP after the wait began, and reads its links and codes, on each store.
func TestWaitSMTP(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			testWaitSMTP(t, b)
		})
	}
}

func testWaitSMTP(t *testing.T, b testenv.Backend) {
	e, c := startOn(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	since := time.Now().Add(-time.Second)
	got := make(chan *client.Email, 1)
	errs := make(chan error, 1)
	go func() {
		m, err := c.Wait(ctx, client.Filter{Recipient: "new@acme.test", Since: since})
		got <- m
		errs <- err
	}()
	testenv.WaitFor(t, 5*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() == 1 })
	raw := "From: App <app@example.com>\r\nTo: new@acme.test\r\nSubject: Your code: 482 913\r\n" +
		"Content-Type: text/html; charset=utf-8\r\n\r\n" +
		`<p>Confirm: <a href="https://app.example/confirm?t=abc">Confirm your address</a></p>` + "\r\n"
	if err := smtp.SendMail(e.SMTP, nil, "app@example.com", []string{"new@acme.test"}, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if m.Recipient != "new@acme.test" {
		t.Fatalf("Wait = %+v", m)
	}
	links, err := c.Links(ctx, m.ID)
	if err != nil || len(links) != 1 || links[0].URL != "https://app.example/confirm?t=abc" || *links[0].Text != "Confirm your address" {
		t.Errorf("Links = %+v, %v", links, err)
	}
	codes, err := c.Codes(ctx, m.ID)
	if err != nil || !slices.Equal(codes, []string{"482913"}) {
		t.Errorf("Codes = %q, %v; want [482913]", codes, err)
	}
	rawGot, err := c.Raw(ctx, m.ID)
	if err != nil || !strings.Contains(string(rawGot), "Subject: Your code: 482 913\r\n") {
		t.Errorf("Raw = %q, %v", rawGot, err)
	}
}

// TestWaitEndsWithContext: with nothing arriving, Wait returns the
// context's error once it ends, after more than one held request.
func TestWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	m, err := c.Wait(ctx, client.Filter{Recipient: "nobody@acme.test"})
	if !errors.Is(err, context.DeadlineExceeded) || m != nil {
		t.Errorf("Wait = %v, %v; want DeadlineExceeded", m, err)
	}
	if d := time.Since(begin); d < time.Second || d > 5*time.Second {
		t.Errorf("Wait took %s, want about 1.5s", d)
	}
}

// TestWaitFindsExisting: an email already stored is returned at once.
func TestWaitFindsExisting(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	made, err := c.Create(ctx, client.NewEmail{Recipient: "x@acme.test", Sender: "app@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.Wait(ctx, client.Filter{Recipient: "x@acme.test"}); err != nil || m.ID != made.ID {
		t.Errorf("Wait = %v, %v; want %s", m, err, made.ID)
	}
}

func TestInboundAndAttachment(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := context.Background()
	raw := "From: app@example.com\r\nTo: a@acme.test, b@acme.test\r\nSubject: Report\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=XX\r\n\r\n" +
		"--XX\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n" +
		"--XX\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename=\"report.csv\"\r\n\r\na,b\r\n1,2\r\n--XX--\r\n"
	items, err := c.Inbound(ctx, []byte(raw), "")
	if err != nil || len(items) != 2 {
		t.Fatalf("Inbound = %v, %v; want 2 emails", items, err)
	}
	only, err := c.Inbound(ctx, []byte(raw), "bounce@example.com", "c@acme.test")
	if err != nil || len(only) != 1 || only[0].Recipient != "c@acme.test" || only[0].Sender != "bounce@example.com" {
		t.Fatalf("Inbound(envelope) = %+v, %v", only, err)
	}
	d, err := c.Attachment(ctx, items[0].ID, 0)
	if err != nil || d.Filename != "report.csv" || !strings.HasPrefix(d.ContentType, "text/csv") || string(d.Data) != "a,b\r\n1,2" {
		t.Errorf("Attachment = %+v, %v", d, err)
	}
	if _, err := c.Attachment(ctx, items[0].ID, 5); !client.IsNotFound(err) {
		t.Errorf("Attachment(5) = %v, want 404", err)
	}
	if _, err := c.Inbound(ctx, []byte("not a message"), ""); err == nil {
		t.Errorf("Inbound(garbage) succeeded")
	}
}

// TestListWait: a list with Wait holds an empty page until an email
// matches, and answers an empty page when nothing comes in time.
func TestListWait(t *testing.T) {
	t.Parallel()
	e, c := start(t)
	ctx := context.Background()
	got := make(chan []client.Email, 1)
	go func() {
		page, err := c.List(ctx, client.ListOptions{Filter: client.Filter{Recipient: "held@acme.test"}, Wait: 20 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- page
	}()
	testenv.WaitFor(t, 5*time.Second, "the list to be held", func() bool { return e.App.HeldRequests() == 1 })
	made, err := c.Create(ctx, client.NewEmail{Recipient: "held@acme.test", Sender: "app@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if page := <-got; len(page) != 1 || page[0].ID != made.ID {
		t.Errorf("held list = %+v, want the new email", page)
	}
	begin := time.Now()
	page, err := c.List(ctx, client.ListOptions{Filter: client.Filter{Recipient: "nobody@acme.test"}, Wait: 300 * time.Millisecond})
	if err != nil || len(page) != 0 {
		t.Errorf("List = %v, %v; want an empty page", page, err)
	}
	if d := time.Since(begin); d < 900*time.Millisecond {
		t.Errorf("answered after %s: a wait under a second is held a whole second", d)
	}
}

func TestReleaseToARealServer(t *testing.T) {
	t.Parallel()
	up := testenv.StartUpstream(t)
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded},
		testenv.WithRelay(t, "acme", up.Relay(config.RelayStartTLS, `.*@acme\.test`)))
	c := newClient(t, e.BaseURL, testenv.AcmeKey)
	ctx := context.Background()
	raw := "From: app@example.com\r\nSubject: Review me\r\n\r\n.Hello\r\n"
	var ids []string
	for range 2 {
		em, err := c.Create(ctx, client.NewEmail{Recipient: "review@acme.test", Sender: "app@example.com", Raw: raw})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, em.ID)
	}

	reply, err := c.Release(ctx, ids[0], "stakeholder@acme.test")
	if err != nil || reply.Code != 250 || reply.Text == "" {
		t.Fatalf("Release = %+v, %v; want the upstream's 250", reply, err)
	}
	if got := up.Raws(t, "stakeholder@acme.test"); len(got) != 1 || got[0] != raw {
		t.Errorf("the upstream got %q, want the raw %q", got, raw)
	}
	var apiErr *client.Error
	if _, err := c.Release(ctx, ids[0], "someone@example.com"); !errors.As(err, &apiErr) || apiErr.Status != 400 || len(apiErr.FieldErrors["to"]) != 1 {
		t.Errorf("Release to a recipient the relay does not allow: %v, want 400 naming to", err)
	}
	if _, err := newClient(t, e.BaseURL, testenv.GlobexKey).Release(ctx, ids[0], "stakeholder@acme.test"); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("Release from an account without a relay: %v, want 409", err)
	}

	results, err := c.ReleaseMatching(ctx, client.ListOptions{Filter: client.Filter{Recipient: "review@acme.test"}, Limit: 1}, "team@acme.test")
	if err != nil || len(results) != 1 || results[0].ID != ids[1] || !results[0].Released || results[0].Code == nil || *results[0].Code != 250 {
		t.Fatalf("ReleaseMatching(limit 1) = %+v, %v; want the newest email released", results, err)
	}
	results, err = c.ReleaseMatching(ctx, client.ListOptions{Filter: client.Filter{Recipient: "review@acme.test"}, Before: ids[1]}, "team@acme.test")
	if err != nil || len(results) != 1 || results[0].ID != ids[0] || !results[0].Released {
		t.Errorf("ReleaseMatching(before the newest) = %+v, %v; want the older email released", results, err)
	}
	if got := up.Raws(t, "team@acme.test"); len(got) != 2 {
		t.Errorf("the upstream got %d emails for team@acme.test, want 2", len(got))
	}
}

// Search, read state and the counts, as a test suite would use them.
func TestSearchReadAndStats(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := context.Background()
	invoice, err := c.Create(ctx, client.NewEmail{Recipient: "ada@acme.test", Sender: "shop@shop.example", Subject: ptr("Invoice 7"), Text: ptr("your order")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, client.NewEmail{Recipient: "bob@acme.test", Sender: "shop@shop.example", Subject: ptr("Hello")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.List(ctx, client.ListOptions{Filter: client.Filter{Q: "subject:invoice is:unread"}})
	if err != nil || len(got) != 1 || got[0].ID != invoice.ID || got[0].Read {
		t.Fatalf("List(q) = %+v, %v; want the invoice, unread", got, err)
	}
	up, err := c.Update(ctx, invoice.ID, client.Update{Read: ptr(true)})
	if err != nil || !up.Read {
		t.Fatalf("Update(read) = %+v, %v", up, err)
	}
	if n, err := c.Count(ctx, client.Filter{Q: "is:unread"}, ""); err != nil || n != 1 {
		t.Errorf("Count(is:unread) = %d, %v; want 1", n, err)
	}
	s, err := c.Stats(ctx)
	if err != nil || s.Total != 2 || s.Unread != 1 || s.Statuses.Received != 2 {
		t.Errorf("Stats = %+v, %v", s, err)
	}
	if _, err := c.List(ctx, client.ListOptions{Filter: client.Filter{Q: "is:maybe"}}); err == nil {
		t.Error("a query that does not parse was not refused")
	}
}
