package imapd

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/mailsink/mailsink/internal/search"
	"github.com/mailsink/mailsink/store"
)

// mailbox is a session's view of INBOX: the messages as the client knows
// them (message sequence number i is msgs[i-1]), in UID order, and the
// changes the store's events announced that the client has not been told
// yet. Only the session's command goroutine reads and changes msgs; the
// event pump only adds to the pending changes, under mu.
type mailbox struct {
	s        *session
	readOnly bool
	validity uint32
	uidNext  uint32
	msgs     []*message
	byID     map[string]*message

	mu      sync.Mutex
	sub     store.Subscription
	created bool            // new mail: list the UIDs above the last one
	deleted map[string]bool // emails deleted
	updated map[string]bool // emails that changed: their read state is read again
	resync  bool            // events were missed: read the mailbox again
	closed  bool
	// signal wakes IDLE when a change is pending.
	signal chan struct{}
	done   chan struct{} // closed by close, ends the pump
}

// message is one message of the view.
type message struct {
	uid     uint32
	id      string
	read    bool
	deleted bool // \Deleted: kept by the session until EXPUNGE
	gone    bool // deleted in the store; EXPUNGE not told yet
}

func (m *message) flags() []imap.Flag {
	flags := []imap.Flag{}
	if m.read {
		flags = append(flags, imap.FlagSeen)
	}
	if m.deleted {
		flags = append(flags, imap.FlagDeleted)
	}
	return flags
}

// newMailbox subscribes to the account's events: what changes from now on
// reaches the view, whatever load reads.
func newMailbox(ss *session, readOnly bool) *mailbox {
	m := &mailbox{s: ss, readOnly: readOnly, byID: map[string]*message{}, deleted: map[string]bool{},
		updated: map[string]bool{}, signal: make(chan struct{}, 1), done: make(chan struct{})}
	m.sub = ss.srv.store.Subscribe(ss.account.ID)
	go m.pump(m.sub)
	return m
}

func (m *mailbox) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		close(m.done)
		m.sub.Close()
	}
}

// pendingBound bounds the changes kept for the client: past it the view
// is read again instead.
func (m *mailbox) pendingBound() int { return 2 * m.s.srv.cfg.MaxMessages }

// pump notes the account's events as pending changes. When its
// subscription ends (it fell behind, or the store is closing) it
// subscribes again and asks for the view to be read again.
func (m *mailbox) pump(sub store.Subscription) {
	for {
		select {
		case <-m.done:
			return
		case e, ok := <-sub.Events():
			if !ok {
				select {
				case <-m.done:
					return
				case <-time.After(time.Second):
				}
				m.mu.Lock()
				if m.closed {
					m.mu.Unlock()
					return
				}
				m.resync = true
				sub = m.s.srv.store.Subscribe(m.s.account.ID)
				m.sub = sub
				m.mu.Unlock()
				m.wake()
				continue
			}
			m.note(e)
			m.wake()
		}
	}
}

func (m *mailbox) note(e store.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e.Type {
	case store.EmailCreated:
		m.created = true
	case store.EmailDeleted:
		m.deleted[e.EmailID] = true
	case store.EmailUpdated:
		m.updated[e.EmailID] = true
	}
	if len(m.deleted)+len(m.updated) > m.pendingBound() {
		m.resync = true
		clear(m.deleted)
		clear(m.updated)
	}
}

func (m *mailbox) wake() {
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// load reads the view: the newest MaxMessages UIDs and their read state.
func (m *mailbox) load() error {
	validity, next, uids, err := m.newest()
	if err != nil {
		return err
	}
	read, err := m.readIDs()
	if err != nil {
		return err
	}
	m.validity, m.uidNext = validity, next
	m.msgs = make([]*message, 0, len(uids))
	for _, u := range uids {
		msg := &message{uid: u.UID, id: u.ID, read: read[u.ID]}
		m.msgs = append(m.msgs, msg)
		m.byID[u.ID] = msg
	}
	return nil
}

// newest reads the newest MaxMessages UIDs of the account, in UID order.
func (m *mailbox) newest() (validity, next uint32, uids []store.EmailUID, err error) {
	srv := m.s.srv
	var pages [][]store.EmailUID
	before, total := uint32(0), 0
	for total < srv.cfg.MaxMessages {
		ctx, cancel := m.s.call()
		limit := min(store.MaxUIDPage, srv.cfg.MaxMessages-total)
		p, err := srv.store.MailboxUIDs(ctx, store.UIDQuery{AccountID: m.s.account.ID, Before: before, Limit: limit, Newest: true})
		cancel()
		if err != nil {
			return 0, 0, nil, err
		}
		if validity == 0 {
			validity, next = p.UIDValidity, p.UIDNext
		}
		pages = append(pages, p.Emails)
		total += len(p.Emails)
		if len(p.Emails) < limit {
			break
		}
		before = p.Emails[0].UID
	}
	uids = make([]store.EmailUID, 0, total)
	for i := len(pages) - 1; i >= 0; i-- {
		uids = append(uids, pages[i]...)
	}
	return validity, next, uids, nil
}

// readIDs returns the set of the account's emails that are read.
func (m *mailbox) readIDs() (map[string]bool, error) {
	ctx, cancel := m.s.call()
	defer cancel()
	ids, err := m.s.srv.search.IDs(ctx, store.ListQuery{AccountID: m.s.account.ID}, search.Query{Terms: []search.Term{{Kind: search.Read}}})
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set, nil
}

// seq returns the sequence number of msg in the view, or 0.
func (m *mailbox) seq(msg *message) uint32 {
	i, ok := slices.BinarySearchFunc(m.msgs, msg.uid, func(have *message, uid uint32) int {
		switch {
		case have.uid < uid:
			return -1
		case have.uid > uid:
			return 1
		}
		return 0
	})
	if !ok {
		return 0
	}
	return uint32(i + 1)
}

// poll tells the client what changed: new messages (EXISTS), read states
// changed elsewhere (FETCH FLAGS) and, when allowed, deletions (EXPUNGE).
func (m *mailbox) poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	m.mu.Lock()
	created, resync := m.created, m.resync
	var deleted, updated map[string]bool
	if len(m.deleted) > 0 {
		deleted, m.deleted = m.deleted, map[string]bool{}
	}
	if len(m.updated) > 0 {
		updated, m.updated = m.updated, map[string]bool{}
	}
	m.created, m.resync = false, false
	m.mu.Unlock()

	// A store that fails now leaves the change pending for the next poll:
	// an error here would end the connection.
	if resync {
		if err := m.reread(w); errors.Is(err, errStoreFailed) {
			m.retry(func() { m.resync = true })
		} else if err != nil {
			return err
		}
	}
	for id := range deleted {
		if msg := m.byID[id]; msg != nil {
			msg.gone = true
		}
	}
	if created && !resync {
		if err := m.addNew(w); errors.Is(err, errStoreFailed) {
			m.retry(func() { m.created = true })
		} else if err != nil {
			return err
		}
	}
	if err := m.refresh(w, updated); err != nil {
		return err
	}
	if allowExpunge {
		return m.expungeGone(w.WriteExpunge)
	}
	return nil
}

// errStoreFailed marks a store call of a poll that failed.
var errStoreFailed = errors.New("the store call failed")

// retry notes a change to tell again at the next poll.
func (m *mailbox) retry(note func()) {
	m.mu.Lock()
	note()
	m.mu.Unlock()
}

// refresh reads the read state of the messages of ids that changed and
// tells the client those that differ from what it was told. The state is
// read rather than taken from the events, whose values may be older than
// the session's own STORE or FETCH (their events come after it). A read
// that fails is tried again at the next poll.
func (m *mailbox) refresh(w *imapserver.UpdateWriter, ids map[string]bool) error {
	for id := range ids {
		msg := m.byID[id]
		if msg == nil || msg.gone {
			continue
		}
		ctx, cancel := m.s.call()
		e, err := m.s.srv.store.GetEmail(ctx, m.s.account.ID, id)
		cancel()
		switch {
		case store.IsCode(err, store.NotFound):
			msg.gone = true
			continue
		case err != nil:
			m.mu.Lock()
			m.updated[id] = true
			m.mu.Unlock()
			continue
		case e.Read == msg.read:
			continue
		}
		msg.read = e.Read
		if err := w.WriteMessageFlags(m.seq(msg), imap.UID(msg.uid), msg.flags()); err != nil {
			return err
		}
	}
	return nil
}

// addNew appends the emails numbered after the view's last UID, up to
// the session's bound, and tells the client how many messages there are.
func (m *mailbox) addNew(w *imapserver.UpdateWriter) error {
	srv := m.s.srv
	before := len(m.msgs)
	for len(m.msgs) < 2*srv.cfg.MaxMessages {
		after := uint32(0)
		if len(m.msgs) > 0 {
			after = m.msgs[len(m.msgs)-1].uid
		}
		ctx, cancel := m.s.call()
		limit := min(store.MaxUIDPage, 2*srv.cfg.MaxMessages-len(m.msgs))
		p, err := srv.store.MailboxUIDs(ctx, store.UIDQuery{AccountID: m.s.account.ID, After: after, Limit: limit})
		cancel()
		if err != nil {
			srv.log.Warn("imap: reading new mail failed; told at the next command", "err", err)
			return errStoreFailed
		}
		m.uidNext = max(m.uidNext, p.UIDNext)
		for _, u := range p.Emails {
			msg := &message{uid: u.UID, id: u.ID}
			m.msgs = append(m.msgs, msg)
			m.byID[u.ID] = msg
		}
		if len(p.Emails) < limit {
			break
		}
	}
	if len(m.msgs) > before {
		return w.WriteNumMessages(uint32(len(m.msgs)))
	}
	return nil
}

// reread reads the mailbox again after events were missed: messages no
// longer there are gone, new ones are added, read states are refreshed.
func (m *mailbox) reread(w *imapserver.UpdateWriter) error {
	_, next, uids, err := m.newest()
	if err != nil {
		return errStoreFailed
	}
	read, err := m.readIDs()
	if err != nil {
		return errStoreFailed
	}
	now := make(map[string]bool, len(uids))
	for _, u := range uids {
		now[u.ID] = true
	}
	for _, msg := range m.msgs {
		if !now[msg.id] {
			msg.gone = true
		} else if msg.read != read[msg.id] && !msg.gone {
			msg.read = read[msg.id]
			if err := w.WriteMessageFlags(m.seq(msg), imap.UID(msg.uid), msg.flags()); err != nil {
				return err
			}
		}
	}
	last := uint32(0)
	if len(m.msgs) > 0 {
		last = m.msgs[len(m.msgs)-1].uid
	}
	n := len(m.msgs)
	for _, u := range uids {
		if u.UID > last && len(m.msgs) < 2*m.s.srv.cfg.MaxMessages {
			msg := &message{uid: u.UID, id: u.ID, read: read[u.ID]}
			m.msgs = append(m.msgs, msg)
			m.byID[u.ID] = msg
		}
	}
	m.uidNext = max(m.uidNext, next)
	if len(m.msgs) > n {
		return w.WriteNumMessages(uint32(len(m.msgs)))
	}
	return nil
}

// expungeGone removes the messages deleted in the store from the view,
// telling the client each one's sequence number, highest first so that
// the numbers told stay right.
func (m *mailbox) expungeGone(write func(seq uint32) error) error {
	for i := len(m.msgs) - 1; i >= 0; i-- {
		if msg := m.msgs[i]; msg.gone {
			m.remove(i)
			if err := write(uint32(i + 1)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *mailbox) remove(i int) {
	delete(m.byID, m.msgs[i].id)
	m.msgs = slices.Delete(m.msgs, i, i+1)
}

// expunge deletes the messages marked \Deleted (among uids, when given)
// from the store, and from the view.
func (m *mailbox) expunge(w *imapserver.ExpungeWriter, uids *imap.UIDSet) error {
	if uids != nil && imap.IsSearchRes(*uids) {
		return errSearchRes
	}
	if m.readOnly {
		return nil // CLOSE after EXAMINE deletes nothing
	}
	srv := m.s.srv
	for i := len(m.msgs) - 1; i >= 0; i-- {
		msg := m.msgs[i]
		if !msg.deleted || msg.gone || uids != nil && !uids.Contains(imap.UID(msg.uid)) {
			continue
		}
		ctx, cancel := m.s.call()
		err := srv.store.DeleteEmail(ctx, m.s.account.ID, msg.id)
		cancel()
		if err != nil && !store.IsCode(err, store.NotFound) {
			return srv.storeError(err)
		}
		m.remove(i)
		if err := w.WriteExpunge(uint32(i + 1)); err != nil {
			return err
		}
	}
	return nil
}

var (
	errSeqRange = &imap.Error{Type: imap.StatusResponseTypeBad, Code: imap.ResponseCodeClientBug,
		Text: "A message sequence number is past the last message"}
	// errSearchRes refuses "$": without SEARCHRES, which the door does not
	// announce, it is not in the grammar. imapserver hands it on as an
	// empty set (imap.SearchRes), which would otherwise name no message
	// and answer OK having done nothing.
	errSearchRes = &imap.Error{Type: imap.StatusResponseTypeBad, Code: imap.ResponseCodeClientBug,
		Text: "$ (SEARCHRES) is not supported"}
)

// resolve returns the indexes in msgs of the messages numSet names,
// ascending. A sequence number past the last message is an error (RFC
// 3501, 6.4.8 and section 9; RFC 9051 keeps the rule), and so is "$"; a
// UID no message has is not.
func (m *mailbox) resolve(numSet imap.NumSet) ([]int, error) {
	if imap.IsSearchRes(numSet) {
		return nil, errSearchRes
	}
	picked := make([]bool, len(m.msgs))
	switch set := numSet.(type) {
	case imap.SeqSet:
		last := uint32(len(m.msgs))
		for _, r := range set {
			start, stop := r.Start, r.Stop
			if start == 0 {
				start = last
			}
			if stop == 0 {
				stop = last
			}
			if start > stop {
				start, stop = stop, start
			}
			if stop > last || start == 0 {
				if last == 0 && (r.Start == 0 || r.Stop == 0) {
					continue // "*" of an empty mailbox
				}
				return nil, errSeqRange
			}
			for i := start; i <= stop; i++ {
				picked[i-1] = true
			}
		}
	case imap.UIDSet:
		last := uint32(0)
		if len(m.msgs) > 0 {
			last = m.msgs[len(m.msgs)-1].uid
		}
		for _, r := range set {
			start, stop := uint32(r.Start), uint32(r.Stop)
			if start == 0 {
				start = last
			}
			if stop == 0 {
				stop = last
			}
			if start > stop {
				start, stop = stop, start
			}
			i := sort.Search(len(m.msgs), func(i int) bool { return m.msgs[i].uid >= start })
			for ; i < len(m.msgs) && m.msgs[i].uid <= stop; i++ {
				picked[i] = true
			}
		}
	}
	var out []int
	for i, ok := range picked {
		if ok {
			out = append(out, i)
		}
	}
	return out, nil
}

// store changes flags: \Seen is the email's read state, \Deleted the
// session's mark for EXPUNGE; other flags are not kept.
func (m *mailbox) store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags) error {
	if m.readOnly {
		return errReadOnly
	}
	idxs, err := m.resolve(numSet)
	if err != nil {
		return err
	}
	_, byUID := numSet.(imap.UIDSet)
	seen, del := hasFlag(flags.Flags, imap.FlagSeen), hasFlag(flags.Flags, imap.FlagDeleted)
	srv := m.s.srv
	expunged := false
	for _, i := range idxs {
		msg := m.msgs[i]
		if msg.gone {
			expunged = true
			continue
		}
		read, deleted := msg.read, msg.deleted
		switch flags.Op {
		case imap.StoreFlagsSet:
			read, deleted = seen, del
		case imap.StoreFlagsAdd:
			read, deleted = read || seen, deleted || del
		case imap.StoreFlagsDel:
			read, deleted = read && !seen, deleted && !del
		}
		if read != msg.read {
			ctx, cancel := m.s.call()
			_, err := srv.store.UpdateEmail(ctx, m.s.account.ID, msg.id, store.Update{Read: &read, UpdatedAt: srv.now().UTC()})
			cancel()
			if store.IsCode(err, store.NotFound) {
				msg.gone, expunged = true, true
				continue
			}
			if err != nil {
				return srv.storeError(err)
			}
			msg.read = read
		}
		msg.deleted = deleted
		if !flags.Silent {
			rw := w.CreateMessage(uint32(i + 1))
			if byUID {
				rw.WriteUID(imap.UID(msg.uid))
			}
			rw.WriteFlags(msg.flags())
			if err := rw.Close(); err != nil {
				return err
			}
		}
	}
	if expunged {
		return errExpungeIssued
	}
	return nil
}

func hasFlag(flags []imap.Flag, f imap.Flag) bool {
	for _, g := range flags {
		if strings.EqualFold(string(g), string(f)) {
			return true
		}
	}
	return false
}
