package inbound

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-message/charset"
)

// SendGridMaxAge is how far the timestamp of a signed SendGrid request (when
// SendGrid signed it) may be from now, either way: an older one is taken
// for a replay. Within the window a replay is recognised by its delivery id
// (the signed content) and stores nothing.
const SendGridMaxAge = 5 * time.Minute

// SendGrid reads a request of SendGrid's Inbound Parse webhook: a
// multipart form with the raw MIME in email (when "POST the raw, full MIME
// message" is on), else the parsed fields (headers, text, html, from, to,
// cc, subject, attachment-info and the attachmentN files). The envelope
// comes in the JSON field envelope ({"to": [...], "from": "..."}).
// When key is not nil (a security policy with signature verification),
// sig must be the base64 ECDSA (SHA-256) signature of the timestamp
// followed by the body, under key, and the timestamp within
// SendGridMaxAge of now; the Delivery's id is then "sendgrid:" and the hex
// SHA-256 of what was signed, so that the same request again is a retry.
// An unsigned request has no delivery id. Its errors are *Error.
func SendGrid(contentType string, body []byte, key *ecdsa.PublicKey, sig SendGridSignature, now time.Time, lim Limits) (*Delivery, error) {
	d := &Delivery{}
	if key != nil {
		signed, err := sig.verify(key, body, now)
		if err != nil {
			return nil, err
		}
		d.ID = "sendgrid:" + hex.EncodeToString(signed)
	}
	if mt := mediaTypeOf(contentType); mt != "multipart/form-data" {
		return nil, refuse(Malformed, "Inbound Parse posts multipart/form-data, not %q", contentType)
	}
	f, err := parseForm(contentType, body, lim.maxParts())
	if err != nil {
		return nil, err
	}
	if env := f.get("envelope"); env != "" {
		var e struct {
			To   []string `json:"to"`
			From string   `json:"from"`
		}
		if err := json.Unmarshal([]byte(env), &e); err != nil {
			return nil, refuse(Malformed, `envelope is not JSON like {"to": ["a@example.com"], "from": "b@example.com"}: %v`, err)
		}
		d.Sender, d.Recipients = strings.TrimSpace(e.From), e.To
	}
	if d.Raw, err = f.rawOrComposed("email", sendGridParts, lim); err != nil {
		return nil, err
	}
	return d, nil
}

// SendGridSignature is what SendGrid sends in the headers of a signed
// request (SendGridSignatureHeader, SendGridTimestampHeader).
type SendGridSignature struct {
	Signature string
	Timestamp string
}

// The headers of SendGrid's signed webhooks.
const (
	SendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	SendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// verify checks the signature and the timestamp's age, and returns the
// SHA-256 of what was signed.
func (s SendGridSignature) verify(key *ecdsa.PublicKey, body []byte, now time.Time) ([]byte, error) {
	if s.Signature == "" || s.Timestamp == "" {
		return nil, refuse(BadSign, "the request is not signed: the %s and %s headers are required (this account sets inbound.sendgridVerificationKey)",
			SendGridSignatureHeader, SendGridTimestampHeader)
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil {
		return nil, refuse(BadSign, "%s is not base64", SendGridSignatureHeader)
	}
	h := sha256.New()
	h.Write([]byte(s.Timestamp))
	h.Write(body)
	signed := h.Sum(nil)
	if !ecdsa.VerifyASN1(key, signed, sig) {
		return nil, refuse(BadSign, "the signature does not verify with the account's SendGrid verification key")
	}
	secs, err := strconv.ParseInt(s.Timestamp, 10, 64)
	if err != nil {
		return nil, refuse(BadSign, "%s %q is not Unix seconds", SendGridTimestampHeader, s.Timestamp)
	}
	at := time.Unix(secs, 0)
	if now.Sub(at) > SendGridMaxAge || at.Sub(now) > SendGridMaxAge {
		return nil, refuse(Replayed, "the signed timestamp is %s, outside the %s accepted around now: a replayed request is not stored",
			at.UTC().Format(time.RFC3339), SendGridMaxAge)
	}
	return signed, nil
}

func sendGridParts(f *form) (*Parts, error) {
	// charsets names the charset of each text field ({"text": "iso-8859-1"});
	// the composed message is UTF-8 throughout.
	var charsets map[string]string
	if s := f.get("charsets"); s != "" {
		if err := json.Unmarshal([]byte(s), &charsets); err != nil {
			return nil, refuse(Malformed, "charsets is not a JSON object: %v", err)
		}
	}
	field := func(name string) string { return toUTF8(f.get(name), charsets[name]) }
	p := &Parts{From: field("from"), To: field("to"), Cc: field("cc"), Subject: field("subject"),
		Text: field("text"), HTML: field("html")}
	if h := f.get("headers"); h != "" {
		// headers is the message's header block as received.
		r := textproto.NewReader(bufio.NewReader(strings.NewReader(strings.TrimRight(h, "\r\n") + "\r\n\r\n")))
		for {
			line, err := r.ReadContinuedLine()
			if err != nil || line == "" {
				break
			}
			if name, value, ok := strings.Cut(line, ":"); ok {
				p.Header = append(p.Header, Field{name, strings.TrimSpace(value)})
			}
		}
	}
	if len(p.Header) == 0 && p.From == "" && p.Text == "" && p.HTML == "" {
		return nil, refuse(Malformed, "the request has neither email (the raw message) nor the parsed message (headers, from, text, html): is this an Inbound Parse post?")
	}
	var info map[string]struct {
		Filename  string `json:"filename"`
		Name      string `json:"name"`
		Type      string `json:"type"`
		ContentID string `json:"content-id"`
	}
	if s := f.get("attachment-info"); s != "" {
		if err := json.Unmarshal([]byte(s), &info); err != nil {
			return nil, refuse(Malformed, "attachment-info is not a JSON object: %v", err)
		}
	}
	for i := 1; ; i++ {
		name := "attachment" + strconv.Itoa(i)
		fl, ok := f.files[name]
		if !ok {
			if _, described := info[name]; described {
				return nil, refuse(Malformed, "%s is described in attachment-info but not sent", name)
			}
			break
		}
		a := Attachment{Filename: fl.Filename, ContentType: fl.ContentType, Content: fl.Data}
		if in, ok := info[name]; ok {
			a.Filename = firstNonEmpty(in.Filename, in.Name, a.Filename)
			a.ContentType = firstNonEmpty(in.Type, a.ContentType)
			a.ContentID = in.ContentID
		}
		p.Attachments = append(p.Attachments, a)
	}
	return p, nil
}

// toUTF8 converts s from the charset label to UTF-8; an unknown label or
// undecodable bytes keep what is valid UTF-8.
func toUTF8(s, label string) string {
	switch strings.ToLower(label) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	r, err := charset.Reader(label, strings.NewReader(s))
	if err != nil {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return string(out)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
