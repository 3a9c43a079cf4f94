// Package inbound reads the webhooks of email providers (Mailgun, SendGrid
// Inbound Parse, Postmark, Amazon SES through SNS): each turns one request
// into the original RFC 5322 message, its envelope and the provider's
// delivery id, and checks what the provider signs. It does no I/O besides
// fetching SNS certificates and confirming SNS subscriptions (sns.go);
// storing is package ingest's.
package inbound

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Delivery is one message as a provider handed it over.
type Delivery struct {
	// Raw is the RFC 5322 message: the provider's own bytes when it sent
	// the raw message, else composed from the parsed parts (Compose).
	Raw []byte
	// Sender is the envelope sender; empty when the provider gave none.
	Sender string
	// Recipients are the envelope recipients; empty when the provider gave
	// none (the message's To and Cc are used then).
	Recipients []string
	// ID names the delivery, prefixed by the provider ("mailgun:<token>"),
	// so that a provider's retry is recognised; empty when the provider has
	// no delivery id (an unsigned SendGrid request).
	ID string
}

// Digest sums the delivery (message and envelope), so that a replayed
// delivery id with other content can be told from a retry.
func (d *Delivery) Digest() string {
	h := sha256.New()
	for _, p := range append([]string{string(d.Raw), d.Sender}, d.Recipients...) {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Reason says why a request was refused, for the metrics: a closed set.
type Reason string

// The reasons of a refusal.
const (
	Malformed Reason = "malformed" // not the provider's format, or a part missing or undecodable
	BadSign   Reason = "signature" // missing or wrong signature, or a certificate not trusted
	Replayed  Reason = "replayed"  // a signed delivery id seen before with other content, or a signed timestamp too old
	Refused   Reason = "refused"   // well-formed but not acceptable (unknown SNS topic, S3 action)
)

// Error is a request refused for good: the provider must not retry it.
type Error struct {
	Reason Reason
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func refuse(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Limits bound what one request may hold.
type Limits struct {
	// MaxMessageBytes bounds the message (raw, or the parts it is composed
	// of).
	MaxMessageBytes int64
	// MaxParts bounds the form fields and files of one request, and the
	// attachments and headers of a JSON one.
	MaxParts int
}

// DefaultMaxParts is Limits.MaxParts when it is not set.
const DefaultMaxParts = 1000

func (l Limits) maxParts() int {
	if l.MaxParts <= 0 {
		return DefaultMaxParts
	}
	return l.MaxParts
}

// splitAddresses splits a comma-separated address list, dropping display
// names' angle brackets and empty entries.
func splitAddresses(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if i := strings.LastIndexByte(part, '<'); i >= 0 {
			part = strings.TrimSuffix(part[i+1:], ">")
		}
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
