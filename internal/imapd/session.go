package imapd

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/mailsink/mailsink/internal/clientaddr"
	"github.com/mailsink/mailsink/internal/mailaccess"
	"github.com/mailsink/mailsink/store"
)

// session is one connection; imapserver calls its methods one command at a
// time (IDLE's updates run while no other command does).
type session struct {
	srv     *Server
	conn    *imapserver.Conn
	remote  string
	ctx     context.Context
	cancel  context.CancelFunc
	account *store.Account // nil before login
	release func()
	mbox    *mailbox // nil unless a mailbox is selected
}

var _ imapserver.Session = (*session)(nil)

func (s *Server) newSession(c *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
	s.cfg.Metrics.Connection(protocol)
	ss := &session{srv: s, conn: c, remote: clientaddr.Host(c.NetConn().RemoteAddr().String())}
	ss.ctx, ss.cancel = context.WithCancel(s.ctx)
	return ss, nil, nil
}

// call returns a context for one store call or read.
func (ss *session) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(ss.ctx, ss.srv.cfg.StoreTimeout)
}

func (ss *session) command(name string) {
	ss.srv.cfg.Metrics.Command(protocol, name)
}

// Close ends the session.
func (ss *session) Close() error {
	if ss.mbox != nil {
		ss.mbox.close()
		ss.mbox = nil
	}
	if ss.release != nil {
		ss.release()
	}
	ss.cancel()
	return nil
}

// Login takes any user name and an API key as the password.
func (ss *session) Login(_, password string) error {
	doors := ss.srv.cfg.Metrics
	acc, release, err := ss.srv.cfg.Access.Login(ss.remote, password)
	switch {
	case errors.Is(err, mailaccess.ErrLimited):
		doors.Login(protocol, "limited")
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeUnavailable,
			Text: "Too many failed logins from this address, try again later"}
	case errors.Is(err, mailaccess.ErrAccountBusy):
		doors.Login(protocol, "account_busy")
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeLimit,
			Text: "Too many connections to this account, try again later"}
	case err != nil:
		doors.Login(protocol, "wrong_key")
		ss.srv.log.Info("imap login failed", "remote", ss.remote)
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeAuthenticationFailed,
			Text: "Wrong API key: log in with any user name and an API key as the password"}
	}
	doors.Login(protocol, "ok")
	ss.account, ss.release = acc, release
	return nil
}

// isInbox reports whether name is the one mailbox (INBOX is case-insensitive).
func isInbox(name string) bool { return strings.EqualFold(name, "INBOX") }

// Select opens INBOX: the newest MaxMessages emails of the account.
func (ss *session) Select(name string, options *imap.SelectOptions) (*imap.SelectData, error) {
	if options.ReadOnly {
		ss.command("EXAMINE")
	} else {
		ss.command("SELECT")
	}
	if ss.mbox != nil {
		ss.mbox.close()
		ss.mbox = nil
	}
	if !isInbox(name) {
		return nil, errNoMailbox
	}
	m, err := ss.open(options.ReadOnly)
	if err != nil {
		return nil, err
	}
	ss.mbox = m
	data := &imap.SelectData{
		Flags:          []imap.Flag{imap.FlagSeen, imap.FlagDeleted},
		PermanentFlags: []imap.Flag{imap.FlagSeen, imap.FlagDeleted},
		NumMessages:    uint32(len(m.msgs)),
		UIDNext:        imap.UID(m.uidNext),
		UIDValidity:    m.validity,
	}
	for i, msg := range m.msgs {
		if !msg.read {
			data.FirstUnseenSeqNum = uint32(i + 1)
			break
		}
	}
	return data, nil
}

// open reads the mailbox and follows its changes.
func (ss *session) open(readOnly bool) (*mailbox, error) {
	m := newMailbox(ss, readOnly)
	if err := m.load(); err != nil {
		m.close()
		return nil, ss.srv.storeError(err)
	}
	return m, nil
}

// Unselect closes the mailbox (CLOSE has expunged it first).
func (ss *session) Unselect() error {
	if ss.mbox != nil {
		ss.mbox.close()
		ss.mbox = nil
	}
	return nil
}

// Create, Delete, Rename: there is one mailbox.
func (ss *session) Create(string, *imap.CreateOptions) error {
	ss.command("CREATE")
	return errCannot
}

func (ss *session) Delete(string) error { return errCannot }

func (ss *session) Rename(string, string, *imap.RenameOptions) error { return errCannot }

// Subscribe and Unsubscribe accept INBOX, which is always subscribed.
func (ss *session) Subscribe(name string) error {
	if !isInbox(name) {
		return errNoMailbox
	}
	return nil
}

func (ss *session) Unsubscribe(name string) error {
	if !isInbox(name) {
		return errNoMailbox
	}
	return errCannot
}

// List lists INBOX when a pattern matches it, and the hierarchy delimiter
// for an empty pattern.
func (ss *session) List(w *imapserver.ListWriter, ref string, patterns []string, options *imap.ListOptions) error {
	ss.command("LIST")
	for _, p := range patterns {
		if p == "" {
			return w.WriteList(&imap.ListData{Attrs: []imap.MailboxAttr{imap.MailboxAttrNoSelect}, Delim: '/'})
		}
	}
	for _, p := range patterns {
		if !imapserver.MatchList("INBOX", '/', ref, p) {
			continue
		}
		data := &imap.ListData{Mailbox: "INBOX", Delim: '/', Attrs: []imap.MailboxAttr{imap.MailboxAttrHasNoChildren}}
		if options != nil && options.ReturnStatus != nil {
			st, err := ss.status(options.ReturnStatus)
			if err != nil {
				return err
			}
			data.Status = st
		}
		return w.WriteList(data)
	}
	return nil
}

// Status reads INBOX as SELECT would.
func (ss *session) Status(name string, options *imap.StatusOptions) (*imap.StatusData, error) {
	ss.command("STATUS")
	if !isInbox(name) {
		return nil, errNoMailbox
	}
	return ss.status(options)
}

func (ss *session) status(options *imap.StatusOptions) (*imap.StatusData, error) {
	m := ss.mbox
	if m == nil {
		var err error
		if m, err = ss.open(true); err != nil {
			return nil, err
		}
		defer m.close()
	}
	data := &imap.StatusData{Mailbox: "INBOX"}
	n, unseen := uint32(0), uint32(0)
	for _, msg := range m.msgs {
		if msg.gone {
			continue
		}
		n++
		if !msg.read {
			unseen++
		}
	}
	if options.NumMessages {
		data.NumMessages = &n
	}
	if options.NumUnseen {
		data.NumUnseen = &unseen
	}
	if options.NumRecent {
		zero := uint32(0)
		data.NumRecent = &zero
	}
	if options.UIDNext {
		data.UIDNext = imap.UID(m.uidNext)
	}
	if options.UIDValidity {
		data.UIDValidity = m.validity
	}
	return data, nil
}

// Append: mailsink stores only the mail it receives.
func (ss *session) Append(string, imap.LiteralReader, *imap.AppendOptions) (*imap.AppendData, error) {
	ss.command("APPEND")
	return nil, errCannot
}

// Copy: there is no other mailbox.
func (ss *session) Copy(imap.NumSet, string) (*imap.CopyData, error) {
	ss.command("COPY")
	return nil, errCannot
}

// Poll tells the client what changed since its last command.
func (ss *session) Poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	if ss.mbox == nil {
		return nil
	}
	return ss.mbox.poll(w, allowExpunge)
}

// Idle tells the client what changes as it happens, for at most maxIdle.
func (ss *session) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	ss.command("IDLE")
	timer := time.NewTimer(maxIdle)
	defer timer.Stop()
	var signal <-chan struct{}
	if ss.mbox != nil {
		signal = ss.mbox.signal
	}
	for {
		if ss.mbox != nil {
			if err := ss.mbox.poll(w, true); err != nil {
				return err
			}
		}
		select {
		case <-stop:
			return nil
		case <-signal:
		case <-ss.ctx.Done():
			return nil
		case <-timer.C:
			return ss.conn.Bye("IDLE lasted 30 minutes, the longest it may")
		}
	}
}

// Expunge deletes the messages marked \Deleted (of uids, when given).
func (ss *session) Expunge(w *imapserver.ExpungeWriter, uids *imap.UIDSet) error {
	ss.command("EXPUNGE")
	return ss.mbox.expunge(w, uids)
}

// Search answers SEARCH and UID SEARCH.
func (ss *session) Search(kind imapserver.NumKind, criteria *imap.SearchCriteria, _ *imap.SearchOptions) (*imap.SearchData, error) {
	ss.command("SEARCH")
	return ss.mbox.search(kind, criteria)
}

// Fetch answers FETCH and UID FETCH.
func (ss *session) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	ss.command("FETCH")
	return ss.mbox.fetch(w, numSet, options)
}

// Store answers STORE and UID STORE.
func (ss *session) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, _ *imap.StoreOptions) error {
	ss.command("STORE")
	return ss.mbox.store(w, numSet, flags)
}
