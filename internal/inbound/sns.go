package inbound

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// SNS message types (the x-amz-sns-message-type header and the Type field).
const (
	SNSNotification             = "Notification"
	SNSSubscriptionConfirmation = "SubscriptionConfirmation"
	SNSUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// snsHost is the host of SNS's certificate and subscription URLs:
// sns.<region>.amazonaws.com, or .com.cn in China.
// The region part is AWS's own pattern (like us-east-1): a looser one would
// also admit sns.s3.amazonaws.com, an S3 bucket anyone may own.
var snsHost = regexp.MustCompile(`^sns\.[a-z]{2}(-[a-z]+)+-\d\.amazonaws\.com(\.cn)?$`)

// snsMaxAge is how old an SNS message may be: a captured one replayed after
// the idempotency keys are forgotten (24 hours) would be stored again.
const snsMaxAge = 23 * time.Hour

// ErrUnreachable wraps the failures to fetch an SNS certificate or to
// confirm a subscription: worth a retry, not the sender's fault.
var ErrUnreachable = errors.New("SNS could not be reached")

// SNS verifies SNS messages and confirms subscriptions. It is safe for
// concurrent use.
type SNS struct {
	client *http.Client
	// override, when set, verifies every message instead of the
	// certificate at its SigningCertURL.
	override *x509.Certificate
	mu       sync.Mutex
	certs    map[string]*x509.Certificate // by SigningCertURL
}

// maxCachedCerts bounds the certificate cache (SNS uses a few per region).
const maxCachedCerts = 64

// NewSNS returns an SNS that fetches certificates and SubscribeURLs with
// (a copy of) client (nil: a client with a 10 s timeout); override, when
// not nil, is the certificate that verifies every message
// (MAILSINK_SNS_SIGNING_CERT_FILE). Whatever the client, only
// https://sns.<region>.amazonaws.com[.cn] URLs are fetched, and a redirect
// is an error, never followed: it could lead anywhere.
func NewSNS(client *http.Client, override *x509.Certificate) *SNS {
	c := http.Client{Timeout: 10 * time.Second}
	if client != nil {
		c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &SNS{client: &c, override: override, certs: map[string]*x509.Certificate{}}
}

// parseCertificate reads the first certificate of a PEM document.
func parseCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, errors.New("no PEM CERTIFICATE block found")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// snsMessage is an SNS message as posted to an HTTP endpoint.
type snsMessage struct {
	Type             string
	MessageId        string
	Token            string
	TopicArn         string
	Subject          *string
	Message          string
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string
	SubscribeURL     string
}

// SNSResult is what one SNS message amounted to.
type SNSResult struct {
	// Type is the message's type.
	Type string
	// Delivery is the mail of an SES notification; nil for the other
	// messages (a confirmed subscription, SES's set-up notification).
	Delivery *Delivery
	// Note says what was done when nothing is to be stored.
	Note string
}

// SES reads an SNS message posted to /v1/inbound/ses: it checks that the
// topic is one of topics, verifies the signature (SignatureVersion 1,
// SHA1withRSA, or 2, SHA256withRSA, over the documented string to sign),
// confirms a SubscriptionConfirmation by fetching its SubscribeURL, and
// turns a Notification of SES's SNS action into a Delivery (the MIME in
// content, UTF-8 or base64, the envelope in mail.source and
// receipt.recipients, the id "sns:<MessageId>"). messageType is the
// x-amz-sns-message-type header. Its errors are *Error for a message
// refused for good, else wrap ErrUnreachable.
func (s *SNS) SES(ctx context.Context, messageType string, body []byte, topics []string, lim Limits) (*SNSResult, error) {
	var m snsMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, refuse(Malformed, "the body is not an SNS message (JSON): %v", err)
	}
	switch m.Type {
	case SNSNotification, SNSSubscriptionConfirmation, SNSUnsubscribeConfirmation:
	default:
		return nil, refuse(Malformed, "Type %q is not an SNS message type (Notification, SubscriptionConfirmation, UnsubscribeConfirmation)", m.Type)
	}
	if messageType != "" && messageType != m.Type {
		return nil, refuse(Malformed, "the x-amz-sns-message-type header %q does not match the message's Type %q", messageType, m.Type)
	}
	if m.MessageId == "" || len(m.MessageId) > 200 || m.TopicArn == "" || m.Timestamp == "" {
		return nil, refuse(Malformed, "the SNS message lacks MessageId, TopicArn or Timestamp")
	}
	if ts, err := time.Parse(time.RFC3339Nano, m.Timestamp); err != nil {
		return nil, refuse(Malformed, "the SNS message's Timestamp %q is not an RFC 3339 time", m.Timestamp)
	} else if age := time.Since(ts); age > snsMaxAge || age < -time.Hour {
		return nil, refuse(Refused, "the SNS message's Timestamp %s is more than %s old (or in the future): a replay is not stored", m.Timestamp, snsMaxAge)
	}
	if !slices.Contains(topics, m.TopicArn) {
		return nil, refuse(Refused, "topic %q is not one of this account's inbound.snsTopicArns", m.TopicArn)
	}
	if err := s.verify(ctx, &m); err != nil {
		return nil, err
	}
	res := &SNSResult{Type: m.Type}
	switch m.Type {
	case SNSSubscriptionConfirmation:
		if err := s.confirm(ctx, m.SubscribeURL); err != nil {
			return nil, err
		}
		res.Note = "subscription to " + m.TopicArn + " confirmed"
		return res, nil
	case SNSUnsubscribeConfirmation:
		res.Note = "unsubscribed from " + m.TopicArn + "; nothing to do"
		return res, nil
	}
	d, note, err := sesMail(m.Message, lim)
	if err != nil {
		return nil, err
	}
	if d != nil {
		d.ID = "sns:" + m.MessageId
	}
	res.Delivery, res.Note = d, note
	return res, nil
}

// stringToSign is what SNS signs: the message's fields, in this order,
// each as "Name\nValue\n"; Subject only when present.
func stringToSign(m *snsMessage) string {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	add("Message", m.Message)
	add("MessageId", m.MessageId)
	if m.Type == SNSNotification {
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
		add("Timestamp", m.Timestamp)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
		return b.String()
	}
	add("SubscribeURL", m.SubscribeURL)
	add("Timestamp", m.Timestamp)
	add("Token", m.Token)
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	return b.String()
}

func (s *SNS) verify(ctx context.Context, m *snsMessage) error {
	var hash crypto.Hash
	switch m.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return refuse(BadSign, "SignatureVersion %q is not 1 or 2", m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil || len(sig) == 0 {
		return refuse(BadSign, "the message's Signature is missing or not base64")
	}
	cert, err := s.certificate(ctx, m.SigningCertURL)
	if err != nil {
		return err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return refuse(BadSign, "the signing certificate has no RSA key")
	}
	var sum []byte
	if hash == crypto.SHA1 {
		h := sha1.Sum([]byte(stringToSign(m)))
		sum = h[:]
	} else {
		h := sha256.Sum256([]byte(stringToSign(m)))
		sum = h[:]
	}
	if rsa.VerifyPKCS1v15(pub, hash, sum, sig) != nil {
		return refuse(BadSign, "the SNS signature does not verify")
	}
	return nil
}

// snsURL checks that raw is an https URL on SNS's host pattern, with no
// port or credentials.
func snsURL(raw, what string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Port() != "" || !snsHost.MatchString(u.Hostname()) {
		return nil, refuse(BadSign, "%s %q is not an https://sns.<region>.amazonaws.com[.cn]/ URL", what, raw)
	}
	return u, nil
}

// certificate returns the override, else the certificate at rawURL,
// fetched once.
func (s *SNS) certificate(ctx context.Context, rawURL string) (*x509.Certificate, error) {
	if s.override != nil {
		return s.override, nil
	}
	u, err := snsURL(rawURL, "SigningCertURL")
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(u.Path, ".pem") {
		return nil, refuse(BadSign, "SigningCertURL %q does not name a .pem file", rawURL)
	}
	s.mu.Lock()
	cert := s.certs[u.String()]
	s.mu.Unlock()
	if cert != nil {
		return cert, nil
	}
	data, err := s.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if cert, err = parseCertificate(data); err != nil {
		return nil, refuse(BadSign, "SigningCertURL %q holds no certificate: %v", rawURL, err)
	}
	s.mu.Lock()
	if len(s.certs) >= maxCachedCerts {
		clear(s.certs)
	}
	s.certs[u.String()] = cert
	s.mu.Unlock()
	return cert, nil
}

// confirm fetches a SubscribeURL, which confirms the subscription.
func (s *SNS) confirm(ctx context.Context, rawURL string) error {
	u, err := snsURL(rawURL, "SubscribeURL")
	if err != nil {
		return err
	}
	_, err = s.get(ctx, u)
	return err
}

// get fetches u (at most 1 MiB); any answer but 200 is an error.
func (s *SNS) get(ctx context.Context, u *url.URL) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s%s: %v", ErrUnreachable, u.Host, u.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, fmt.Errorf("%w: GET %s: status %d, a redirect, which is not followed", ErrUnreachable, u.Host+u.Path, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s%s: %v", ErrUnreachable, u.Host, u.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: status %d", ErrUnreachable, u.Host+u.Path, resp.StatusCode)
	}
	return data, nil
}

// sesNotification is the part of an SES receipt notification that is read.
type sesNotification struct {
	NotificationType string `json:"notificationType"`
	Mail             struct {
		Source string `json:"source"`
	} `json:"mail"`
	Receipt struct {
		Recipients []string `json:"recipients"`
		Action     struct {
			Type     string `json:"type"`
			Encoding string `json:"encoding"`
		} `json:"action"`
	} `json:"receipt"`
	Content *string `json:"content"`
}

// sesMail reads the SES notification in an SNS Message: a Delivery, or nil
// and a note for SES's set-up notification.
func sesMail(message string, lim Limits) (*Delivery, string, error) {
	var n sesNotification
	if err := json.Unmarshal([]byte(message), &n); err != nil {
		return nil, "", refuse(Malformed, "the SNS Message is not an SES receipt notification (JSON): %v", err)
	}
	switch n.NotificationType {
	case "AMAZON_SES_SETUP_NOTIFICATION":
		return nil, "SES set-up notification received; nothing to store", nil
	case "Received":
	default:
		return nil, "", refuse(Refused, "notificationType %q is not an SES receipt (Received)", n.NotificationType)
	}
	if n.Content == nil {
		return nil, "", refuse(Refused, "the notification has no content: it comes from a receipt rule's %s action, which stores the mail elsewhere; use the SNS action (it carries mail up to 150 KB)", orDefault(n.Receipt.Action.Type, "non-SNS"))
	}
	raw := []byte(*n.Content)
	if strings.EqualFold(n.Receipt.Action.Encoding, "BASE64") {
		dec, err := base64.StdEncoding.DecodeString(*n.Content)
		if err != nil {
			return nil, "", refuse(Malformed, "content is not base64 although the action's encoding is BASE64: %v", err)
		}
		raw = dec
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, "", refuse(Malformed, "content (the message) is empty")
	}
	if lim.MaxMessageBytes > 0 && int64(len(raw)) > lim.MaxMessageBytes {
		return nil, "", refuse(Malformed, "the message is %d bytes, over the limit of %d", len(raw), lim.MaxMessageBytes)
	}
	return &Delivery{Raw: raw, Sender: n.Mail.Source, Recipients: n.Receipt.Recipients}, "", nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
