// Package ingest turns inbound mail into stored emails. SMTP, POST
// /v1/inbound and POST /v1/emails all go through it, so parsing, sender
// fallback, timestamps and ids are decided in one place.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
)

// Store is what ingest needs of the store: to write emails, to read and
// undo them after a failure, idempotency keys, and each account's totals
// for its quota.
type Store interface {
	CreateEmails(ctx context.Context, body *store.Body, emails []*store.Email) error
	GetEmail(ctx context.Context, accountID, id string) (*store.Email, error)
	DeleteEmail(ctx context.Context, accountID, id string) error
	store.Idempotency
	store.Stats
}

// Service stores inbound messages.
type Service struct {
	store Store
	now   func() time.Time
	cfg   Config
	// parseRaw is mailparse.Parse, parseHeader mailparse.ParseHeader and
	// parseSummary mailparse.ParseSummary; tests make them panic.
	parseRaw     func(raw []byte) (*mailparse.Message, error)
	parseHeader  func(raw []byte) (*mailparse.Message, error)
	parseSummary func(raw []byte) (*mailparse.Message, error)
}

// Config holds a Service's limits and instruments; the zero Config has no
// limit and records nothing.
type Config struct {
	// MaxRecipients is the most recipients one message may have (0: no
	// limit). SMTP refuses RCPT beyond its own limit first; the limit
	// matters for POST /v1/inbound, whose recipients may come from the To
	// and Cc headers.
	MaxRecipients int
	// MaxMessageBytes bounds the message that Create composes from a
	// request without raw (0: no limit).
	MaxMessageBytes int64
	// Quota, when not nil, returns the most emails and raw bytes an account
	// may store (0: no bound); the store's totals tell what it stores. A
	// delivery that would pass its account's quota is refused with
	// QuotaExceeded and stores nothing for that account.
	Quota func(accountID string) (maxEmails, maxBytes int64)
	// ParsePanics counts messages whose parsing panicked; nil counts
	// nothing.
	ParsePanics prometheus.Counter
	// Log receives a line for each such message; nil logs nothing.
	Log *slog.Logger
	// Stored, when not nil, is told of each delivery Deliver stored, with
	// its raw source and its emails, once every account's step succeeded:
	// search makes the emails' digests from the bytes in hand rather than
	// reading them back from the store. It runs on the delivery's path, so
	// it must only take note; raw is shared and must not be changed.
	Stored func(raw []byte, emails []*store.Email)
}

// New returns a Service that stores into s and reads the time from now.
func New(s Store, now func() time.Time, cfg Config) *Service {
	return &Service{store: s, now: now, cfg: cfg, parseRaw: mailparse.Parse, parseHeader: mailparse.ParseHeader, parseSummary: mailparse.ParseSummary}
}

// Envelope is who a message is from and to, as the transport said.
type Envelope struct {
	// Sender is MAIL FROM or X-Envelope-From. When it is empty or not a valid
	// address, the first valid address of the From header is used.
	Sender     string
	Recipients []Recipient
	// HeaderAccount, when Recipients is empty, makes the valid addresses of
	// the To and Cc headers the recipients, each once, all in this account:
	// a message that came without an envelope (POST /v1/inbound without
	// X-Envelope-To).
	HeaderAccount *store.Account
	// IdempotencyKey, when not empty, names the delivery (a client's
	// Idempotency-Key, a provider's delivery id): a repeat with the same key
	// stores nothing new and returns what the first stored (once.go).
	IdempotencyKey string
	// Caller is the id of the account whose API key made the delivery (an
	// SMTP AUTH's too), or empty. A quota refusal gives an account's
	// figures only to its caller. The key is the caller's: in another account, which a
	// recipient's domain routes to, it is reserved under a name of the
	// caller's (crossKey), so that it neither meets nor reveals that
	// account's own keys.
	Caller string
	// Transcript, when not nil, is the SMTP transaction that brought the
	// message; each account's emails keep the part of it that account
	// may see (store.Transcript.For).
	Transcript *store.Transcript
}

// Recipient is one envelope recipient and the account it was routed to.
type Recipient struct {
	Address string
	Account *store.Account
}

// Deliver parses raw's header and stores one email per recipient, all
// sharing one body that holds raw as it is (package bodies parses it when
// it is first read); the recipients of one account are
// stored in one atomic step, and when a later account's step fails the
// earlier ones are undone, so that a failed delivery stores nothing (unless
// it has an idempotency key, which lets its retry find what was stored). It
// returns the stored emails in recipient order. It returns an Invalid error
// when there is no recipient, more than Config.MaxRecipients, or no valid
// sender, and the store's error when storing fails.
func (s *Service) Deliver(ctx context.Context, raw []byte, env Envelope) ([]*store.Email, error) {
	// The From, To and Cc addresses are read only when the envelope lacks
	// what they stand in for: parsing them is most of the header's cost.
	parser := s.parseSummary
	if !store.ValidAddress(env.Sender) || len(env.Recipients) == 0 && env.HeaderAccount != nil {
		parser = s.parseHeader
	}
	msg := s.parse(parser, raw)
	rcpts := env.Recipients
	if len(rcpts) == 0 && env.HeaderAccount != nil {
		for _, addr := range headerRecipients(msg) {
			rcpts = append(rcpts, Recipient{Address: addr, Account: env.HeaderAccount})
		}
		if len(rcpts) == 0 {
			return nil, store.Errorf(store.Invalid, "no recipient: the message has no valid To or Cc address, and no envelope recipient was given")
		}
	}
	if len(rcpts) == 0 {
		return nil, store.Errorf(store.Invalid, "the message has no recipient")
	}
	if max := s.cfg.MaxRecipients; max > 0 && len(rcpts) > max {
		return nil, store.Errorf(store.Invalid, "too many recipients: %d, at most %d per message", len(rcpts), max)
	}
	sender, ok := pickSender(env.Sender, msg.From)
	if !ok {
		return nil, senderRefusal(env.Sender, msg.From)
	}
	now := s.timestamp()
	body := &store.Body{Raw: raw}

	out := make([]*store.Email, len(rcpts))
	for i, r := range rcpts {
		e := newEmail(r.Account.ID, sender, r.Address, now)
		e.MessageID = msg.MessageID
		e.Subject = msg.Subject
		e.RawSize = int64(len(raw))
		out[i] = e
	}
	groups := groupByAccount(out)
	sum := ""
	if env.IdempotencyKey != "" {
		parts := []string{string(raw), sender}
		for _, r := range rcpts {
			parts = append(parts, r.Account.ID, r.Address)
		}
		sum = digest(parts...)
	}
	if env.IdempotencyKey == "" && len(groups) > 1 {
		// An account over its quota stops the delivery before any
		// account's emails are stored: the others would be stored, shown
		// to their readers and taken back. (With a key, a repeat of a
		// stored delivery must not meet the quota; each account's step
		// checks it.)
		for _, g := range groups {
			if err := s.checkQuota(ctx, env.Caller, g.emails); err != nil {
				return nil, err
			}
		}
	}
	var stored []*store.Email
	for _, g := range groups {
		group, body := g.emails, body
		if env.Transcript != nil {
			withTranscript := *body
			withTranscript.Transcript = env.Transcript.For(g.accountID)
			body = &withTranscript
		}
		key := env.IdempotencyKey
		if key != "" && env.Caller != "" && g.accountID != env.Caller {
			key = crossKey(env.Caller, key)
		}
		c, err := s.reserve(ctx, key, sum, group)
		if err == nil {
			var got []*store.Email
			if got, err = s.create(ctx, env.Caller, key, c, body, group); err == nil {
				for j, i := range g.positions {
					out[i] = got[j]
				}
				stored = append(stored, got...)
				continue
			}
		}
		if env.IdempotencyKey == "" {
			// Without a key the retry cannot be recognised: it must
			// find nothing of this delivery stored.
			s.undo(stored)
		}
		return nil, err
	}
	if s.cfg.Stored != nil {
		s.cfg.Stored(raw, out)
	}
	return out, nil
}

// accountGroup is the emails of one delivery that go to one account, and
// their places in the delivery's recipient order.
type accountGroup struct {
	accountID string
	emails    []*store.Email
	positions []int
}

// groupByAccount groups emails by account, the accounts in the order of
// their first email. A delivery almost always has one account, and never
// more than its recipients (Config.MaxRecipients), so a linear search costs
// less than the maps it replaced.
func groupByAccount(emails []*store.Email) []accountGroup {
	var groups []accountGroup
	for i, e := range emails {
		k := slices.IndexFunc(groups, func(g accountGroup) bool { return g.accountID == e.AccountID })
		if k < 0 {
			groups = append(groups, accountGroup{accountID: e.AccountID})
			k = len(groups) - 1
		}
		groups[k].emails = append(groups[k].emails, e)
		groups[k].positions = append(groups[k].positions, i)
	}
	return groups
}

// parse parses raw with parser. Should the parser panic, the message is
// still stored with what was parsed; the panic is logged (with the
// message's size, never its content) and counted.
func (s *Service) parse(parser func([]byte) (*mailparse.Message, error), raw []byte) *mailparse.Message {
	msg, err := parser(raw)
	if errors.Is(err, mailparse.ErrPanic) {
		panicked(s.cfg.ParsePanics, s.cfg.Log, len(raw), "the message is stored with what was parsed")
	}
	return msg
}

// panicked counts and logs a panic of the MIME parser on a message of size
// bytes; the log line says what became of the message.
func panicked(counter prometheus.Counter, log *slog.Logger, size int, outcome string) {
	if counter != nil {
		counter.Inc()
	}
	if log != nil {
		log.Error("the MIME parser panicked; "+outcome, "bytes", size)
	}
}

// storeParts converts a parsed body into the parts a store keeps.
func storeParts(b *mailparse.Body) *store.Parts {
	out := &store.Parts{
		Text:        b.Text,
		HTML:        b.HTML,
		Headers:     b.Headers,
		Attachments: make([]store.Attachment, len(b.Attachments)),
	}
	for i, a := range b.Attachments {
		out.Attachments[i] = store.Attachment(a)
	}
	return out
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

// senderRefusal says why neither the envelope sender nor a From address can
// be the sender: which address, and which part of the address rule it breaks
// (as the refusal of a recipient does).
func senderRefusal(envelope string, from []string) error {
	switch {
	case envelope != "":
		also := "and the message has no From header address"
		if len(from) > 0 {
			also = fmt.Sprintf("and the From header's <%s> is not accepted either: %s", store.QuoteAddress(from[0]), store.AddressProblem(from[0]))
		}
		return store.Errorf(store.Invalid, "Sender address <%s> (the envelope sender) is not accepted: %s; %s",
			store.QuoteAddress(envelope), store.AddressProblem(envelope), also)
	case len(from) > 0:
		return store.Errorf(store.Invalid, "Sender address <%s> (the From header; the envelope sender is empty) is not accepted: %s",
			store.QuoteAddress(from[0]), store.AddressProblem(from[0]))
	}
	return store.Errorf(store.Invalid, "No sender address: the envelope sender is empty and the message has no From header address")
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

// headerRecipients returns the valid addresses of a message's To and Cc
// headers, each once, in order.
func headerRecipients(msg *mailparse.Message) []string {
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
