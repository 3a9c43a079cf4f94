package inbound

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// MailgunMaxAge is how old a signed Mailgun request may be. Mailgun retries
// a failed delivery for up to 8 hours with the original signature, so the
// window is wider than that; within it a token is remembered by the caller
// (a replayed token with other content is refused), and the memory lasts
// longer than the window.
const MailgunMaxAge = 12 * time.Hour

// mailgunMaxSkew is how far in the future a Mailgun timestamp may be.
const mailgunMaxSkew = time.Hour

// Mailgun reads a request of a Mailgun route's forward() action: a form
// with the raw MIME in body-mime (when the URL ends in "mime"), else the
// parsed fields (message-headers, body-plain, body-html, attachment-N).
// When signingKey is set, the request must carry timestamp, token and
// signature, the hex HMAC-SHA256 of timestamp+token under the key, and a
// timestamp within MailgunMaxAge of now. Its errors are *Error.
func Mailgun(contentType string, body []byte, signingKey string, now time.Time, lim Limits) (*Delivery, error) {
	f, err := parseForm(contentType, body, lim.maxParts())
	if err != nil {
		return nil, err
	}
	token := f.get("token")
	if signingKey != "" {
		if err := checkMailgunSignature(f.get("timestamp"), token, f.get("signature"), signingKey, now); err != nil {
			return nil, err
		}
	}
	d := &Delivery{Sender: strings.TrimSpace(f.get("sender")), Recipients: splitAddresses(f.get("recipient"))}
	if token != "" {
		if len(token) > 200 {
			return nil, refuse(Malformed, "token is longer than 200 characters")
		}
		d.ID = "mailgun:" + token
	}
	if d.Raw, err = f.rawOrComposed("body-mime", mailgunParts, lim); err != nil {
		return nil, err
	}
	return d, nil
}

func checkMailgunSignature(timestamp, token, signature, key string, now time.Time) error {
	if timestamp == "" || token == "" || signature == "" {
		return refuse(BadSign, "the request is not signed: timestamp, token and signature are required (this account sets inbound.mailgunSigningKey)")
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(timestamp + token))
	got, err := hex.DecodeString(signature)
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return refuse(BadSign, "the signature does not match: it must be the hex HMAC-SHA256 of timestamp+token under the account's Mailgun webhook signing key")
	}
	secs, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return refuse(BadSign, "timestamp %q is not Unix seconds", timestamp)
	}
	at := time.Unix(secs, 0)
	if now.Sub(at) > MailgunMaxAge || at.Sub(now) > mailgunMaxSkew {
		return refuse(Replayed, "the signed timestamp is %s, outside the %s accepted around now", at.UTC().Format(time.RFC3339), MailgunMaxAge)
	}
	return nil
}

// mailgunParts reads the parsed fields of a Mailgun forward.
func mailgunParts(f *form) (*Parts, error) {
	p := &Parts{
		From:    f.get("from"),
		Subject: f.get("subject"),
		Text:    f.get("body-plain"),
		HTML:    f.get("body-html"),
	}
	if h := f.get("message-headers"); h != "" {
		var pairs [][]string
		if err := json.Unmarshal([]byte(h), &pairs); err != nil {
			return nil, refuse(Malformed, "message-headers is not a JSON list of [name, value] pairs: %v", err)
		}
		for _, kv := range pairs {
			if len(kv) != 2 {
				return nil, refuse(Malformed, "message-headers is not a JSON list of [name, value] pairs")
			}
			p.Header = append(p.Header, Field{kv[0], kv[1]})
		}
	}
	if len(p.Header) == 0 && p.From == "" && p.Text == "" && p.HTML == "" {
		return nil, refuse(Malformed, "the request has neither body-mime nor the parsed message (message-headers, from, body-plain, body-html): is this a Mailgun forward()?")
	}
	// content-id-map maps "<cid>" to the attachment-N field of an inline
	// attachment.
	cids := map[string]string{}
	if m := f.get("content-id-map"); m != "" {
		var byCID map[string]string
		if err := json.Unmarshal([]byte(m), &byCID); err != nil {
			return nil, refuse(Malformed, "content-id-map is not a JSON object: %v", err)
		}
		for cid, field := range byCID {
			cids[field] = strings.Trim(cid, "<>")
		}
	}
	n := 0
	for f.files["attachment-"+strconv.Itoa(n+1)] != nil {
		n++
	}
	if c := f.get("attachment-count"); c != "" {
		var err error
		if n, err = strconv.Atoi(c); err != nil || n < 0 || n > len(f.files) {
			return nil, refuse(Malformed, "attachment-count %q does not match the %d files sent", c, len(f.files))
		}
	}
	for i := 1; i <= n; i++ {
		name := "attachment-" + strconv.Itoa(i)
		fl, ok := f.files[name]
		if !ok {
			return nil, refuse(Malformed, "%s is missing (attachment-count is %d)", name, n)
		}
		p.Attachments = append(p.Attachments, Attachment{Filename: fl.Filename, ContentType: fl.ContentType, ContentID: cids[name], Content: fl.Data})
	}
	return p, nil
}
