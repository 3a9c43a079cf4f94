package ingest

import (
	"bytes"
	"context"
	"mime"
	"mime/quotedprintable"
	"sort"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/mailparse"
	"github.com/mailsink/mailsink/store"
)

// NewEmail is a create request (POST /v1/emails) after validation. For the
// optional fields, nil means "not given"; a given Optional with a nil Value
// means an explicit null.
type NewEmail struct {
	AccountID  string
	Sender     string
	Recipient  string
	Subject    *Optional
	Text       *Optional
	HTML       *Optional
	Raw        []byte // nil when not given
	Headers    map[string]string
	ReceivedAt *time.Time
	// IdempotencyKey, when not empty, makes a repeat of the request store
	// nothing new and return what the first stored (once.go).
	IdempotencyKey string
}

// Optional is a given value of a nullable string field.
type Optional struct {
	Value *string
}

// Create stores one email from a create request. With a raw message, what
// the request does not give is parsed from the raw; without one, a raw RFC
// 5322 message is composed from the fields and stored as the body's raw.
// A body whose text, HTML and headers the request does not give is what
// parsing the raw gives, so only the raw's header is parsed and the body is
// stored unparsed, as Deliver stores it.
// It returns the store's error when storing fails.
func (s *Service) Create(ctx context.Context, in NewEmail) (*store.Email, error) {
	now := s.timestamp()
	e := newEmail(in.AccountID, in.Sender, in.Recipient, now)
	if in.ReceivedAt != nil {
		e.ReceivedAt = in.ReceivedAt.UTC().Truncate(time.Millisecond)
	}
	// The id is reserved before the raw is composed: it is in the
	// composed Message-ID.
	c, err := s.reserve(ctx, in.IdempotencyKey, in.digest(), []*store.Email{e})
	if err != nil {
		return nil, err
	}

	raw := in.Raw
	if raw == nil {
		raw = compose(in, e)
		if max := s.cfg.MaxMessageBytes; max > 0 && int64(len(raw)) > max {
			return nil, store.Errorf(store.TooLarge, "the message composed from the request is %d bytes, over the limit of %d", len(raw), max)
		}
	}
	var (
		msg  *mailparse.Message
		body *store.Body
	)
	if in.Text == nil && in.HTML == nil && in.Headers == nil {
		msg, body = s.parse(s.parseSummary, raw), &store.Body{Raw: raw}
	} else {
		// The request gives some of the parts: they are stored as given,
		// the others parsed from the raw now.
		msg = s.parse(s.parseRaw, raw)
		body = &store.Body{Raw: raw, Given: storeParts(&msg.Body)}
	}
	if in.Text != nil {
		body.Given.Text = in.Text.Value
	}
	if in.HTML != nil {
		body.Given.HTML = in.HTML.Value
	}
	if in.Headers != nil {
		body.Given.Headers = make(map[string]string, len(in.Headers))
		for k, v := range in.Headers {
			body.Given.Headers[strings.ToLower(k)] = v
		}
	}
	e.Subject = msg.Subject
	if in.Subject != nil {
		e.Subject = in.Subject.Value
	}
	e.MessageID = msg.MessageID
	if e.MessageID == nil {
		id := e.ID + "@mailsink.local"
		e.MessageID = &id
	}
	e.RawSize = int64(len(raw))
	got, err := s.create(ctx, in.AccountID, in.IdempotencyKey, c, body, []*store.Email{e})
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// digest sums what a create request asks for, to tell a repeat of it from
// another request with the same idempotency key.
func (in NewEmail) digest() string {
	if in.IdempotencyKey == "" {
		return ""
	}
	opt := func(o *Optional) string {
		switch {
		case o == nil:
			return "absent"
		case o.Value == nil:
			return "null"
		}
		return "=" + *o.Value
	}
	at := ""
	if in.ReceivedAt != nil {
		at = in.ReceivedAt.UTC().Format(time.RFC3339Nano)
	}
	parts := []string{in.AccountID, in.Sender, in.Recipient, opt(in.Subject), opt(in.Text), opt(in.HTML), string(in.Raw), at}
	return digest(append(parts, sortedPairs(in.Headers)...)...)
}

// compose writes an RFC 5322 message for a create request that has no raw.
func compose(in NewEmail, e *store.Email) []byte {
	var b bytes.Buffer
	header := func(name, value string) {
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(oneLine(value))
		b.WriteString("\r\n")
	}
	header("From", in.Sender)
	header("To", in.Recipient)
	if in.Subject != nil && in.Subject.Value != nil {
		header("Subject", mime.QEncoding.Encode("utf-8", *in.Subject.Value))
	}
	header("Date", e.ReceivedAt.Format(time.RFC1123Z))
	header("Message-ID", "<"+e.ID+"@mailsink.local>")
	header("MIME-Version", "1.0")
	own := map[string]bool{"from": true, "to": true, "subject": true, "date": true, "message-id": true,
		"mime-version": true, "content-type": true, "content-transfer-encoding": true}
	names := make([]string, 0, len(in.Headers))
	for k := range in.Headers {
		if !own[strings.ToLower(k)] && validHeaderName(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		header(k, mime.QEncoding.Encode("utf-8", in.Headers[k]))
	}

	text, html := optionalValue(in.Text), optionalValue(in.HTML)
	switch {
	case html != nil && text != nil:
		const boundary = "mailsink-alternative-boundary"
		header("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
		b.WriteString("\r\n--" + boundary + "\r\n")
		textPart(&b, "text/plain", *text)
		b.WriteString("\r\n--" + boundary + "\r\n")
		textPart(&b, "text/html", *html)
		b.WriteString("\r\n--" + boundary + "--\r\n")
	case html != nil:
		textPart(&b, "text/html", *html)
	case text != nil:
		textPart(&b, "text/plain", *text)
	default:
		textPart(&b, "text/plain", "")
	}
	return b.Bytes()
}

func textPart(b *bytes.Buffer, mediaType, content string) {
	b.WriteString("Content-Type: " + mediaType + "; charset=utf-8\r\n")
	b.WriteString("Content-Transfer-Encoding: quoted-printable\r\n\r\n")
	w := quotedprintable.NewWriter(b)
	w.Write([]byte(content))
	w.Close()
}

func optionalValue(o *Optional) *string {
	if o == nil {
		return nil
	}
	return o.Value
}

// oneLine keeps a header value on one line, so a value cannot add headers.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f || k[i] == ':' {
			return false
		}
	}
	return true
}
