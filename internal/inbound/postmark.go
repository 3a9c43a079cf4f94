package inbound

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// postmarkMessage is the part of Postmark's inbound JSON that is read.
type postmarkMessage struct {
	MessageID         string
	From              string
	FromFull          postmarkAddress
	To, Cc            string
	ToFull, CcFull    []postmarkAddress
	OriginalRecipient string
	Subject           string
	Date              string
	TextBody          string
	HtmlBody          string
	Headers           []struct{ Name, Value string }
	Attachments       []struct {
		Name        string
		Content     string
		ContentType string
		ContentID   string
	}
	RawEmail string
}

type postmarkAddress struct{ Email, Name string }

// Postmark reads a request of Postmark's inbound webhook: JSON with the raw
// message in RawEmail (when "Include raw email content" is on), else the
// parsed fields (FromFull, ToFull, CcFull, Subject, Headers, TextBody,
// HtmlBody, Attachments in base64). The recipient is OriginalRecipient
// (else the To and Cc addresses); the delivery id is MessageID. Its errors
// are *Error.
func Postmark(body []byte, lim Limits) (*Delivery, error) {
	var m postmarkMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		return nil, refuse(Malformed, "the body is not Postmark's inbound JSON: %v", err)
	}
	if len(m.Headers) > lim.maxParts() || len(m.Attachments) > lim.maxParts() {
		return nil, refuse(Malformed, "the message has more than the %d headers or attachments accepted", lim.maxParts())
	}
	d := &Delivery{}
	if m.MessageID != "" {
		if len(m.MessageID) > 200 {
			return nil, refuse(Malformed, "MessageID is longer than 200 characters")
		}
		d.ID = "postmark:" + m.MessageID
	}
	if r := strings.TrimSpace(m.OriginalRecipient); r != "" {
		d.Recipients = []string{r}
	}
	for _, h := range m.Headers {
		if strings.EqualFold(h.Name, "Return-Path") {
			d.Sender = strings.Trim(strings.TrimSpace(h.Value), "<>")
		}
	}
	if d.Sender == "" {
		d.Sender = m.FromFull.Email
	}
	if m.RawEmail != "" {
		d.Raw = []byte(m.RawEmail)
		return d, nil
	}
	if m.From == "" && m.FromFull.Email == "" && len(m.Headers) == 0 && m.TextBody == "" && m.HtmlBody == "" {
		return nil, refuse(Malformed, "the request has neither RawEmail nor the parsed message (From, Headers, TextBody, HtmlBody): is this Postmark's inbound JSON?")
	}
	p := &Parts{
		From:      formatAddress(m.FromFull, m.From),
		To:        formatAddresses(m.ToFull, m.To),
		Cc:        formatAddresses(m.CcFull, m.Cc),
		Subject:   m.Subject,
		Date:      m.Date,
		MessageID: "<" + m.MessageID + ">",
		Text:      m.TextBody,
		HTML:      m.HtmlBody,
	}
	if m.MessageID == "" {
		p.MessageID = ""
	}
	for _, h := range m.Headers {
		p.Header = append(p.Header, Field{h.Name, h.Value})
	}
	for i, a := range m.Attachments {
		data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(a.Content), ""))
		if err != nil {
			return nil, refuse(Malformed, "Attachments[%d] (%q): Content is not base64: %v", i, a.Name, err)
		}
		p.Attachments = append(p.Attachments, Attachment{Filename: a.Name, ContentType: a.ContentType,
			ContentID: strings.TrimPrefix(a.ContentID, "cid:"), Content: data})
	}
	if lim.MaxMessageBytes > 0 && p.Size() > lim.MaxMessageBytes {
		return nil, refuse(Malformed, "the message is %d bytes, over the limit of %d", p.Size(), lim.MaxMessageBytes)
	}
	d.Raw = Compose(p)
	return d, nil
}

func formatAddress(a postmarkAddress, fallback string) string {
	if a.Email == "" {
		return fallback
	}
	if a.Name == "" {
		return a.Email
	}
	return quoteName(a.Name) + " <" + a.Email + ">"
}

func formatAddresses(list []postmarkAddress, fallback string) string {
	if len(list) == 0 {
		return fallback
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = formatAddress(a, "")
	}
	return strings.Join(out, ", ")
}

// quoteName quotes a display name as RFC 5322 wants it.
func quoteName(name string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
}
