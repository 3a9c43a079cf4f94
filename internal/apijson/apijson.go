// Package apijson holds the API's email summary as JSON (OpenAPI:
// EmailSummary), for every place that writes it: the HTTP API's answers
// and event streams, and outbound webhook deliveries.
package apijson

import (
	"time"

	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// TimeFormat is RFC 3339 in UTC with milliseconds (docs/api.md).
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Time formats t in UTC as TimeFormat.
func Time(t time.Time) string { return t.UTC().Format(TimeFormat) }

// AppendTime appends t in UTC as TimeFormat, as Time writes it. It writes
// the digits itself for years 0 to 9999: a list answer formats three times
// per email, and time.Time.AppendFormat reading the layout each time was a
// tenth of the CPU of a list request (BenchmarkAppendTime).
func AppendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeFormat)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	return append(b,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// Account is an email's account (OpenAPI: Account).
type Account struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

// NewAccount returns a's JSON, or nil for no account.
func NewAccount(a *store.Account) *Account {
	if a == nil {
		return nil
	}
	return &Account{ID: a.ID, Slug: a.Slug, Name: a.Name}
}

// Email is the API's email summary; every field is always present.
type Email struct {
	ID         string       `json:"id"`
	Account    *Account     `json:"account"`
	MessageID  *string      `json:"messageId"`
	Sender     string       `json:"sender"`
	Recipient  string       `json:"recipient"`
	Subject    *string      `json:"subject"`
	Status     store.Status `json:"status"`
	Notes      *string      `json:"notes"`
	Labels     []string     `json:"labels"`
	RawSize    int64        `json:"rawSize"`
	ReceivedAt string       `json:"receivedAt"`
	CreatedAt  string       `json:"createdAt"`
	UpdatedAt  string       `json:"updatedAt"`
	// Added fields (SPEC.md's are unchanged): the read state, and what
	// reading the body adds (package search; null until it is read).
	Read            bool    `json:"read"`
	FromName        *string `json:"fromName"`
	Snippet         *string `json:"snippet"`
	AttachmentCount *int    `json:"attachmentCount"`
}

// WithSummary sets the summary's fields that come from the email's digest
// (search.Summary): the From header's first display name, the snippet and
// the attachments' count. With ok false (no digest yet) they stay null.
func (e Email) WithSummary(d search.Summary, ok bool) Email {
	if !ok {
		return e
	}
	if d.FromName != "" {
		e.FromName = &d.FromName
	}
	e.Snippet, e.AttachmentCount = &d.Snippet, &d.Attachments
	return e
}

// NewEmail returns e's summary, with acc as its account (nil when the
// account is not known: null).
func NewEmail(e *store.Email, acc *store.Account) Email {
	out := Email{
		ID:         e.ID,
		Account:    NewAccount(acc),
		MessageID:  e.MessageID,
		Sender:     e.Sender,
		Recipient:  e.Recipient,
		Subject:    e.Subject,
		Status:     e.Status,
		Notes:      e.Notes,
		Labels:     e.Labels,
		RawSize:    e.RawSize,
		ReceivedAt: Time(e.ReceivedAt),
		CreatedAt:  Time(e.CreatedAt),
		UpdatedAt:  Time(e.UpdatedAt),
		Read:       e.Read,
	}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	return out
}
