// Package ingest turns inbound mail into stored emails. SMTP, POST
// /v1/inbound and POST /v1/emails all go through it, so parsing, sender
// fallback, timestamps and ids are decided in one place.
package ingest

import (
	"context"
	"strings"
	"time"

	"github.com/mailsink/mailsink/mailparse"
	"github.com/mailsink/mailsink/store"
)

// Service stores inbound messages.
type Service struct {
	store store.Store
	now   func() time.Time
}

// New returns a Service that stores into s and reads the time from now.
func New(s store.Store, now func() time.Time) *Service {
	return &Service{store: s, now: now}
}

// Envelope is who a message is from and to, as the transport said.
type Envelope struct {
	// Sender is MAIL FROM or X-Envelope-From. When it is empty or not a valid
	// address, the first valid address of the From header is used.
	Sender     string
	Recipients []Recipient
}

// Recipient is one envelope recipient and the account it was routed to.
type Recipient struct {
	Address string
	Account *store.Account
}

// Deliver stores one email per recipient of a parsed message, all sharing
// its raw and parsed body; the recipients of one account are stored in
// one atomic step. It returns the stored emails in recipient order. It returns
// an Invalid error when there is no recipient or no valid sender, and the
// store's error when storing fails.
func (s *Service) Deliver(ctx context.Context, msg *mailparse.Message, env Envelope) ([]*store.Email, error) {
	if len(env.Recipients) == 0 {
		return nil, store.Errorf(store.Invalid, "the message has no recipient")
	}
	sender, ok := pickSender(env.Sender, msg.From)
	if !ok {
		return nil, store.Errorf(store.Invalid, "no valid sender address: the envelope sender and the From header are empty or invalid")
	}
	now := s.timestamp()
	body := &msg.Body

	var (
		out    = make([]*store.Email, 0, len(env.Recipients))
		order  []string
		groups = map[string][]*store.Email{}
	)
	for _, r := range env.Recipients {
		e := newEmail(r.Account.ID, sender, r.Address, now)
		e.MessageID = msg.MessageID
		e.Subject = msg.Subject
		e.RawSize = int64(len(body.Raw))
		if _, seen := groups[e.AccountID]; !seen {
			order = append(order, e.AccountID)
		}
		groups[e.AccountID] = append(groups[e.AccountID], e)
		out = append(out, e)
	}
	for _, acc := range order {
		if err := s.store.CreateEmails(ctx, body, groups[acc]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pickSender returns the envelope sender when it is a valid address, else
// the first valid address of the From header.
func pickSender(envelope string, from []string) (string, bool) {
	if store.ValidAddress(envelope) {
		return envelope, true
	}
	for _, f := range from {
		if store.ValidAddress(f) {
			return f, true
		}
	}
	return "", false
}

// timestamp returns now in UTC, cut to the millisecond precision that the API
// shows, so ordering and display agree.
func (s *Service) timestamp() time.Time {
	return s.now().UTC().Truncate(time.Millisecond)
}

func newEmail(accountID, sender, recipient string, now time.Time) *store.Email {
	return &store.Email{
		ID:         store.NewID(),
		AccountID:  accountID,
		Sender:     sender,
		Recipient:  recipient,
		Status:     store.StatusReceived,
		Labels:     []string{},
		ReceivedAt: now,
		CreatedAt:  now,
		UpdatedAt:  now,
	}
}

// SplitAddressList splits a comma-separated list of addresses, such as the
// X-Envelope-To header, dropping empty entries and angle brackets.
func SplitAddressList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		part = strings.TrimSuffix(strings.TrimPrefix(part, "<"), ">")
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// HeaderRecipients returns the valid addresses of a message's To and Cc
// headers, each once, in order: the envelope of a message that came without
// one.
func HeaderRecipients(msg *mailparse.Message) []string {
	var out []string
	seen := map[string]bool{}
	for _, list := range [][]string{msg.To, msg.Cc} {
		for _, addr := range list {
			if key := store.NormalizeAddress(addr); store.ValidAddress(addr) && !seen[key] {
				seen[key] = true
				out = append(out, addr)
			}
		}
	}
	return out
}
