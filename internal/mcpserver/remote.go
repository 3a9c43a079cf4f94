package mcpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/mailsink/mailsink/client"
	"github.com/mailsink/mailsink/internal/apijson"
	"github.com/mailsink/mailsink/store"
)

// Remote is the Mailbox of an API key's account at a running mailsink,
// through its API (package client): the stdio mode's. The server holds the
// waits and keeps the limits and budgets.
type Remote struct {
	c *client.Client
}

// NewRemote returns the Mailbox that c's key opens.
func NewRemote(c *client.Client) *Remote { return &Remote{c: c} }

var _ Mailbox = (*Remote)(nil)

// remoteError gives an API error the code of its status, with the API's
// message.
func remoteError(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return store.Wrap(store.Unavailable, err, "mailsink cannot be reached ("+err.Error()+")")
	}
	code := store.Internal
	switch ce.Status {
	case http.StatusBadRequest:
		code = store.Invalid
	case http.StatusUnauthorized, http.StatusForbidden:
		return store.Errorf(store.Invalid, "mailsink refused the API key (%d %s): check MAILSINK_API_KEY or --api-key", ce.Status, ce.Message)
	case http.StatusNotFound:
		code = store.NotFound
	case http.StatusRequestEntityTooLarge:
		code = store.TooLarge
	case http.StatusTooManyRequests:
		code = store.QuotaExceeded
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		code = store.Unavailable
	}
	return &store.Error{Code: code, Msg: ce.Message, Err: err}
}

// listOptions is q as the client's list options.
func listOptions(q Query) (client.ListOptions, error) {
	return client.ListOptions{
		Filter: client.Filter{Q: q.Search, Recipient: q.Recipient, Sender: q.Sender, Status: q.Status, Subject: q.Subject, Label: q.Label, Since: q.Since},
		Limit:  q.Limit, Before: q.Before, Wait: q.Wait,
	}, nil
}

// List implements Mailbox.
func (m *Remote) List(ctx context.Context, q Query) ([]Email, error) {
	o, err := listOptions(q)
	if err != nil {
		return nil, err
	}
	emails, err := m.c.List(ctx, o)
	if err != nil {
		return nil, remoteError(err)
	}
	out := make([]Email, len(emails))
	for i := range emails {
		out[i] = summary(&emails[i])
	}
	return out, nil
}

// summary is the client's email as the API wrote it.
func summary(e *client.Email) Email {
	out := Email{ID: e.ID, MessageID: e.MessageID, Sender: e.Sender, Recipient: e.Recipient, Subject: e.Subject,
		Status: store.Status(e.Status), Notes: e.Notes, Labels: e.Labels, RawSize: e.RawSize,
		ReceivedAt: apijson.Time(e.ReceivedAt), CreatedAt: apijson.Time(e.CreatedAt), UpdatedAt: apijson.Time(e.UpdatedAt),
		Read: e.Read, FromName: e.FromName, Snippet: e.Snippet, AttachmentCount: e.AttachmentCount}
	if e.Account != nil {
		out.Account = &apijson.Account{ID: e.Account.ID, Slug: e.Account.Slug, Name: e.Account.Name}
	}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	return out
}

// Open implements Mailbox; the API bounds what it answers.
func (m *Remote) Open(ctx context.Context, id string, _ int64, use func(*Content) error) error {
	d, err := m.c.Get(ctx, id)
	if err != nil {
		return remoteError(err)
	}
	c := &Content{Email: summary(&d.Email), Headers: map[string]string{}}
	if b := d.Body; b != nil {
		c.Text, c.HTML, c.Headers = b.Text, b.HTML, b.Headers
		for _, a := range b.Attachments {
			c.Attachments = append(c.Attachments, Attachment{ContentID: a.ContentID, ContentType: a.ContentType,
				Disposition: a.Disposition, Filename: a.Filename, Size: a.Size})
		}
		for _, t := range b.Truncated {
			c.Cut = append(c.Cut, t.What)
		}
	}
	return use(c)
}

// Raw implements Mailbox.
func (m *Remote) Raw(ctx context.Context, id string, max int) ([]byte, int64, error) {
	raw, err := m.c.Raw(ctx, id)
	if err != nil {
		return nil, 0, remoteError(err)
	}
	return raw[:min(len(raw), max)], int64(len(raw)), nil
}

// Codes implements Mailbox.
func (m *Remote) Codes(ctx context.Context, id string) ([]string, error) {
	codes, err := m.c.Codes(ctx, id)
	if err != nil {
		return nil, remoteError(err)
	}
	return codes, nil
}

// Links implements Mailbox.
func (m *Remote) Links(ctx context.Context, id string) ([]Link, error) {
	links, err := m.c.Links(ctx, id)
	if err != nil {
		return nil, remoteError(err)
	}
	out := make([]Link, len(links))
	for i, l := range links {
		out[i] = Link{URL: l.URL, Text: l.Text}
	}
	return out, nil
}

// clientUpdate is c as the client's update.
func clientUpdate(c Change) (client.Update, error) {
	u := client.Update{Read: c.Read}
	if c.Status != nil {
		u.Status = *c.Status
	}
	if c.Labels != nil {
		u.Labels = append([]string{}, *c.Labels...)
	}
	if c.Notes != nil {
		u.Notes, u.ClearNotes = c.Notes, *c.Notes == ""
		if u.ClearNotes {
			u.Notes = nil
		}
	}
	return u, nil
}

// Update implements Mailbox.
func (m *Remote) Update(ctx context.Context, id string, c Change) (Email, error) {
	u, err := clientUpdate(c)
	if err != nil {
		return Email{}, err
	}
	e, err := m.c.Update(ctx, id, u)
	if err != nil {
		return Email{}, remoteError(err)
	}
	return summary(e), nil
}

// Delete implements Mailbox.
func (m *Remote) Delete(ctx context.Context, id string) error {
	return remoteError(m.c.Delete(ctx, id))
}
