package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// Records are a small binary encoding rather than JSON: listing decodes one
// record per returned email, and a 25 MiB raw body would triple in size as
// a JSON string. Every record starts with a format byte, so that a later
// version can add fields (a new format) and still read what this one wrote.
const (
	// emailFormat: the body's id (empty when it is the email's own id),
	// then the fields of store.Email but the id and account, which the key
	// holds; CreatedAt and UpdatedAt as offsets from ReceivedAt; then, for
	// a read email, a flags byte (emailRead).
	emailFormat byte = 1
	// bodyFormat: a flags byte (bodyUnparsed, bodyCompressed), the given
	// parts only for a parsed body, the transcript, then the raw source,
	// last so that its length is the only part of the record that grows
	// with the message; a compressed raw source is its size then its
	// internal/rawzip frame.
	bodyFormat byte = 1
)

// Flags of a body record.
const (
	bodyUnparsed   byte = 1 << 0
	bodyCompressed byte = 1 << 1
)

// errCorrupt is the cause of every decoding failure: the store holds bytes
// this package did not write, which is an Internal error, never a client's.
var errCorrupt = errors.New("corrupt record")

type encoder struct{ b []byte }

func (e *encoder) byte(c byte)      { e.b = append(e.b, c) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
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

// view returns the next length-prefixed byte string without copying it.
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

// maxPrealloc bounds the room made ahead for the items of a count: an item
// decodes into a struct many times the one byte count allows for it, so a
// corrupt count in a 25 MiB body would otherwise allocate gigabytes before
// the first item fails. Lists longer than this grow as their items decode.
const maxPrealloc = 64

func prealloc(n int) int { return min(n, maxPrealloc) }

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

// optStrIn is optStr that keeps the string in *dst rather than in a new
// allocation.
func (d *decoder) optStrIn(dst *string) *string {
	switch d.byte() {
	case 0:
		return nil
	case 1:
		*dst = d.str()
		return dst
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
// id of the body it shares.
type emailRecord struct {
	store.Email
	BodyID string
	// opt holds the optional strings a decoded record points to (message
	// id, subject, notes), so that decoding allocates them with the record.
	opt [3]string
}

func encodeEmail(r *emailRecord) []byte {
	e := encoder{b: make([]byte, 0, 96+len(r.Sender)+len(r.Recipient))}
	e.byte(emailFormat)
	if r.BodyID == r.ID {
		e.str("")
	} else {
		e.str(r.BodyID)
	}
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
	received := r.ReceivedAt.UnixMilli()
	e.varint(received)
	e.varint(r.CreatedAt.UnixMilli() - received)
	e.varint(r.UpdatedAt.UnixMilli() - received)
	if r.Read {
		// A record without the flags byte is unread.
		e.byte(emailRead)
	}
	return e.b
}

// emailRead is the flag of a read email, in the flags byte that may end an
// email record.
const emailRead byte = 1 << 0

// decodeEmail decodes the record v stored under the email key k. The
// record shares no memory with k or v.
func decodeEmail(k, v []byte) (*emailRecord, error) {
	r := &emailRecord{}
	if err := decodeEmailInto(r, k, v); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeEmailInto is decodeEmail into r, which must be zero: a page of
// emails is decoded into one slice of records.
func decodeEmailInto(r *emailRecord, k, v []byte) error {
	accountID, id, ok := accountOf(k)
	if !ok || len(k) == 0 || k[len(k)-len(id)-1] != partEmail {
		return errCorrupt
	}
	// One allocation for the strings of key and record.
	var sb strings.Builder
	sb.Grow(len(accountID) + len(id) + len(v))
	sb.Write(accountID)
	sb.Write(id)
	sb.Write(v)
	s := sb.String()
	r.AccountID = s[:len(accountID)]
	r.ID = s[len(accountID) : len(accountID)+len(id)]
	d := decoder{b: v, s: s[len(accountID)+len(id):]}
	if d.byte() != emailFormat {
		return errCorrupt
	}
	if r.BodyID = d.str(); r.BodyID == "" {
		r.BodyID = r.ID
	}
	r.MessageID = d.optStrIn(&r.opt[0])
	r.Sender = d.str()
	r.Recipient = d.str()
	r.Subject = d.optStrIn(&r.opt[1])
	r.Status = store.Status(d.str())
	r.Notes = d.optStrIn(&r.opt[2])
	r.Labels = make([]string, d.count())
	for i := range r.Labels {
		r.Labels[i] = d.str()
	}
	r.RawSize = d.varint()
	received := d.varint()
	r.ReceivedAt = time.UnixMilli(received).UTC()
	r.CreatedAt = time.UnixMilli(received + d.varint()).UTC()
	r.UpdatedAt = time.UnixMilli(received + d.varint()).UTC()
	if d.err == nil && len(d.b) > 0 {
		flags := d.byte()
		if flags&^emailRead != 0 {
			return errCorrupt
		}
		r.Read = flags&emailRead != 0
	}
	return d.done()
}

// encodeBody returns b as a body record, compressing the raw source with z
// when internal/rawzip finds that it pays.
func encodeBody(z *rawzip.Compressor, b *store.Body) []byte {
	frame, compressed := z.Compress(b.Raw)
	defer z.Release(frame)
	size := 64 + 512
	var flags byte
	if b.Given == nil {
		flags |= bodyUnparsed
	} else {
		size += partsSize(b.Given)
	}
	if compressed {
		flags |= bodyCompressed
	}
	e := encoder{b: make([]byte, 0, size)}
	e.byte(bodyFormat)
	e.byte(flags)
	if b.Given != nil {
		encodeParts(&e, b.Given)
	}
	encodeTranscript(&e, b.Transcript)
	payload := b.Raw
	if compressed {
		e.uvarint(uint64(len(b.Raw)))
		payload = frame
	}
	e.uvarint(uint64(len(payload)))
	// One copy of the payload, into memory that is not zeroed first.
	return bytes.Join([][]byte{e.b, payload}, nil)
}

func partsSize(b *store.Parts) int {
	n := 0
	if b.Text != nil {
		n += len(*b.Text)
	}
	if b.HTML != nil {
		n += len(*b.HTML)
	}
	for k, v := range b.Headers {
		n += len(k) + len(v) + 4
	}
	return n
}

func encodeParts(e *encoder, b *store.Parts) {
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
}

func decodeParts(d *decoder) *store.Parts {
	body := &store.Parts{}
	body.Text = d.optStr()
	body.HTML = d.optStr()
	n := d.count()
	body.Headers = make(map[string]string, prealloc(n))
	for i := 0; i < n && d.err == nil; i++ {
		k := d.str()
		body.Headers[k] = d.str()
	}
	n = d.count()
	body.Attachments = make([]store.Attachment, 0, prealloc(n))
	for i := 0; i < n && d.err == nil; i++ {
		var a store.Attachment
		a.ContentID = d.optStr()
		a.ContentType = d.optStr()
		a.Disposition = d.optStr()
		a.Filename = d.optStr()
		a.Size = d.varint()
		body.Attachments = append(body.Attachments, a)
	}
	return body
}

// encodeTranscript writes t field by field: 0 for none, else 1 and the
// fields. A slice is its length plus one, 0 for nil, so that a decoded
// transcript equals the one stored.
func encodeTranscript(e *encoder, t *store.Transcript) {
	if t == nil {
		e.byte(0)
		return
	}
	e.byte(1)
	e.str(t.ClientAddress)
	e.str(t.Helo)
	e.str(t.TLSVersion)
	e.str(t.TLSCipher)
	e.str(t.AuthMechanism)
	e.str(t.AuthIdentity)
	encodeCommand(e, &t.Mail)
	encodeLen(e, t.Rcpts == nil, len(t.Rcpts))
	for i := range t.Rcpts {
		encodeCommand(e, &t.Rcpts[i])
	}
	e.uvarint(uint64(t.RcptsOmitted))
	e.str(t.Data)
}

func encodeLen(e *encoder, isNil bool, n int) {
	if isNil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(n) + 1)
}

// encodeCommand writes c without its AccountID, which is not stored (it
// is not in the transcript's JSON either).
func encodeCommand(e *encoder, c *store.TranscriptCommand) {
	e.str(c.Address)
	encodeLen(e, c.Params == nil, len(c.Params))
	for _, p := range c.Params {
		e.str(p)
	}
	e.str(c.Reply)
}

func decodeTranscript(d *decoder) *store.Transcript {
	switch d.byte() {
	case 0:
		return nil
	case 1:
	default:
		d.fail()
		return nil
	}
	t := &store.Transcript{}
	t.ClientAddress = d.str()
	t.Helo = d.str()
	t.TLSVersion = d.str()
	t.TLSCipher = d.str()
	t.AuthMechanism = d.str()
	t.AuthIdentity = d.str()
	decodeCommand(d, &t.Mail)
	if n, ok := decodeLen(d); ok {
		t.Rcpts = make([]store.TranscriptCommand, 0, prealloc(n))
		for i := 0; i < n && d.err == nil; i++ {
			var c store.TranscriptCommand
			decodeCommand(d, &c)
			t.Rcpts = append(t.Rcpts, c)
		}
	}
	t.RcptsOmitted = int(d.uvarint())
	t.Data = d.str()
	return t
}

// decodeLen reads what encodeLen wrote: the length, and false for nil.
func decodeLen(d *decoder) (int, bool) {
	n := d.count()
	if n == 0 {
		return 0, false
	}
	return n - 1, true
}

func decodeCommand(d *decoder, c *store.TranscriptCommand) {
	c.Address = d.str()
	if n, ok := decodeLen(d); ok {
		c.Params = make([]string, 0, prealloc(n))
		for i := 0; i < n && d.err == nil; i++ {
			c.Params = append(c.Params, d.str())
		}
	}
	c.Reply = d.str()
}

// decodeBody returns the body record b as a store.Body that shares no
// memory with b. Given's Headers and Attachments are never nil.
func decodeBody(b []byte) (*store.Body, error) {
	d := decoder{b: b}
	if d.byte() != bodyFormat {
		return nil, errCorrupt
	}
	flags := d.byte()
	if flags&^(bodyUnparsed|bodyCompressed) != 0 {
		return nil, errCorrupt
	}
	body := &store.Body{}
	if flags&bodyUnparsed == 0 {
		body.Given = decodeParts(&d)
	}
	body.Transcript = decodeTranscript(&d)
	if flags&bodyCompressed != 0 {
		size := d.uvarint()
		frame := d.view()
		if d.err != nil || size > rawzip.MaxSize {
			return nil, errCorrupt
		}
		raw, err := rawzip.Decompress(frame, int(size))
		if err != nil {
			return nil, errCorrupt
		}
		body.Raw = raw
	} else {
		body.Raw = append([]byte{}, d.view()...)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return body, nil
}
