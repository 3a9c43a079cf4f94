package mcpserver

import (
	"context"
	"time"

	"github.com/mailsink/mailsink/internal/apijson"
	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/codes"
	"github.com/mailsink/mailsink/internal/held"
	"github.com/mailsink/mailsink/internal/links"
	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// LocalStore is what Local reads and changes in the store: emails, and the
// events that wake held waits.
type LocalStore interface {
	ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error)
	UpdateEmail(ctx context.Context, accountID, id string, u store.Update) (*store.Email, error)
	DeleteEmail(ctx context.Context, accountID, id string) error
	Subscribe(accountID string) store.Subscription
}

// LocalConfig is what the Local mailboxes of every account share.
type LocalConfig struct {
	Store LocalStore
	// Bodies reads emails' content under the read budget.
	Bodies *bodies.Service
	// Held bounds the held waits of each account, together with the API's
	// list waits and event streams.
	Held *held.Limiter
	// StoreTimeout bounds each store call, and each read of an email.
	StoreTimeout time.Duration
	// Account returns the account with an id as it is now (the accounts
	// file may be reloaded), for the summaries; nil leaves it out.
	Account func(id string) *store.Account
	// Now is the clock of updates; nil is time.Now.
	Now func() time.Time
	// Search answers the lists that have a query (q), and gives the
	// summaries what reading the bodies adds.
	Search *search.Service
}

// Local is one account's Mailbox inside mailsink.
type Local struct {
	cfg     *LocalConfig
	account *store.Account
}

// NewLocal returns the Mailbox of acc over cfg.
func NewLocal(cfg *LocalConfig, acc *store.Account) *Local {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Local{cfg: cfg, account: acc}
}

// summary is e's summary with its account as the accounts file names it
// now.
func (m *Local) summary(e *store.Email) Email {
	acc := m.account
	if m.cfg.Account != nil {
		acc = m.cfg.Account(e.AccountID)
	}
	out := apijson.NewEmail(e, acc)
	if m.cfg.Search != nil {
		out = out.WithSummary(m.cfg.Search.Summary(e.AccountID, e.ID))
	}
	return out
}

var _ Mailbox = (*Local)(nil)

// listQuery is q as the store's query of the account, and its search.
func (m *Local) listQuery(q Query) (store.ListQuery, search.Query, error) {
	var sq search.Query
	if q.Search != "" {
		var err error
		if sq, err = search.Parse(q.Search); err != nil {
			return store.ListQuery{}, sq, store.Errorf(store.Invalid, "q: %v", err)
		}
		if m.cfg.Search == nil {
			return store.ListQuery{}, sq, store.Errorf(store.Invalid, "q: this mailsink has no search index")
		}
	}
	return store.ListQuery{
		AccountID: m.account.ID, Recipient: q.Recipient, Sender: q.Sender, Subject: q.Subject,
		Status: store.Status(q.Status), Label: q.Label, Since: q.Since, Before: q.Before, Limit: q.Limit,
	}, sq, nil
}

// List implements Mailbox. A held list takes a place of the account's
// held requests for its wait, and answers QuotaExceeded when none is free.
func (m *Local) List(ctx context.Context, q Query) ([]Email, error) {
	lq, sq, err := m.listQuery(q)
	if err != nil {
		return nil, err
	}
	var from held.Store = m.cfg.Store
	if !sq.Empty() {
		from = m.cfg.Search.Lister(sq)
	}
	var emails []*store.Email
	if q.Wait > 0 {
		release, ok := m.cfg.Held.Acquire(m.account.ID)
		if !ok {
			return nil, store.Errorf(store.QuotaExceeded, "too many waits are held for this account (at most %d, with the API's list waits and event streams): try again when one has ended", m.cfg.Held.Max())
		}
		defer release()
		emails, err = held.Wait(ctx, from, lq, q.Wait, m.cfg.StoreTimeout, m.cfg.Held.Stopped())
	} else {
		sctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
		defer cancel()
		emails, err = from.ListEmails(sctx, lq)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Email, len(emails))
	for i, e := range emails {
		out[i] = m.summary(e)
	}
	return out, nil
}

// open opens the email parsed under the read budget, within the store
// timeout; the caller closes the read and calls done.
func (m *Local) open(ctx context.Context, id string, parsed bool) (*bodies.Read, context.Context, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	openRead := m.cfg.Bodies.Raw
	if parsed {
		openRead = m.cfg.Bodies.Parsed
	}
	read, err := openRead(ctx, m.account.ID, id)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return read, ctx, func() { read.Close(); cancel() }, nil
}

// Open implements Mailbox.
func (m *Local) Open(ctx context.Context, id string, need int64, use func(*Content) error) error {
	read, ctx, done, err := m.open(ctx, id, true)
	if err != nil {
		return err
	}
	defer done()
	if err := read.Grow(ctx, need); err != nil {
		return err
	}
	b := read.Body
	c := &Content{Email: m.summary(read.Email), Text: b.Text, HTML: b.HTML, Headers: b.Headers,
		Attachments: make([]Attachment, len(b.Attachments)), Cut: cuts(b.Cut)}
	for i, a := range b.Attachments {
		c.Attachments[i] = Attachment(a)
	}
	return use(c)
}

// cuts names the parser's limits that c says a message went past.
func cuts(c mailparse.Cut) []string {
	var out []string
	if c.HeaderFields {
		out = append(out, "headerFields")
	}
	if c.Parts {
		out = append(out, "parts")
	}
	if c.Depth {
		out = append(out, "depth")
	}
	return out
}

// Raw implements Mailbox.
func (m *Local) Raw(ctx context.Context, id string, max int) ([]byte, int64, error) {
	read, _, done, err := m.open(ctx, id, false)
	if err != nil {
		return nil, 0, err
	}
	defer done()
	raw := read.Body.Raw
	return append([]byte(nil), raw[:min(len(raw), max)]...), int64(len(raw)), nil
}

// Codes implements Mailbox with package codes, as GET /v1/emails/{id}/codes.
func (m *Local) Codes(ctx context.Context, id string) ([]string, error) {
	read, ctx, done, err := m.open(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer done()
	found, err := codes.Extract(ctx, deref(read.Email.Subject), deref(read.Body.Text), deref(read.Body.HTML))
	if err != nil {
		return nil, store.Wrap(store.Unavailable, err, "the request ended before the email was read")
	}
	return found, nil
}

// Links implements Mailbox with package links, as GET /v1/emails/{id}/links.
func (m *Local) Links(ctx context.Context, id string) ([]Link, error) {
	read, ctx, done, err := m.open(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer done()
	htmlPart, textPart := deref(read.Body.HTML), deref(read.Body.Text)
	// The links hold at most what they were found in.
	if err := read.Grow(ctx, int64(min(len(htmlPart), links.MaxScan)+min(len(textPart), links.MaxScan))); err != nil {
		return nil, err
	}
	found, err := links.Extract(ctx, htmlPart, textPart)
	if err != nil {
		return nil, store.Wrap(store.Unavailable, err, "the request ended before the email was read")
	}
	out := make([]Link, len(found))
	for i, l := range found {
		out[i] = Link{URL: l.URL, Text: l.Text}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// update is c as the store's update.
func (m *Local) update(c Change) (store.Update, error) {
	u := store.Update{Labels: c.Labels, Read: c.Read, UpdatedAt: m.cfg.Now().UTC().Truncate(time.Millisecond)}
	if c.Status != nil {
		st := store.Status(*c.Status)
		u.Status = &st
	}
	if c.Notes != nil {
		u.Notes = &store.Nullable{Value: c.Notes}
		if *c.Notes == "" {
			u.Notes.Value = nil
		}
	}
	return u, nil
}

// Update implements Mailbox.
func (m *Local) Update(ctx context.Context, id string, c Change) (Email, error) {
	u, err := m.update(c)
	if err != nil {
		return Email{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	e, err := m.cfg.Store.UpdateEmail(ctx, m.account.ID, id, u)
	if err != nil {
		return Email{}, err
	}
	return m.summary(e), nil
}

// Delete implements Mailbox.
func (m *Local) Delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	return m.cfg.Store.DeleteEmail(ctx, m.account.ID, id)
}
