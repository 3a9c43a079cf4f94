package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/mailsink/mailsink/store"
)

// timeFormat is RFC 3339 in UTC with milliseconds (CONTRACT.md).
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

type accountJSON struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

// emailJSON is SPEC.md's email summary; every field is always present.
type emailJSON struct {
	ID         string       `json:"id"`
	Account    *accountJSON `json:"account"`
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

// detailJSON is SPEC.md's email detail: the summary plus body.
type detailJSON struct {
	emailJSON
	Body *bodyJSON `json:"body"`
}

type bodyJSON struct {
	Raw         string            `json:"raw"`
	Text        *string           `json:"text"`
	HTML        *string           `json:"html"`
	Headers     map[string]string `json:"headers"`
	Attachments []attachmentJSON  `json:"attachments"`
}

type attachmentJSON struct {
	ContentID   *string `json:"contentId"`
	ContentType *string `json:"contentType"`
	Disposition *string `json:"disposition"`
	Filename    *string `json:"filename"`
	Size        int64   `json:"size"`
}

func (a *API) emailJSON(e *store.Email) emailJSON {
	out := emailJSON{
		ID:         e.ID,
		MessageID:  e.MessageID,
		Sender:     e.Sender,
		Recipient:  e.Recipient,
		Subject:    e.Subject,
		Status:     e.Status,
		Notes:      e.Notes,
		Labels:     e.Labels,
		RawSize:    e.RawSize,
		ReceivedAt: formatTime(e.ReceivedAt),
		CreatedAt:  formatTime(e.CreatedAt),
		UpdatedAt:  formatTime(e.UpdatedAt),
	}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	if acc := a.accounts.ByID(e.AccountID); acc != nil {
		out.Account = &accountJSON{ID: acc.ID, Slug: acc.Slug, Name: acc.Name}
	}
	return out
}

func bodyToJSON(b *store.Body) *bodyJSON {
	if b == nil {
		return nil
	}
	out := &bodyJSON{
		Raw:         string(b.Raw),
		Text:        b.Text,
		HTML:        b.HTML,
		Headers:     b.Headers,
		Attachments: make([]attachmentJSON, len(b.Attachments)),
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	for i, at := range b.Attachments {
		out.Attachments[i] = attachmentJSON(at)
	}
	return out
}

// writeJSON writes v as the response body. HTML characters are not escaped:
// the answer is JSON for programs, served with nosniff.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
