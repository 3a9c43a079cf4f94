// Package client is a Go client of the mailsink API (docs/api.md;
// the OpenAPI document at /v1/openapi.json): list, count, get, update and
// delete captured emails, wait for one to arrive, download its raw source and
// attachments, read its links and one-time codes, run its checks (HTML
// compatibility, links, spam score, authentication), and release it to a
// real mail server.
//
// A test waits for the mail its code under test sends and follows the link
// in it:
//
//	c := client.New("http://127.0.0.1:8025", "dev-key")
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
//	defer cancel()
//	email, err := c.Wait(ctx, client.Filter{Recipient: "new-user@example.com", Since: start})
//	links, err := c.Links(ctx, email.ID)
//
// Every method that calls the API returns an *Error when the API answers
// with an error status, and the context's error when ctx ends first.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client calls one mailsink with one API key. It is safe for concurrent use.
type Client struct {
	baseURL string
	apiKey  string
	http    *http.Client
}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc instead of
// http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the mailsink whose HTTP API is at baseURL (for
// example "http://127.0.0.1:8025") that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, http: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an error answer of the API.
type Error struct {
	Status      int                 // the HTTP status, e.g. 400 or 404
	Message     string              // the error text; for a 400, a summary of the field errors
	FormErrors  []string            // a 400's errors that concern no one field
	FieldErrors map[string][]string // a 400's errors by field or parameter name
}

func (e *Error) Error() string {
	return fmt.Sprintf("mailsink: %d %s", e.Status, e.Message)
}

// IsNotFound reports whether err is an *Error with status 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Account is the account an email belongs to.
type Account struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

// Email is a captured email's metadata.
type Email struct {
	ID         string    `json:"id"`
	Account    *Account  `json:"account"`
	MessageID  *string   `json:"messageId"`
	Sender     string    `json:"sender"`
	Recipient  string    `json:"recipient"`
	Subject    *string   `json:"subject"`
	Status     string    `json:"status"`
	Notes      *string   `json:"notes"`
	Labels     []string  `json:"labels"`
	RawSize    int64     `json:"rawSize"`
	ReceivedAt time.Time `json:"receivedAt"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// Read is whether the email was read (Update sets it); new mail is
	// unread.
	Read bool `json:"read"`
	// FromName, Snippet and AttachmentCount come from the email's body:
	// nil until the server has read it (normally within a second).
	FromName        *string `json:"fromName"`
	Snippet         *string `json:"snippet"`
	AttachmentCount *int    `json:"attachmentCount"`
}

// EmailDetail is an email with its stored body (nil when it has none).
type EmailDetail struct {
	Email
	Body *Body `json:"body"`
}

// Body is the stored body of an email.
type Body struct {
	Raw         string            `json:"raw"`
	Text        *string           `json:"text"`
	HTML        *string           `json:"html"`
	Headers     map[string]string `json:"headers"`
	Attachments []Attachment      `json:"attachments"`
	// Truncated says what the server's parser left out of Text, HTML,
	// Headers and Attachments because of its limits; empty when nothing.
	Truncated []Truncation `json:"truncated"`
}

// Truncation is one limit of the server's parser that a message went past:
// What is "headerFields", "parts" or "depth", Limit its bound.
type Truncation struct {
	What  string `json:"what"`
	Limit int    `json:"limit"`
}

// Attachment describes one attachment; Attachment downloads its content.
type Attachment struct {
	ContentID   *string `json:"contentId"`
	ContentType *string `json:"contentType"`
	Disposition *string `json:"disposition"`
	Filename    *string `json:"filename"`
	Size        int64   `json:"size"`
}

// Link is one link of an email; Text is nil for links of the text part.
type Link struct {
	URL  string  `json:"url"`
	Text *string `json:"text"`
}

// Filter selects emails; zero fields do not filter. All fields combine
// with AND.
type Filter struct {
	// Q is a query of the search language ("from:shop is:unread
	// invoice", docs/api.md); empty is no filter.
	Q         string
	Recipient string    // exact address, case-insensitive
	Sender    string    // exact address, case-insensitive
	Status    string    // received, processed or archived
	Subject   string    // the subject contains it, case-insensitive
	Label     string    // carries this label, exact
	Since     time.Time // received after this instant
}

func (f Filter) query(q url.Values) url.Values {
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("q", f.Q)
	set("recipient", f.Recipient)
	set("sender", f.Sender)
	set("status", f.Status)
	set("subject", f.Subject)
	set("label", f.Label)
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	return q
}

// ListOptions is a page of the list: filters, page size (0: the server's
// default, 25), offset, cursor and wait.
type ListOptions struct {
	Filter
	Limit  int
	Offset int
	Before string // only emails after the email with this id in list order
	// Wait, when not 0, has List's server hold an empty page until an
	// email matches or Wait is over (rounded up to whole seconds, at most
	// 60); other users of ListOptions leave it out.
	Wait time.Duration
}

// List returns a page of the account's emails, newest first.
func (c *Client) List(ctx context.Context, o ListOptions) ([]Email, error) {
	q := o.query()
	if o.Wait > 0 {
		q.Set("wait", strconv.Itoa(int(o.Wait.Seconds()+0.999)))
	}
	var out struct {
		Items []Email `json:"items"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/emails", q, nil, &out)
	return out.Items, err
}

func (o ListOptions) query() url.Values {
	q := o.Filter.query(url.Values{})
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Offset > 0 {
		q.Set("offset", strconv.Itoa(o.Offset))
	}
	if o.Before != "" {
		q.Set("before", o.Before)
	}
	return q
}

// Count returns how many of the account's emails f selects (after the
// email with id before, when before is not "").
func (c *Client) Count(ctx context.Context, f Filter, before string) (int, error) {
	q := f.query(url.Values{})
	if before != "" {
		q.Set("before", before)
	}
	var out struct {
		Count int `json:"count"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/emails/count", q, nil, &out)
	return out.Count, err
}

// maxWait is the longest hold the API grants one request, in seconds.
const maxWait = 60

// Wait returns the newest email f selects, waiting until one is stored or
// ctx ends. It uses the server-held wait of the list (wait=N), one held
// request after another, so an email is seen as soon as it is stored.
// Set f.Since to the time the test began to wait for a new email only.
func (c *Client) Wait(ctx context.Context, f Filter) (*Email, error) {
	for {
		secs := maxWait
		if d, ok := ctx.Deadline(); ok {
			secs = min(maxWait, max(1, int(time.Until(d).Seconds()+0.999)))
		}
		q := f.query(url.Values{})
		q.Set("limit", "1")
		q.Set("wait", strconv.Itoa(secs))
		var out struct {
			Items []Email `json:"items"`
		}
		if err := c.do(ctx, http.MethodGet, "/v1/emails", q, nil, &out); err != nil {
			return nil, err
		}
		if len(out.Items) > 0 {
			return &out.Items[0], nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// Get returns an email with its stored body.
func (c *Client) Get(ctx context.Context, id string) (*EmailDetail, error) {
	var out struct {
		Item EmailDetail `json:"item"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/emails/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Item, nil
}

// Update is a change of an email; zero fields are left as they are.
type Update struct {
	Labels       []string // replaces the labels when not nil; an empty non-nil slice removes them
	Status       string   // received, processed or archived
	Notes        *string  // sets the notes
	ClearNotes   bool     // sets the notes to null
	Subject      *string  // sets the subject
	ClearSubject bool     // sets the subject to null
	Read         *bool    // marks the email read (true) or unread (false)
}

// Update changes an email and returns it.
func (c *Client) Update(ctx context.Context, id string, u Update) (*Email, error) {
	body := map[string]any{}
	if u.Labels != nil {
		body["labels"] = u.Labels
	}
	if u.Status != "" {
		body["status"] = u.Status
	}
	if u.Notes != nil {
		body["notes"] = *u.Notes
	} else if u.ClearNotes {
		body["notes"] = nil
	}
	if u.Subject != nil {
		body["subject"] = *u.Subject
	} else if u.ClearSubject {
		body["subject"] = nil
	}
	if u.Read != nil {
		body["read"] = *u.Read
	}
	var out struct {
		Item Email `json:"item"`
	}
	if err := c.do(ctx, http.MethodPatch, "/v1/emails/"+url.PathEscape(id), nil, body, &out); err != nil {
		return nil, err
	}
	return &out.Item, nil
}

// Stats is what the account holds: every email, those unread, by status,
// and by label (sorted by name).
type Stats struct {
	Total    int64 `json:"total"`
	Unread   int64 `json:"unread"`
	Statuses struct {
		Received  int64 `json:"received"`
		Processed int64 `json:"processed"`
		Archived  int64 `json:"archived"`
	} `json:"statuses"`
	Labels []LabelStats `json:"labels"`
}

// LabelStats counts the emails carrying a label.
type LabelStats struct {
	Name   string `json:"name"`
	Total  int64  `json:"total"`
	Unread int64  `json:"unread"`
}

// Stats returns the account's counts.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var out Stats
	if err := c.do(ctx, http.MethodGet, "/v1/emails/stats", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete deletes an email and its body.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/emails/"+url.PathEscape(id), nil, nil, nil)
}

// DeleteMatching deletes the account's emails f selects and returns how
// many it deleted. An empty filter is refused by the API (400); use
// DeleteAll for that.
func (c *Client) DeleteMatching(ctx context.Context, f Filter) (int, error) {
	return c.deleteMany(ctx, f.query(url.Values{}))
}

// DeleteAll deletes every email of the account and returns how many.
func (c *Client) DeleteAll(ctx context.Context) (int, error) {
	return c.deleteMany(ctx, url.Values{"all": {"true"}})
}

func (c *Client) deleteMany(ctx context.Context, q url.Values) (int, error) {
	var out struct {
		Deleted int `json:"deleted"`
	}
	err := c.do(ctx, http.MethodDelete, "/v1/emails", q, nil, &out)
	return out.Deleted, err
}

// Raw returns the raw source of an email, byte-exact.
func (c *Client) Raw(ctx context.Context, id string) ([]byte, error) {
	d, err := c.download(ctx, "/v1/emails/"+url.PathEscape(id)+"/raw")
	if err != nil {
		return nil, err
	}
	return d.Data, nil
}

// Download is a downloaded attachment.
type Download struct {
	ContentType string
	Filename    string // from Content-Disposition; "" when it names none
	Data        []byte
}

// Attachment downloads the decoded content of an email's attachment
// (index from 0, as in Body.Attachments).
func (c *Client) Attachment(ctx context.Context, id string, index int) (*Download, error) {
	return c.download(ctx, "/v1/emails/"+url.PathEscape(id)+"/attachments/"+strconv.Itoa(index))
}

// Links returns the links of an email: its HTML part's, then the URLs of
// its text part not already listed.
func (c *Client) Links(ctx context.Context, id string) ([]Link, error) {
	var out struct {
		Items []Link `json:"items"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/emails/"+url.PathEscape(id)+"/links", nil, nil, &out)
	return out.Items, err
}

// Codes returns the one-time codes of an email, as a person types them
// ("123 456" in the message is "123456").
func (c *Client) Codes(ctx context.Context, id string) ([]string, error) {
	var out struct {
		Items []struct {
			Value string `json:"value"`
		} `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/emails/"+url.PathEscape(id)+"/codes", nil, nil, &out); err != nil {
		return nil, err
	}
	codes := make([]string, len(out.Items))
	for i, it := range out.Items {
		codes[i] = it.Value
	}
	return codes, nil
}

// Reply is an upstream mail server's reply to a released email: its code
// (250) and text, the enhanced status code first when it gives one.
type Reply struct {
	Code int    `json:"code"`
	Text string `json:"text"`
}

// Release sends an email, its raw source as stored, to the addresses of to
// through the account's relay (the accounts file's relay entry), and
// returns the upstream's reply. The API answers 400 for an address the
// relay's allowedRecipients does not allow (nothing is sent), 409 when the
// account has no relay, 429 past MAILSINK_RELEASE_PER_MINUTE, and 502 when
// the upstream refuses the message or cannot be reached.
func (c *Client) Release(ctx context.Context, id string, to ...string) (*Reply, error) {
	var out struct {
		Item Reply `json:"item"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/emails/"+url.PathEscape(id)+"/release", nil, map[string][]string{"to": to}, &out); err != nil {
		return nil, err
	}
	return &out.Item, nil
}

// ReleaseResult is what became of one email of ReleaseMatching.
type ReleaseResult struct {
	ID       string `json:"id"`
	Released bool   `json:"released"`
	// Code is the upstream's reply code for the email; nil when it did not
	// answer for it (not sent, or the connection failed).
	Code *int `json:"code"`
	// Text is the upstream's reply when the email was released, else why
	// it was not.
	Text string `json:"text"`
}

// ReleaseMatching sends the emails that o selects, one page as List would
// list them (Limit at most 100), to the addresses of to through the
// account's relay, and says what became of each, newest first. Release the
// next page with o.Before set to the last ID. Its errors are Release's;
// 502 means the connection to the upstream failed and nothing was sent.
func (c *Client) ReleaseMatching(ctx context.Context, o ListOptions, to ...string) ([]ReleaseResult, error) {
	var out struct {
		Items []ReleaseResult `json:"items"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/emails/release", o.query(), map[string][]string{"to": to}, &out)
	return out.Items, err
}

// NewEmail is an email to store with Create: either Raw, or the parts.
type NewEmail struct {
	Recipient  string            `json:"recipient"`
	Sender     string            `json:"sender"`
	Subject    *string           `json:"subject,omitempty"`
	Text       *string           `json:"text,omitempty"`
	HTML       *string           `json:"html,omitempty"`
	Raw        string            `json:"raw,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	ReceivedAt *time.Time        `json:"receivedAt,omitempty"`
}

// Create stores a new email and returns it.
func (c *Client) Create(ctx context.Context, e NewEmail) (*Email, error) {
	var out struct {
		Item Email `json:"item"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/emails", nil, e, &out); err != nil {
		return nil, err
	}
	return &out.Item, nil
}

// Inbound stores a raw RFC 5322 message, one email per recipient, and
// returns them. from and to are the envelope; empty, the message's From and
// To/Cc headers are used.
func (c *Client) Inbound(ctx context.Context, raw []byte, from string, to ...string) ([]Email, error) {
	var out struct {
		Items []Email `json:"items"`
	}
	h := http.Header{}
	if from != "" {
		h.Set("X-Envelope-From", from)
	}
	if len(to) > 0 {
		h.Set("X-Envelope-To", strings.Join(to, ","))
	}
	err := c.send(ctx, http.MethodPost, "/v1/inbound", nil, bytes.NewReader(raw), "message/rfc822", h, func(resp *http.Response) error {
		return json.NewDecoder(resp.Body).Decode(&out)
	})
	return out.Items, err
}

// do sends a request with an optional JSON body and decodes a JSON answer
// into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, out any) error {
	var rd io.Reader
	ctype := ""
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd, ctype = bytes.NewReader(data), "application/json"
	}
	return c.send(ctx, method, path, q, rd, ctype, nil, func(resp *http.Response) error {
		if out == nil {
			return nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("mailsink: %s %s: decode answer: %w", method, path, err)
		}
		return nil
	})
}

func (c *Client) download(ctx context.Context, path string) (*Download, error) {
	var d Download
	err := c.send(ctx, http.MethodGet, path, nil, nil, "", nil, func(resp *http.Response) error {
		d.ContentType = resp.Header.Get("Content-Type")
		if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
			d.Filename = params["filename"]
		}
		var err error
		d.Data, err = io.ReadAll(resp.Body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// send sends one request and hands a 2xx answer to read; any other answer
// becomes an *Error.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string, h http.Header, read func(*http.Response) error) error {
	u := c.baseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return read(resp)
	}
	return apiError(resp)
}

// apiError reads an error answer: {"error": "text"} or the 400 envelope
// {"error": {"formErrors": [...], "fieldErrors": {...}}}.
func apiError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &env) != nil || len(env.Error) == 0 {
		return e
	}
	var msg string
	if json.Unmarshal(env.Error, &msg) == nil {
		e.Message = msg
		return e
	}
	var v struct {
		FormErrors  []string            `json:"formErrors"`
		FieldErrors map[string][]string `json:"fieldErrors"`
	}
	if json.Unmarshal(env.Error, &v) == nil {
		e.FormErrors, e.FieldErrors = v.FormErrors, v.FieldErrors
		var parts []string
		parts = append(parts, v.FormErrors...)
		for _, k := range slices.Sorted(maps.Keys(v.FieldErrors)) {
			parts = append(parts, k+": "+strings.Join(v.FieldErrors[k], ", "))
		}
		if len(parts) > 0 {
			e.Message = strings.Join(parts, "; ")
		}
	}
	return e
}
