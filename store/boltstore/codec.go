package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/mailsink/mailsink/store"
)

// Records are a small hand-rolled binary encoding rather than JSON: listing
// decodes one record per returned email, and a 25 MiB raw body would triple in
// size as a JSON string. Every record starts with a format version byte so that
// a later release can read what an earlier one wrote.
const (
	emailFormat byte = 1
	// bodyFormat 2 added the SMTP transcript (JSON, empty for none)
	// before the raw source; format 1 bodies are still read.
	bodyFormat    byte = 2
	bodyFormatOne byte = 1
	// bodyFormatUnparsed is format 2 for a body whose Raw was not parsed
	// (store.Body.Unparsed).
	bodyFormatUnparsed byte = 3
)

// errCorrupt is the cause of every decoding failure: the file holds bytes this
// package did not write, which is an Internal error, never a client's.
var errCorrupt = errors.New("corrupt record")

type encoder struct{ b []byte }

func (e *encoder) byte(c byte)      { e.b = append(e.b, c) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) time(t time.Time) { e.varint(t.UnixMilli()) }
func (e *encoder) optStr(p *string) {
	if p == nil {
		e.byte(0)
		return
	}
	e.byte(1)
	e.str(*p)
}

// decoder reads what encoder wrote. The first failure sticks in err and makes
// every later read return a zero value, so callers check err once at the end.
type decoder struct {
	b   []byte
	err error
	// s, when not empty, holds the same bytes as the whole record b was
	// at the start, and str returns substrings of it instead of copies:
	// one allocation per record rather than one per string.
	s string
}

func (d *decoder) fail() { d.err, d.b = errCorrupt, nil }

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// view returns the next length-prefixed byte string without copying it: the
// result is only valid as long as the transaction that read it.
func (d *decoder) view() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string {
	p := d.view()
	if d.s == "" || len(p) == 0 {
		return string(p)
	}
	end := len(d.s) - len(d.b)
	return d.s[end-len(p) : end]
}

func (d *decoder) time() time.Time { return time.UnixMilli(d.varint()).UTC() }

// count reads a number of items that follow, each at least one byte long, so a
// corrupt count cannot make the caller allocate more than the record holds.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) optStr() *string {
	switch d.byte() {
	case 0:
		return nil
	case 1:
		s := d.str()
		return &s
	}
	d.fail()
	return nil
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail()
	}
	return d.err
}

// emailRecord is the stored metadata of an email: the domain fields and the
// key of the body it shares.
type emailRecord struct {
	store.Email
	BodyID uint64
}

func encodeEmail(r *emailRecord) []byte {
	e := encoder{b: make([]byte, 0, 160+len(r.Sender)+len(r.Recipient))}
	e.byte(emailFormat)
	e.uvarint(r.BodyID)
	e.str(r.ID)
	e.str(r.AccountID)
	e.optStr(r.MessageID)
	e.str(r.Sender)
	e.str(r.Recipient)
	e.optStr(r.Subject)
	e.str(string(r.Status))
	e.optStr(r.Notes)
	e.uvarint(uint64(len(r.Labels)))
	for _, l := range r.Labels {
		e.str(l)
	}
	e.varint(r.RawSize)
	e.time(r.ReceivedAt)
	e.time(r.CreatedAt)
	e.time(r.UpdatedAt)
	return e.b
}

// decodeEmail returns a record that shares no memory with b: its strings
// are substrings of one copy of b.
func decodeEmail(b []byte) (*emailRecord, error) {
	d := decoder{b: b, s: string(b)}
	if d.byte() != emailFormat {
		return nil, errCorrupt
	}
	r := &emailRecord{}
	r.BodyID = d.uvarint()
	r.ID = d.str()
	r.AccountID = d.str()
	r.MessageID = d.optStr()
	r.Sender = d.str()
	r.Recipient = d.str()
	r.Subject = d.optStr()
	r.Status = store.Status(d.str())
	r.Notes = d.optStr()
	r.Labels = make([]string, d.count())
	for i := range r.Labels {
		r.Labels[i] = d.str()
	}
	r.RawSize = d.varint()
	r.ReceivedAt = d.time()
	r.CreatedAt = d.time()
	r.UpdatedAt = d.time()
	if err := d.done(); err != nil {
		return nil, err
	}
	return r, nil
}

// encodeBody puts the raw source last so that its length is the only part of
// the record that grows with the message.
func encodeBody(b *store.Body) []byte {
	size := 64 + len(b.Raw) + 512
	if b.Text != nil {
		size += len(*b.Text)
	}
	if b.HTML != nil {
		size += len(*b.HTML)
	}
	for k, v := range b.Headers {
		size += len(k) + len(v) + 4
	}
	e := encoder{b: make([]byte, 0, size)}
	if b.Unparsed {
		e.byte(bodyFormatUnparsed)
	} else {
		e.byte(bodyFormat)
	}
	e.optStr(b.Text)
	e.optStr(b.HTML)
	e.uvarint(uint64(len(b.Headers)))
	for k, v := range b.Headers {
		e.str(k)
		e.str(v)
	}
	e.uvarint(uint64(len(b.Attachments)))
	for _, a := range b.Attachments {
		e.optStr(a.ContentID)
		e.optStr(a.ContentType)
		e.optStr(a.Disposition)
		e.optStr(a.Filename)
		e.varint(a.Size)
	}
	var transcript []byte
	if b.Transcript != nil {
		// A Transcript is plain strings and slices: it always marshals.
		transcript, _ = json.Marshal(b.Transcript)
	}
	e.bytes(transcript)
	e.bytes(b.Raw)
	return e.b
}

// decodeBody returns a body that shares no memory with b. Headers and
// Attachments are never nil.
func decodeBody(b []byte) (*store.Body, error) {
	d := decoder{b: b}
	format := d.byte()
	if format != bodyFormat && format != bodyFormatOne && format != bodyFormatUnparsed {
		return nil, errCorrupt
	}
	body := &store.Body{Unparsed: format == bodyFormatUnparsed}
	body.Text = d.optStr()
	body.HTML = d.optStr()
	n := d.count()
	body.Headers = make(map[string]string, n)
	for range n {
		k := d.str()
		body.Headers[k] = d.str()
	}
	body.Attachments = make([]store.Attachment, d.count())
	for i := range body.Attachments {
		a := &body.Attachments[i]
		a.ContentID = d.optStr()
		a.ContentType = d.optStr()
		a.Disposition = d.optStr()
		a.Filename = d.optStr()
		a.Size = d.varint()
	}
	if format != bodyFormatOne {
		if t := d.view(); len(t) > 0 && d.err == nil {
			body.Transcript = &store.Transcript{}
			if err := json.Unmarshal(t, body.Transcript); err != nil {
				return nil, errCorrupt
			}
		}
	}
	body.Raw = append([]byte{}, d.view()...)
	if err := d.done(); err != nil {
		return nil, err
	}
	return body, nil
}
