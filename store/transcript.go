package store

import "strings"

// Transcript is the SMTP transaction that delivered a message, as the
// server saw it, kept with the message's body so that a developer can see
// what their application said (GET /v1/emails/{id}/transcript). It is small
// and bounded: a few hundred bytes for a typical message, at most
// MaxTranscriptCommands recipient commands. It never holds a credential:
// what AUTH carried, the user name as well as the password (clients often
// send the API key as both), is Redacted.
type Transcript struct {
	// ClientAddress is the client's address, host:port.
	ClientAddress string `json:"clientAddress"`
	// Helo is the name the client gave in EHLO or HELO.
	Helo string `json:"helo"`
	// TLSVersion and TLSCipher name the connection's TLS, empty without.
	TLSVersion string `json:"tlsVersion"`
	TLSCipher  string `json:"tlsCipher"`
	// AuthMechanism is the AUTH mechanism (PLAIN, LOGIN), and
	// AuthIdentity Redacted for the user name the client gave; both are
	// empty without AUTH.
	AuthMechanism string              `json:"authMechanism"`
	AuthIdentity  string              `json:"authIdentity"`
	Mail          TranscriptCommand   `json:"mail"`
	Rcpts         []TranscriptCommand `json:"rcpt"`
	// RcptsOmitted counts the RCPT commands past MaxTranscriptCommands.
	RcptsOmitted int `json:"rcptOmitted,omitempty"`
	// OmittedBy counts them by the account they were routed to ("" for
	// none), while the transaction is under way; For makes RcptsOmitted
	// of it.
	OmittedBy map[string]int `json:"-"`
	// Data is the reply to the message.
	Data string `json:"data"`
}

// TranscriptCommand is one MAIL or RCPT command and the reply it got.
type TranscriptCommand struct {
	Address string   `json:"address"`
	Params  []string `json:"params"` // ESMTP parameters, "SIZE=1234"
	Reply   string   `json:"reply"`  // "250 2.0.0 ..."
	// AccountID is the account a RCPT was routed to, "" when none; it
	// decides which accounts see the command (Transcript.For).
	AccountID string `json:"-"`
}

// MaxTranscriptCommands bounds the RCPT commands a Transcript keeps.
const MaxTranscriptCommands = 100

// For returns the transcript as accountID may see it: without the RCPT
// commands routed to other accounts, kept or omitted. t may be nil.
func (t *Transcript) For(accountID string) *Transcript {
	if t == nil {
		return nil
	}
	out := *t
	out.Rcpts = make([]TranscriptCommand, 0, len(t.Rcpts))
	for _, c := range t.Rcpts {
		if c.AccountID == "" || c.AccountID == accountID {
			out.Rcpts = append(out.Rcpts, c)
		}
	}
	if t.OmittedBy != nil {
		out.RcptsOmitted = t.OmittedBy[""]
		if accountID != "" {
			out.RcptsOmitted += t.OmittedBy[accountID]
		}
		out.OmittedBy = nil
	}
	return &out
}

// Redacted stands in a transcript for what AUTH carried.
const Redacted = "<redacted>"

// RedactAuthParam returns the MAIL parameter p, or "AUTH=<redacted>" for
// an AUTH=<mailbox> parameter: it names who authenticated, which may be
// the user name of an AUTH. AUTH=<> (no one) stays.
func RedactAuthParam(p string) string {
	if len(p) > len("AUTH=") && strings.EqualFold(p[:len("AUTH=")], "AUTH=") && p[len("AUTH="):] != "<>" {
		return "AUTH=" + Redacted
	}
	return p
}

// WithoutCredentials returns the transcript as it may be shown: with what
// AUTH carried Redacted, however it was stored (transcripts stored by
// earlier releases kept the user name). t may be nil. t is not changed.
func (t *Transcript) WithoutCredentials() *Transcript {
	if t == nil {
		return nil
	}
	out := *t
	if out.AuthIdentity != "" {
		out.AuthIdentity = Redacted
	}
	if t.Mail.Params != nil {
		out.Mail.Params = make([]string, len(t.Mail.Params))
		for i, p := range t.Mail.Params {
			out.Mail.Params[i] = RedactAuthParam(p)
		}
	}
	return &out
}
