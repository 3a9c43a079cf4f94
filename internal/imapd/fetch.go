package imapd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-message/textproto"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/mailaccess"
	"github.com/mailsink/mailsink/store"
)

// parseCost is what a FETCH that parses a message (BODYSTRUCTURE, a part
// of the body) takes of the read budget beside the raw source, per byte
// served: imapserver's extraction copies the parts it reads.
const parseCost = 4

// Bounds of the MIME structure imapserver is asked to take apart: it copies
// the body of each message/rfc822 part it meets, so a message nesting many
// of them would cost its size over and over. A message past them is served
// whole (BODY[], RFC822.SIZE, ENVELOPE) but not taken apart.
const (
	maxStructureParts  = 200
	maxEmbeddedMessage = 8
)

var errTooComplex = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeLimit,
	Text: "The message has too many MIME parts to take apart: fetch it whole (BODY.PEEK[])"}

// fetch answers FETCH: each message's items, its content read through the
// read budget. A message deleted meanwhile is left out, and the answer is
// then NO [EXPUNGEISSUED] after the others.
func (m *mailbox) fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	idxs, err := m.resolve(numSet)
	if err != nil {
		return err
	}
	markSeen := false
	for _, bs := range options.BodySection {
		markSeen = markSeen || !bs.Peek
	}
	for _, bs := range options.BinarySection {
		markSeen = markSeen || !bs.Peek
	}
	markSeen = markSeen && !m.readOnly
	expunged := false
	for _, i := range idxs {
		if err := m.s.ctx.Err(); err != nil {
			return m.s.srv.storeError(err)
		}
		msg := m.msgs[i]
		if msg.gone {
			expunged = true
			continue
		}
		ok, err := m.fetchOne(w, uint32(i+1), msg, options, markSeen)
		if err != nil {
			return err
		}
		expunged = expunged || !ok
	}
	if expunged {
		return errExpungeIssued
	}
	return nil
}

// needsContent reports whether options ask for more than the UID and flags.
func needsContent(o *imap.FetchOptions) bool {
	return o.InternalDate || o.RFC822Size || o.Envelope || o.BodyStructure != nil || len(o.BodySection) > 0 ||
		len(o.BinarySection) > 0 || len(o.BinarySectionSize) > 0
}

// needsParse reports whether options ask for the message taken apart.
func needsParse(o *imap.FetchOptions) bool {
	if o.BodyStructure != nil || len(o.BinarySection) > 0 || len(o.BinarySectionSize) > 0 {
		return true
	}
	for _, bs := range o.BodySection {
		if !wholeMessage(bs) {
			return true
		}
	}
	return false
}

// wholeMessage reports whether bs is BODY[] (or RFC822): the source as
// served, not taken apart.
func wholeMessage(bs *imap.FetchItemBodySection) bool {
	return bs.Specifier == imap.PartSpecifierNone && len(bs.Part) == 0 && len(bs.HeaderFields) == 0 && len(bs.HeaderFieldsNot) == 0
}

// fetchOne writes one message's FETCH response; it reports false when the
// message was deleted meanwhile (nothing is written then).
func (m *mailbox) fetchOne(w *imapserver.FetchWriter, seq uint32, msg *message, options *imap.FetchOptions, markSeen bool) (bool, error) {
	srv := m.s.srv
	ctx, cancel := m.s.call()
	defer cancel()
	var (
		email  *store.Email
		served []byte
	)
	if needsContent(options) {
		onlyDate := !options.RFC822Size && !options.Envelope && options.BodyStructure == nil && len(options.BodySection) == 0 &&
			len(options.BinarySection) == 0 && len(options.BinarySectionSize) == 0
		if onlyDate {
			e, err := srv.store.GetEmail(ctx, m.s.account.ID, msg.id)
			if store.IsCode(err, store.NotFound) {
				msg.gone = true
				return false, nil
			}
			if err != nil {
				return false, srv.storeError(err)
			}
			email = e
		} else {
			read, err := srv.reads.Raw(ctx, m.s.account.ID, msg.id)
			if store.IsCode(err, store.NotFound) {
				msg.gone = true
				return false, nil
			}
			if err != nil {
				return false, srv.storeError(err)
			}
			defer read.Close()
			email = read.Email
			if served, err = serve(ctx, read, needsParse(options)); err != nil {
				if errors.Is(err, errTooComplex) {
					return false, err
				}
				return false, srv.storeError(err)
			}
		}
	}
	if markSeen && !msg.read {
		read := true
		_, err := srv.store.UpdateEmail(ctx, m.s.account.ID, msg.id, store.Update{Read: &read, UpdatedAt: srv.now().UTC()})
		if store.IsCode(err, store.NotFound) {
			msg.gone = true
			return false, nil
		}
		if err != nil {
			return false, srv.storeError(err)
		}
		msg.read = true
		options = withFlags(options)
	}

	rw := w.CreateMessage(seq)
	if options.UID {
		rw.WriteUID(imap.UID(msg.uid))
	}
	if options.Flags {
		rw.WriteFlags(msg.flags())
	}
	if options.InternalDate {
		rw.WriteInternalDate(email.ReceivedAt)
	}
	if options.RFC822Size {
		rw.WriteRFC822Size(int64(len(served)))
	}
	if options.Envelope {
		h, _ := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(served)))
		rw.WriteEnvelope(imapserver.ExtractEnvelope(h))
	}
	if options.BodyStructure != nil {
		bs := imapserver.ExtractBodyStructure(bytes.NewReader(served))
		fillEmptyMultiparts(bs)
		rw.WriteBodyStructure(bs)
	}
	for _, bs := range options.BodySection {
		var data []byte
		if wholeMessage(bs) {
			data = partial(served, bs.Partial)
		} else {
			data = imapserver.ExtractBodySection(bytes.NewReader(served), bs)
		}
		if err := writeLiteral(rw.WriteBodySection(bs, int64(len(data))), data); err != nil {
			return false, err
		}
	}
	for _, bs := range options.BinarySection {
		data := imapserver.ExtractBinarySection(bytes.NewReader(served), bs)
		if err := writeLiteral(rw.WriteBinarySection(bs, int64(len(data))), data); err != nil {
			return false, err
		}
	}
	for _, bss := range options.BinarySectionSize {
		rw.WriteBinarySectionSize(bss, imapserver.ExtractBinarySectionSize(bytes.NewReader(served), bss))
	}
	return true, rw.Close()
}

// serve returns the raw source of read as served, with CRLF line ends,
// taking room in the read budget for a copy and for a parse when it is to
// be taken apart.
func serve(ctx context.Context, read *bodies.Read, parse bool) ([]byte, error) {
	raw := read.Body.Raw
	size := mailaccess.CRLFSize(raw)
	extra := int64(0)
	if size != int64(len(raw)) {
		extra += size
	}
	if parse {
		if !simpleStructure(raw) {
			return nil, errTooComplex
		}
		extra += parseCost * size
	}
	if extra > 0 {
		if err := read.Grow(ctx, extra); err != nil {
			return nil, err
		}
	}
	return mailaccess.CRLF(raw), nil
}

// simpleStructure reports whether raw is within the structure bounds:
// Content-Type fields and message/ types counted at line starts, a bound
// on what imapserver would meet.
func simpleStructure(raw []byte) bool {
	parts, embedded := 0, 0
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) < len("content-type:") || !bytes.EqualFold(line[:len("content-type:")], []byte("content-type:")) {
			continue
		}
		parts++
		if bytes.Contains(bytes.ToLower(line), []byte("message/")) {
			embedded++
		}
		if parts > maxStructureParts || embedded > maxEmbeddedMessage {
			return false
		}
	}
	return true
}

// fillEmptyMultiparts gives each multipart of bs that has no parts (its
// boundary is missing, cannot be parsed, or never met) one empty
// text/plain part, as Dovecot answers: IMAP's grammar needs at least one,
// and imapserver panics, dropping the connection, writing one without.
// A Content-Type whose parameters do not parse comes with them in its
// subtype: it is cut back to the subtype.
func fillEmptyMultiparts(bs imap.BodyStructure) {
	switch bs := bs.(type) {
	case *imap.BodyStructureMultiPart:
		if sub, _, ok := strings.Cut(bs.Subtype, ";"); ok {
			bs.Subtype = strings.ToLower(strings.TrimSpace(sub))
		}
		if len(bs.Children) == 0 {
			bs.Children = []imap.BodyStructure{&imap.BodyStructureSinglePart{
				Type: "text", Subtype: "plain", Params: map[string]string{"charset": "us-ascii"}, Encoding: "7bit",
				Text: &imap.BodyStructureText{}, Extended: &imap.BodyStructureSinglePartExt{},
			}}
		}
		for _, child := range bs.Children {
			fillEmptyMultiparts(child)
		}
	case *imap.BodyStructureSinglePart:
		if bs.MessageRFC822 != nil {
			fillEmptyMultiparts(bs.MessageRFC822.BodyStructure)
		}
	}
}

// partial returns the part of data a <offset.size> suffix asks for.
func partial(data []byte, p *imap.SectionPartial) []byte {
	if p == nil {
		return data
	}
	if p.Offset >= int64(len(data)) {
		return nil
	}
	data = data[p.Offset:]
	if p.Size < int64(len(data)) {
		data = data[:p.Size]
	}
	return data
}

func writeLiteral(w io.WriteCloser, data []byte) error {
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// withFlags returns options asking for FLAGS too: a FETCH that sets \Seen
// tells the new flags.
func withFlags(o *imap.FetchOptions) *imap.FetchOptions {
	if o.Flags {
		return o
	}
	c := *o
	c.Flags = true
	return &c
}
