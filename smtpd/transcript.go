package smtpd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/store"
)

// The transcript of a transaction (store.Transcript): what the client said
// in MAIL, RCPT and AUTH and what it was answered, stored with the message.
// Of AUTH only the mechanism is kept: its user name and password (often
// both the API key) are store.Redacted.
// Successful replies are go-smtp's own words (v0.25), so that the
// transcript shows what the client read; a test compares them.

// maxTranscriptText bounds each address and reply kept, so that a
// transcript stays small whatever the client sends.
const maxTranscriptText = 320

// noteMail records an accepted MAIL, which starts a new transcript.
func (s *session) noteMail(from string, opts *smtp.MailOptions) {
	var params []string
	if opts != nil {
		if opts.Size > 0 {
			params = append(params, "SIZE="+strconv.FormatInt(opts.Size, 10))
		}
		if opts.Body != "" {
			params = append(params, "BODY="+string(opts.Body))
		}
		if opts.UTF8 {
			params = append(params, "SMTPUTF8")
		}
		if opts.RequireTLS {
			params = append(params, "REQUIRETLS")
		}
		if opts.Return != "" {
			params = append(params, "RET="+string(opts.Return))
		}
		if opts.EnvelopeID != "" {
			params = append(params, "ENVID="+clip(opts.EnvelopeID))
		}
		if opts.Auth != nil {
			params = append(params, store.RedactAuthParam("AUTH=<"+clip(*opts.Auth)+">"))
		}
	}
	t := store.Transcript{
		ClientAddress: s.remote,
		AuthMechanism: s.authMech,
		Mail: store.TranscriptCommand{Address: clip(from), Params: nonNil(params),
			Reply: "250 2.0.0 Roger, accepting mail from <" + clip(from) + ">"},
	}
	// The connection is read here, on go-smtp's command goroutine: with
	// BDAT, Data runs on another.
	if s.authMech != "" {
		t.AuthIdentity = store.Redacted
	}
	if s.c != nil {
		t.Helo = clip(s.c.Hostname())
		if state, ok := s.c.TLSConnectionState(); ok {
			t.TLSVersion = tls.VersionName(state.Version)
			t.TLSCipher = tls.CipherSuiteName(state.CipherSuite)
		}
	}
	s.mu.Lock()
	s.tr = t
	s.mu.Unlock()
}

// noteRcpt records a RCPT and its reply: err, or go-smtp's 250.
func (s *session) noteRcpt(to string, opts *smtp.RcptOptions, err error) {
	var params []string
	if opts != nil {
		if len(opts.Notify) > 0 {
			notify := make([]string, len(opts.Notify))
			for i, n := range opts.Notify {
				notify[i] = string(n)
			}
			params = append(params, "NOTIFY="+strings.Join(notify, ","))
		}
		if opts.OriginalRecipient != "" {
			params = append(params, "ORCPT="+string(opts.OriginalRecipientType)+";"+clip(opts.OriginalRecipient))
		}
	}
	var reply string
	if err != nil {
		reply = replyText(err)
	} else {
		reply = "250 2.0.0 I'll make sure <" + clip(to) + "> gets this"
	}
	acc := s.account
	if acc == nil {
		acc, _ = s.srv.accounts.ForRecipient(to)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tr.Rcpts) >= store.MaxTranscriptCommands {
		if s.tr.OmittedBy == nil {
			s.tr.OmittedBy = map[string]int{}
		}
		s.tr.OmittedBy[accountID(acc)]++
		return
	}
	s.tr.Rcpts = append(s.tr.Rcpts, store.TranscriptCommand{Address: clip(to), Params: nonNil(params), Reply: reply, AccountID: accountID(acc)})
}

// transcriptLocked returns the transaction's transcript as it stands, for
// a message that will be answered 250; s.mu is held. Data takes it before
// it reads: once Data reads, it must never wait for s.mu, which Mail holds
// while it waits for the last BDAT transaction's Data to end (bdat.go).
func (s *session) transcriptLocked() *store.Transcript {
	t := s.tr
	t.Rcpts = append([]store.TranscriptCommand(nil), s.tr.Rcpts...)
	t.OmittedBy = maps.Clone(s.tr.OmittedBy)
	t.Data = "250 2.0.0 OK: queued"
	return &t
}

// replyText is the reply line err becomes.
func replyText(err error) string {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		return "451 4.0.0 " + clip(err.Error())
	}
	code := se.EnhancedCode
	if code == smtp.EnhancedCodeNotSet {
		code = smtp.EnhancedCode{se.Code / 100, 0, 0}
	}
	return clip(fmt.Sprintf("%d %d.%d.%d %s", se.Code, code[0], code[1], code[2], se.Message))
}

func clip(s string) string {
	if len(s) > maxTranscriptText {
		return s[:maxTranscriptText]
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
