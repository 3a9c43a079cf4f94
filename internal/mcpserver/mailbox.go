package mcpserver

import (
	"context"
	"time"

	"github.com/mailsink/mailsink/internal/apijson"
)

// Mailbox is one account's mail as the tools use it. Local serves it from
// the store inside mailsink (the /mcp endpoint); Remote from a running
// mailsink's API (the stdio mode). Every method sees only the account's
// emails, and returns errors with the codes of package store: NotFound for
// an id the account does not have, Invalid with a message for input the
// API refuses, Unavailable or Busy when the caller should try again.
type Mailbox interface {
	// List returns a page of the account's emails, newest first. With
	// q.Wait it holds an empty page until an email matches or the wait is
	// over, as the API's list with wait does, under the same per-account
	// budget of held requests.
	List(ctx context.Context, q Query) ([]Email, error)
	// Open reads the email with id and calls use with its content while
	// the read holds its share of the read budget (and need more bytes of
	// it, for what use builds); the content must not be kept after use
	// returns.
	Open(ctx context.Context, id string, need int64, use func(*Content) error) error
	// Raw returns at most max bytes of the email's raw source, and its
	// whole size.
	Raw(ctx context.Context, id string, max int) (raw []byte, size int64, err error)
	// Codes returns the email's one-time codes (package codes).
	Codes(ctx context.Context, id string) ([]string, error)
	// Links returns the email's links (package links).
	Links(ctx context.Context, id string) ([]Link, error)
	// Update changes the email and returns it.
	Update(ctx context.Context, id string, c Change) (Email, error)
	// Delete deletes the email.
	Delete(ctx context.Context, id string) error
}

// Email is the API's email summary (OpenAPI: EmailSummary).
type Email = apijson.Email

// Filter selects emails as the list's filters do; zero fields do not
// filter, and set fields combine with AND.
type Filter struct {
	Recipient string
	Sender    string
	Subject   string
	Status    string
	Label     string
	Since     time.Time
	// Search is the search language of the list's q parameter.
	Search string
}

// IsZero reports whether f selects every email.
func (f Filter) IsZero() bool { return f == Filter{} }

// Query is a page of the list: filters, page size (1 to 100), the id after
// which the page starts (before), and how long to hold an empty page (0:
// not at all).
type Query struct {
	Filter
	Limit  int
	Before string
	Wait   time.Duration
}

// Content is what a reader of one email sees: its summary and its parsed
// parts. Text and HTML are nil when the message has no such part.
type Content struct {
	Email       Email
	Text        *string
	HTML        *string
	Headers     map[string]string
	Attachments []Attachment
	// Cut names the parser's limits the message went past
	// ("headerFields", "parts", "depth"): what lies beyond is left out.
	Cut []string
}

// Attachment describes one attachment (OpenAPI: Attachment).
type Attachment struct {
	ContentID   *string `json:"contentId"`
	ContentType *string `json:"contentType"`
	Disposition *string `json:"disposition"`
	Filename    *string `json:"filename"`
	Size        int64   `json:"size" jsonschema:"decoded size in bytes"`
}

// Link is one link of an email; Text is null for links of the text part.
type Link struct {
	URL  string  `json:"url"`
	Text *string `json:"text" jsonschema:"the text a reader sees for the link; null for a URL written out in the text part"`
}

// Change is a change of one email; nil fields are left as they are.
type Change struct {
	Status *string
	Labels *[]string
	// Notes sets the notes; an empty string sets them to null.
	Notes *string
	Read  *bool
}
