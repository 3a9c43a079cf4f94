package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/inbound"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/store"
)

// A provider's webhook: how it refuses for good (a status the provider does
// not retry). A store outage answers 503, which every provider retries.
type provider struct {
	name string
	// refuse is the status of a request refused for good: Mailgun stops
	// at 406, Postmark at 403; SendGrid and SNS retry only 5xx.
	refuse int
}

var (
	mailgun  = provider{"mailgun", http.StatusNotAcceptable}
	sendgrid = provider{"sendgrid", http.StatusBadRequest}
	postmark = provider{"postmark", http.StatusForbidden}
	ses      = provider{"ses", http.StatusBadRequest}
)

// providerBodyLimit bounds a webhook's body: the message may come twice
// (raw and parsed, or text beside stripped text) and attachments in base64,
// so the body may be about twice the message, plus the form's own fields.
func (a *API) providerBodyLimit() int64 { return 2*a.cfg.MaxMessageBytes + 1<<20 }

func (a *API) inboundLimits() inbound.Limits {
	return inbound.Limits{MaxMessageBytes: a.cfg.MaxMessageBytes}
}

// inboundMailgun serves a Mailgun route's forward() (docs/providers.md, "Mailgun").
func (a *API) inboundMailgun(w http.ResponseWriter, r *http.Request) {
	a.serveProvider(w, r, mailgun, func(body []byte) (*inbound.Delivery, error) {
		acc := accountOf(r)
		key := a.accounts.Inbound(acc.ID).MailgunSigningKey
		d, err := inbound.Mailgun(r.Header.Get("Content-Type"), body, key, a.now(), a.inboundLimits())
		if err != nil || d.ID == "" {
			return d, err
		}
		// A signature covers the timestamp and token, not the content: a
		// token seen before is a retry only with the same content, in
		// whichever account its recipients are.
		return d, a.guardToken(r, acc, d)
	})
}

// guardToken remembers a Mailgun token with its delivery's digest for as
// long as idempotency keys are kept (longer than inbound.MailgunMaxAge),
// and refuses a token seen with other content.
func (a *API) guardToken(r *http.Request, acc *store.Account, d *inbound.Delivery) error {
	ctx, cancel := a.storeContext(r)
	defer cancel()
	got, fresh, err := a.store.Reserve(ctx, acc.ID, "mailgun-token:"+strings.TrimPrefix(d.ID, "mailgun:"),
		store.Reservation{Digest: d.Digest()}, store.IdempotencyTTL)
	if err != nil {
		return err
	}
	if !fresh && got.Digest != d.Digest() {
		return &inbound.Error{Reason: inbound.Replayed, Msg: "this token was already used for another message: a replayed signature is refused"}
	}
	return nil
}

// inboundSendGrid serves SendGrid's Inbound Parse (docs/providers.md, "SendGrid").
func (a *API) inboundSendGrid(w http.ResponseWriter, r *http.Request) {
	a.serveProvider(w, r, sendgrid, func(body []byte) (*inbound.Delivery, error) {
		sig := inbound.SendGridSignature{
			Signature: r.Header.Get(inbound.SendGridSignatureHeader),
			Timestamp: r.Header.Get(inbound.SendGridTimestampHeader),
		}
		key := a.accounts.Inbound(accountOf(r).ID).SendGridKey
		// Signed, the delivery's id is the signed content: the same
		// request again answers what it stored, as a retry.
		return inbound.SendGrid(r.Header.Get("Content-Type"), body, key, sig, a.now(), a.inboundLimits())
	})
}

// inboundPostmark serves Postmark's inbound webhook (docs/providers.md, "Postmark").
func (a *API) inboundPostmark(w http.ResponseWriter, r *http.Request) {
	a.serveProvider(w, r, postmark, func(body []byte) (*inbound.Delivery, error) {
		if err := wrongContentType(r, "Postmark posts", "application/json"); err != nil {
			return nil, err
		}
		return inbound.Postmark(body, a.inboundLimits())
	})
}

// serveProvider reads a provider's request, turns its body into a delivery
// with parse, and stores it, answering as that provider expects.
func (a *API) serveProvider(w http.ResponseWriter, r *http.Request, p provider, parse func(body []byte) (*inbound.Delivery, error)) {
	start := time.Now()
	body, release, ok := a.readProviderBody(w, r, p)
	if !ok {
		return
	}
	defer release()
	d, err := parse(body)
	if err != nil {
		a.providerError(w, r, p, err)
		return
	}
	a.deliverProvider(w, r, p, d, start)
}

// inboundSES serves SNS messages of an SES receipt rule's SNS action
// (docs/providers.md, "Amazon SES").
func (a *API) inboundSES(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, release, ok := a.readProviderBody(w, r, ses)
	if !ok {
		return
	}
	defer release()
	if err := wrongContentType(r, "SNS posts", "text/plain", "application/json"); err != nil {
		a.providerError(w, r, ses, err)
		return
	}
	acc := accountOf(r)
	ctx, cancel := a.storeContext(r)
	defer cancel()
	res, err := a.sns.SES(ctx, r.Header.Get("X-Amz-Sns-Message-Type"), body, a.accounts.Inbound(acc.ID).SNSTopicArns, a.inboundLimits())
	if err != nil {
		a.providerError(w, r, ses, err)
		return
	}
	if res.Delivery == nil {
		a.cfg.Metrics.Inbound().Delivery(ses.name, "ignored")
		a.log.Info("inbound webhook: nothing to store", "provider", ses.name, "type", res.Type, "note", res.Note)
		writeJSON(w, http.StatusOK, map[string]string{"message": res.Note})
		return
	}
	a.deliverProvider(w, r, ses, res.Delivery, start)
}

// wrongContentType refuses a request whose Content-Type is not one of the
// media types its provider posts (docs/providers.md, "wrong Content-Type"),
// so that a body of another declared type is not read as JSON. A request
// without a Content-Type is let through to the parser.
func wrongContentType(r *http.Request, who string, accept ...string) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && slices.Contains(accept, mt) {
		return nil
	}
	return &inbound.Error{Reason: inbound.Malformed,
		Msg: fmt.Sprintf("%s %s, not the Content-Type %s", who, strings.Join(accept, " or "), quote(ct))}
}

// readProviderBody reads a webhook's body; one too large or broken is
// refused with the provider's no-retry status.
func (a *API) readProviderBody(w http.ResponseWriter, r *http.Request, p provider) ([]byte, func(), bool) {
	body, release, status := a.readBodyAs(w, r, a.providerBodyLimit(), p.refuse)
	switch {
	case status == http.StatusServiceUnavailable:
		a.cfg.Metrics.Inbound().Delivery(p.name, "unavailable") // retried
	case status != 0:
		a.cfg.Metrics.Inbound().Delivery(p.name, "refused")
	}
	return body, release, status == 0
}

// deliverProvider stores a delivery: one email per envelope recipient, each
// in the account that lists its domain, else the key's account; without
// envelope recipients, the To and Cc addresses in the key's account. The
// provider's delivery id makes a retry store nothing new.
func (a *API) deliverProvider(w http.ResponseWriter, r *http.Request, p provider, d *inbound.Delivery, start time.Time) {
	if int64(len(d.Raw)) > a.cfg.MaxMessageBytes {
		a.providerError(w, r, p, &inbound.Error{Reason: inbound.Malformed,
			Msg: "the message is over the limit of MAILSINK_MAX_MESSAGE_BYTES"})
		return
	}
	acc := accountOf(r)
	env := ingest.Envelope{IdempotencyKey: ingest.PrintableKey(d.ID), Caller: acc.ID}
	if env.IdempotencyKey == "" {
		v := newValidationError()
		env.IdempotencyKey = idempotencyKey(r, v)
		if !v.empty() {
			a.providerError(w, r, p, &inbound.Error{Reason: inbound.Malformed, Msg: v.FieldErrors["Idempotency-Key"][0]})
			return
		}
	}
	if store.ValidAddress(d.Sender) {
		env.Sender = d.Sender
	}
	// Bounded before any recipient is looked at: a webhook body may name
	// a million of them.
	if max := a.cfg.MaxRecipients; max > 0 && len(d.Recipients) > max {
		a.providerError(w, r, p, &inbound.Error{Reason: inbound.Malformed,
			Msg: fmt.Sprintf("too many recipients: %d, at most %d per message", len(d.Recipients), max)})
		return
	}
	seen := map[string]bool{}
	for _, addr := range d.Recipients {
		if !store.ValidAddress(addr) {
			a.providerError(w, r, p, &inbound.Error{Reason: inbound.Malformed, Msg: "envelope recipient " + quote(addr) + " is not a valid address"})
			return
		}
		to, ok := a.accounts.ForRecipient(addr)
		if !ok {
			to = acc
		}
		if k := to.ID + "\x00" + store.NormalizeAddress(addr); !seen[k] {
			seen[k] = true
			env.Recipients = append(env.Recipients, ingest.Recipient{Address: addr, Account: to})
		}
	}
	if len(env.Recipients) == 0 {
		env.HeaderAccount = acc
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	emails, err := a.ingest.Deliver(ctx, d.Raw, env)
	if err != nil {
		a.providerError(w, r, p, err)
		return
	}
	result := "stored"
	if env.IdempotencyKey != "" && storedBefore(emails, start) {
		result = "duplicate"
	}
	a.cfg.Metrics.Inbound().Delivery(p.name, result)
	a.log.Info("inbound webhook", "provider", p.name, "result", result, "emails", len(emails), "delivery", d.ID)
	a.writeList(w, http.StatusOK, ownedBy(emails, acc))
}

// ownedBy returns the emails of acc: a delivery may store emails in other
// accounts (their domains), which the key's answer must not show.
func ownedBy(emails []*store.Email, acc *store.Account) []*store.Email {
	own := emails[:0:0]
	for _, e := range emails {
		if e.AccountID == acc.ID {
			own = append(own, e)
		}
	}
	return own
}

// storedBefore reports whether every email was stored before the request
// began: a retry's answer, with nothing new.
func storedBefore(emails []*store.Email, start time.Time) bool {
	start = start.Truncate(time.Millisecond)
	for _, e := range emails {
		if !e.CreatedAt.Before(start) {
			return false
		}
	}
	return len(emails) > 0
}

// providerError answers an error in the provider's terms: a refusal for
// good with its no-retry status, a store outage (or an unreachable SNS)
// with 503, which it retries.
func (a *API) providerError(w http.ResponseWriter, r *http.Request, p provider, err error) {
	var refusal *inbound.Error
	switch code := store.CodeOf(err); {
	case errors.As(err, &refusal):
		if refusal.Reason == inbound.BadSign {
			a.cfg.Metrics.Inbound().SignatureFailure(p.name)
		}
		a.cfg.Metrics.Inbound().Delivery(p.name, "refused")
		a.log.Warn("inbound webhook refused", "provider", p.name, "reason", string(refusal.Reason), "why", refusal.Msg)
		writeRefusal(w, p.refuse, refusal.Msg)
	case errors.Is(err, inbound.ErrUnreachable):
		a.cfg.Metrics.Inbound().Delivery(p.name, "unavailable")
		a.log.Warn("inbound webhook: SNS unreachable", "provider", p.name, "err", err)
		writeMessage(w, http.StatusServiceUnavailable, "could not reach SNS to fetch its certificate or confirm the subscription; retry later")
	case code == store.Unavailable:
		a.cfg.Metrics.Inbound().Delivery(p.name, "unavailable")
		writeError(w, r, a.log, err)
	case code == store.QuotaExceeded:
		// 503, which every provider retries (SendGrid and SNS would drop
		// a 429): the mail is stored once the account has room again.
		a.cfg.Metrics.Inbound().Delivery(p.name, "unavailable")
		w.Header().Set("Retry-After", "60")
		writeMessage(w, http.StatusServiceUnavailable, storeMessage(err))
	case code == store.Invalid || code == store.Conflict || code == store.TooLarge:
		a.cfg.Metrics.Inbound().Delivery(p.name, "refused")
		msg := storeMessage(err)
		a.log.Warn("inbound webhook refused", "provider", p.name, "code", code, "why", msg)
		writeRefusal(w, p.refuse, msg)
	default:
		a.cfg.Metrics.Inbound().Delivery(p.name, "failed")
		writeError(w, r, a.log, err)
	}
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
