// Package apijson holds the API's email summary as JSON (OpenAPI:
// EmailSummary), for every place that writes it: the HTTP API's answers
// and event streams, and outbound webhook deliveries.
package apijson

import (
	"time"

	"github.com/mailsink/mailsink/store"
)

// TimeFormat is RFC 3339 in UTC with milliseconds (the README, "The API").
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Time formats t in UTC as TimeFormat.
func Time(t time.Time) string { return t.UTC().Format(TimeFormat) }

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
	}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	return out
}
