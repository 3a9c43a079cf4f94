package boltv4

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// Records are a small hand-rolled binary encoding rather than JSON: listing
// decodes one record per returned email, and a 25 MiB raw body would triple in
// size as a JSON string. Every record starts with a format version byte so that
// a later release can read what an earlier one wrote.
const (
	// emailFormatOne held the id and account, which format 2 takes from
	// the record's key, and all three times in full; format 2 keeps
	// CreatedAt and UpdatedAt as offsets from ReceivedAt. Format 1
	// records are still read.
	emailFormatOne byte = 1
	emailFormat    byte = 2
	// bodyFormat 2 added the SMTP transcript (JSON, empty for none)
	// before the raw source; format 1 bodies are still read.
	bodyFormat2   byte = 2
	bodyFormatOne byte = 1
	// bodyFormatUnparsed is format 2 for a body whose parts are read from
	// its Raw (store.Body.Given nil).
	bodyFormatUnparsed byte = 3
	// bodyFormat 4, written since schema version 3, starts with a flags
	// byte (bodyUnparsed, bodyCompressed); the parsed fields follow only
	// for a parsed body, the transcript is binary (encodeTranscript), and
	// a compressed raw source is its size then its internal/rawzip frame.
	bodyFormat byte = 4
)

// Flags of a format 4 body.
const (
	bodyUnparsed   byte = 1 << 0
	bodyCompressed byte = 1 << 1
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

// maxPrealloc bounds the room made ahead for the items of a count: an item
// decodes into a struct many times the one byte count allows for it (72
// bytes for a RCPT command), so a corrupt count in a 25 MiB body would
// otherwise allocate gigabytes before the first item fails. Lists longer
// than this grow as their items decode.
const maxPrealloc = 64

// prealloc is the room to make for n items (count).
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
// key of the body it shares.
type emailRecord struct {
	store.Email
	BodyID uint64
	// opt holds the optional strings a decoded record points to (message
	// id, subject, notes), so that decoding allocates them with the record.
	opt [3]string
}

func encodeEmail(r *emailRecord) []byte {
	e := encoder{b: make([]byte, 0, 96+len(r.Sender)+len(r.Recipient))}
	e.byte(emailFormat)
	e.uvarint(r.BodyID)
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
		// Flags after the times: a record without them (every one
		// written before read state) is unread.
		e.byte(emailRead)
	}
	return e.b
}

// emailRead is the flag of a read email, in the flags byte that may end a
// format 2 record.
const emailRead byte = 1 << 0

// decodeEmail decodes the record v stored under the email key k. The
// record shares no memory with k or v: its strings are substrings of one
// copy of both.
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
	if len(v) > 0 && v[0] == emailFormatOne {
		return decodeEmailOne(r, v)
	}
	n, size := binary.Uvarint(k)
	if size <= 0 || n > uint64(len(k)-size) {
		return errCorrupt
	}
	// One allocation: string(k) + string(v) converts each operand longer
	// than 32 bytes into a string of its own first.
	var sb strings.Builder
	sb.Grow(len(k) + len(v))
	sb.Write(k)
	sb.Write(v)
	s := sb.String()
	d := decoder{b: v, s: s}
	if d.byte() != emailFormat {
		return errCorrupt
	}
	r.AccountID = s[size : size+int(n)]
	r.ID = s[size+int(n) : len(k)]
	r.BodyID = d.uvarint()
	decodeEmailFields(&d, r)
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

// decodeEmailFields decodes the fields that email formats 1 and 2 hold
// alike, from the message id to the raw size.
func decodeEmailFields(d *decoder, r *emailRecord) {
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
}

// decodeEmailOne decodes a format 1 record, which holds its id and account.
func decodeEmailOne(r *emailRecord, b []byte) error {
	d := decoder{b: b, s: string(b)}
	if d.byte() != emailFormatOne {
		return errCorrupt
	}
	r.BodyID = d.uvarint()
	r.ID = d.str()
	r.AccountID = d.str()
	decodeEmailFields(&d, r)
	r.ReceivedAt = d.time()
	r.CreatedAt = d.time()
	r.UpdatedAt = d.time()
	return d.done()
}

// encodeBody returns b in body format 4, compressing with z. The raw source
// is last so that its length is the only part of the record that grows with
// the message; it is compressed when internal/rawzip finds that it pays.
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

// encodeParts writes the given parts of a body, as body formats 1 to 4
// hold them.
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
// transcript equals the one stored as its JSON did.
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

// decodeBody returns a body that shares no memory with b. Given's
// Headers and Attachments are never nil. It reads every body format from 1 to 4.
func decodeBody(b []byte) (*store.Body, error) {
	d := decoder{b: b}
	format := d.byte()
	body := &store.Body{}
	switch format {
	case bodyFormat:
		return decodeBodyFour(&d)
	case bodyFormatOne, bodyFormat2, bodyFormatUnparsed:
	default:
		return nil, errCorrupt
	}
	if parts := decodeParts(&d); format != bodyFormatUnparsed {
		body.Given = parts
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

func decodeBodyFour(d *decoder) (*store.Body, error) {
	flags := d.byte()
	if flags&^(bodyUnparsed|bodyCompressed) != 0 {
		return nil, errCorrupt
	}
	body := &store.Body{}
	if flags&bodyUnparsed == 0 {
		body.Given = decodeParts(d)
	}
	body.Transcript = decodeTranscript(d)
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
