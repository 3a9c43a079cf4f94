package smtpd

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/faults"
	"github.com/mailsink/mailsink/internal/ingest"
	"github.com/mailsink/mailsink/store"
)

// Fault injection (docs/smtp.md, "Fault injection"): at each stage where the
// transaction's account is known, the session asks Config.Faults whether a
// rule applies, and if so waits, answers or hangs up as the rule says. A
// command hit by a reply or a disconnect has no effect: a refused MAIL
// starts no transaction, a refused RCPT adds no recipient, and a refused or
// cut DATA or message stores nothing.

// errFaultDisconnect is returned by a command whose connection a fault
// closed: nobody reads it.
var errFaultDisconnect = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "Connection closed"}

// ruleSet holds the fault rules of the accounts a transaction has met, by
// account id.
type ruleSet map[string][]*store.FaultRule

// fault applies the rule point p meets, if any, among the account's rules:
// those in known when it is not nil (Data's copy), else the transaction's
// (faultRules). It returns the reply
// to give instead of the usual one, or nil to go on as usual (no rule, or
// one that only delays).
func (s *session) fault(p faults.Point, known ruleSet) *smtp.SMTPError {
	if s.srv.cfg.Faults == nil || p.AccountID == "" {
		return nil
	}
	// A store call gets its own timeout; the rules known already need none
	// (a context with a timeout starts a timer, which is most of the cost
	// of a stage without rules).
	rules, ok := known[p.AccountID]
	if !ok && known == nil {
		rules, ok = s.knownRules(p.AccountID)
	}
	if !ok {
		ctx, cancel := s.faultCtx()
		if known != nil { // Data: read them without the session's lock
			rules = s.srv.cfg.Faults.Rules(ctx, p.AccountID)
		} else {
			rules = s.faultRules(ctx, p.AccountID)
		}
		cancel()
	}
	if len(rules) == 0 {
		return nil
	}
	ctx, cancel := s.faultCtx()
	rule := s.srv.cfg.Faults.Match(ctx, rules, p) // may take a counted rule's match
	cancel()
	if rule == nil {
		return nil
	}
	s.srv.log.Info("smtp fault", "session", s.id, "remote", s.remote, "stage", p.Stage, "rule", rule.ID)
	if rule.Delay > 0 {
		s.srv.sleep(rule.Delay)
	}
	switch {
	case rule.Disconnect:
		s.drop()
		return errFaultDisconnect
	case rule.Reply != nil:
		return faultReply(rule.Reply)
	}
	return nil
}

// faultAccounts applies the rule that point p meets for the first of the
// recipients' accounts that has one, among the rules in known; p's
// Recipients are set to the addresses routed to that account.
func (s *session) faultAccounts(p faults.Point, rcpts []ingest.Recipient, known ruleSet) *smtp.SMTPError {
	if s.srv.cfg.Faults == nil || noRules(rcpts, known) {
		return nil
	}
	var order []*store.Account
	byAccount := map[*store.Account][]string{}
	for _, r := range rcpts {
		if _, ok := byAccount[r.Account]; !ok {
			order = append(order, r.Account)
		}
		byAccount[r.Account] = append(byAccount[r.Account], r.Address)
	}
	for _, acc := range order {
		p.AccountID, p.Recipients = acc.ID, byAccount[acc]
		if reply := s.fault(p, known); reply != nil {
			return reply
		}
	}
	return nil
}

// noRules reports whether known holds the rules of every recipient's
// account and none has a rule: the usual case, which needs no more work.
func noRules(rcpts []ingest.Recipient, known ruleSet) bool {
	for _, r := range rcpts {
		if rules, ok := known[r.Account.ID]; !ok || len(rules) > 0 {
			return false
		}
	}
	return true
}

// faultCtx returns the context of a call of Config.Faults: with the store
// timeout, unless the rules are in this process's store, which would not
// heed it (faults.Injector.Local).
func (s *session) faultCtx() (context.Context, context.CancelFunc) {
	if s.srv.cfg.Faults.Local() {
		return s.srv.ctx, func() {}
	}
	return context.WithTimeout(s.srv.ctx, s.srv.cfg.StoreTimeout)
}

// faultRules returns the account's fault rules, read once per transaction
// (once per AUTH for the auth stage): a transaction sees the rules as they
// were when it first needed them, which saves a store round trip at each
// of its commands. Counted rules stay exact: Match takes their matches
// from the store. Data works on a copy that it takes before it reads
// (ruleSet), so that it never waits for s.mu once it reads (bdat.go).
func (s *session) faultRules(ctx context.Context, accountID string) []*store.FaultRule {
	if rules, ok := s.knownRules(accountID); ok {
		return rules
	}
	rules := s.srv.cfg.Faults.Rules(ctx, accountID)
	s.mu.Lock()
	if s.rules != nil {
		s.rules[accountID] = rules
	}
	s.mu.Unlock()
	return rules
}

// knownRules returns the account's rules when the transaction has read
// them already (faultRules).
func (s *session) knownRules(accountID string) ([]*store.FaultRule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules, ok := s.rules[accountID]
	return rules, ok
}

// refuseData makes a data fault's reply the answer to the DATA command: go-smtp
// has written its 354 before calling Data, but the connection holds it until
// the next read, so it is taken back, and go-smtp's reader r is given the end
// of a message that never came. The client, refused, sends none. That needs a
// plaintext TCP connection (a TLS record cannot be taken back) on which
// nothing has come after the DATA line (a client that sent its message
// without waiting for the 354: the rule's delay gives it time to); otherwise
// the reply follows the message, which go-smtp reads and drops. A client
// that sends its message after the refusal, without having waited for it,
// has it read as commands, as by any server that refuses DATA: RFC 5321
// has clients wait for the 354.
func (s *session) refuseData(r io.Reader) {
	if s.conn == nil || s.c.Conn() != net.Conn(s.conn) {
		return
	}
	f := newFastData(s.conn, r, maxLineLength)
	var b [1]byte
	if _, ok, _ := f.handOver(b[:]); !ok {
		return
	}
	if s.conn.quiet() && s.conn.retract("354 ") {
		f.state = stateEOF
	}
	f.handBack()
}

// sleep waits for d, or less when the server shuts down.
func (s *Server) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
	case <-s.conns.stopping:
	}
}

// drop closes the session's connection at once, without a reply.
func (s *session) drop() {
	if s.conn != nil {
		s.conn.drop()
		return
	}
	s.c.Conn().Close()
}

// faultReply returns the SMTP reply of r. A text that starts with an
// enhanced status code of the reply's class (RFC 3463, "4.3.0 ...") gives
// it; otherwise go-smtp adds X.0.0.
func faultReply(r *store.FaultReply) *smtp.SMTPError {
	reply := &smtp.SMTPError{Code: r.Code, EnhancedCode: smtp.EnhancedCodeNotSet, Message: r.Text}
	if code, rest, ok := strings.Cut(r.Text, " "); ok {
		if enh, ok := parseEnhancedCode(code); ok && enh[0] == r.Code/100 {
			reply.EnhancedCode, reply.Message = enh, rest
		}
	}
	if reply.Message == "" {
		reply.Message = "Fault injected by mailsink"
	}
	return reply
}

// parseEnhancedCode parses "class.subject.detail".
func parseEnhancedCode(s string) (smtp.EnhancedCode, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return smtp.EnhancedCode{}, false
	}
	var code smtp.EnhancedCode
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 999 || len(p) > 3 {
			return smtp.EnhancedCode{}, false
		}
		code[i] = n
	}
	return code, true
}

// onlyAccount returns the account of a transaction before any RCPT: the
// authenticated one, else the only configured account, else nil.
func (s *session) onlyAccount() *store.Account {
	if s.account != nil {
		return s.account
	}
	if accs := s.srv.accounts.Accounts(); len(accs) == 1 {
		return accs[0]
	}
	return nil
}

func accountID(a *store.Account) string {
	if a == nil {
		return ""
	}
	return a.ID
}
