package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Doors holds the metrics of the mail-client doors, IMAP and POP3 (the
// protocol label: "imap" or "pop3"). A nil *Doors records nothing.
type Doors struct {
	Connections *prometheus.CounterVec // by protocol
	Refused     *prometheus.CounterVec // by protocol
	Logins      *prometheus.CounterVec // by protocol and result
	Commands    *prometheus.CounterVec // by protocol and command
}

// LoginResults are the values of the result label of
// mailsink_mailbox_logins_total.
var LoginResults = []string{"ok", "wrong_key", "limited", "account_busy"}

// NewDoors registers the door metrics on reg.
func NewDoors(reg prometheus.Registerer) *Doors {
	f := promauto.With(reg)
	return &Doors{
		Connections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_mailbox_connections_total", Help: "IMAP and POP3 connections accepted, by protocol.",
		}, []string{"protocol"}),
		Refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_mailbox_connections_refused_total", Help: "IMAP and POP3 connections refused because their client address had MAILSINK_MAILBOX_MAX_CONNECTIONS_PER_ADDRESS open.",
		}, []string{"protocol"}),
		Logins: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_mailbox_logins_total", Help: "IMAP and POP3 logins, by result: ok, wrong_key, limited (the address is over MAILSINK_AUTH_FAILURES_PER_MINUTE), account_busy (the account has MAILSINK_MAILBOX_MAX_CONNECTIONS_PER_ACCOUNT open).",
		}, []string{"protocol", "result"}),
		Commands: f.NewCounterVec(prometheus.CounterOpts{
			Name: "mailsink_mailbox_commands_total", Help: "IMAP and POP3 commands served after login, by protocol and command.",
		}, []string{"protocol", "command"}),
	}
}

// Connection records one accepted connection.
func (d *Doors) Connection(protocol string) {
	if d != nil {
		d.Connections.WithLabelValues(protocol).Inc()
	}
}

// Refusal returns the function that records a connection refused over the
// per-address bound, or nil for a nil d.
func (d *Doors) Refusal(protocol string) func() {
	if d == nil {
		return nil
	}
	c := d.Refused.WithLabelValues(protocol)
	return c.Inc
}

// Login records one login and its result (one of LoginResults).
func (d *Doors) Login(protocol, result string) {
	if d != nil {
		d.Logins.WithLabelValues(protocol, result).Inc()
	}
}

// Command records one command; command is one of the protocol's commands,
// upper case (a closed set: unknown commands are not counted).
func (d *Doors) Command(protocol, command string) {
	if d != nil {
		d.Commands.WithLabelValues(protocol, command).Inc()
	}
}
