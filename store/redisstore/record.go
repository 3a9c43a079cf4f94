package redisstore

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// An email's metadata key is a hash. What never changes after receipt is
// one compact JSON value under "m" (fixed); each field an update may change
// has its own hash field, so that the update script can set it without
// decoding or re-encoding JSON and without a read-modify-write race.
const (
	fieldFixed   = "m"      // fixed, JSON
	fieldStatus  = "st"     // the status, plain
	fieldSubject = "subj"   // *string, JSON
	fieldNotes   = "notes"  // *string, JSON
	fieldLabels  = "labels" // []string, JSON
	fieldUpdated = "upd"    // UpdatedAt in Unix milliseconds, decimal
	// fieldRead is "1" for a read email. It is not in fields: a record of
	// the records hash holds it after the raw size (packRecord), where
	// older releases, which read six parts, never look, and the older
	// layout's hash holds it as a field of its own.
	fieldRead = "rd"
)

// fields lists the hash fields in the order the scripts and GetEmail read
// them (HMGET) and decodeFields expects them.
var fields = []string{fieldFixed, fieldStatus, fieldSubject, fieldNotes, fieldLabels, fieldUpdated}

// fixed is the JSON form of the immutable part of an email's metadata.
// Timestamps are Unix milliseconds, the precision store.Email promises.
type fixed struct {
	// Body is the id of the body key; bodyScript reads it with cjson.
	Body string `json:"b"`
	// ID and AccountID are left out of records (storedValues): the
	// record's hash field and key name them.
	ID         string  `json:"id,omitempty"`
	AccountID  string  `json:"acc,omitempty"`
	MessageID  *string `json:"mid"`
	Sender     string  `json:"from"`
	Recipient  string  `json:"to"`
	RawSize    int64   `json:"size"`
	ReceivedAt int64   `json:"recv"`
	CreatedAt  int64   `json:"created"`
}

// record is an email's metadata as stored.
type record struct {
	fixed
	Status    store.Status
	Subject   *string
	Notes     *string
	Labels    []string
	UpdatedAt int64
	Read      bool
}

func newRecord(e *store.Email, id, bodyID string) *record {
	labels := make([]string, len(e.Labels))
	copy(labels, e.Labels)
	return &record{
		fixed: fixed{
			Body:       bodyID,
			ID:         id,
			AccountID:  e.AccountID,
			MessageID:  e.MessageID,
			Sender:     e.Sender,
			Recipient:  e.Recipient,
			RawSize:    e.RawSize,
			ReceivedAt: e.ReceivedAt.UnixMilli(),
			CreatedAt:  e.CreatedAt.UnixMilli(),
		},
		Status:    e.Status,
		Subject:   e.Subject,
		Notes:     e.Notes,
		Labels:    labels,
		UpdatedAt: e.UpdatedAt.UnixMilli(),
	}
}

func (r *record) email() *store.Email {
	e := new(store.Email)
	r.fill(e)
	return e
}

// fill sets *e to the email r holds.
func (r *record) fill(e *store.Email) {
	labels := r.Labels
	if labels == nil {
		labels = []string{}
	}
	*e = store.Email{
		ID:         r.ID,
		AccountID:  r.AccountID,
		MessageID:  r.MessageID,
		Sender:     r.Sender,
		Recipient:  r.Recipient,
		Subject:    r.Subject,
		Status:     r.Status,
		Notes:      r.Notes,
		Labels:     labels,
		RawSize:    r.RawSize,
		Read:       r.Read,
		ReceivedAt: fromMillis(r.ReceivedAt),
		CreatedAt:  fromMillis(r.CreatedAt),
		UpdatedAt:  fromMillis(r.UpdatedAt),
	}
}

// values returns the hash fields of r, in the order of fields.
func (r *record) values() []string {
	return []string{marshal(&r.fixed), string(r.Status), marshal(r.Subject), marshal(r.Notes),
		marshal(r.Labels), formatInt(r.UpdatedAt)}
}

// storedValues returns the values of r as its record in the records hash
// keeps them: vals (r.values()), with the fixed part without the id and
// the account, which the record's hash field and key name.
func (r *record) storedValues(vals []string) []string {
	f := r.fixed
	f.ID, f.AccountID = "", ""
	stored := slices.Clone(vals)
	stored[0] = marshal(&f)
	return stored
}

// marshal returns v as json.Marshal writes it. It cannot fail: what is
// stored is made of strings, integers, slices and maps with string keys.
func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// An email's record in the account's records hash (accountKeys.records) is
// its field values joined by recordSep, in the order of fields, followed by
// the raw size the email added to the account's stats ("sb" of the older
// layout) and, once the email was read or unread again, its read flag
// (fieldRead: "1" or "0"). None of the values can hold the separator: JSON as json.Marshal
// writes it escapes control characters, and the status and the integers
// are plain. The scripts split and join records with plain string
// functions, without decoding JSON.
const recordSep = "\n"

// packRecord returns the record of the email whose field values are vals
// (record.values) and whose raw size added to the stats is size.
func packRecord(vals []string, size int64) string {
	n := len(vals) + 20
	for _, v := range vals {
		n += len(v)
	}
	b := make([]byte, 0, n)
	for _, v := range vals {
		b = append(b, v...)
		b = append(b, recordSep...)
	}
	return string(strconv.AppendInt(b, size, 10))
}

// decodePacked decodes the record of email id of account accountID from
// the records hash (packRecord).
func decodePacked(v, id, accountID string) (*record, error) {
	var r record
	if err := r.decodePacked(v); err != nil {
		return nil, err
	}
	r.ID, r.AccountID = id, accountID
	return &r, nil
}

// decodePacked sets r from a record of the records hash (packRecord), all
// but the id and the account (storedValues).
func (r *record) decodePacked(v string) error {
	var parts [6]string // the values of fields; the size is not needed
	for i := range parts {
		j := strings.Index(v, recordSep)
		if j < 0 {
			return store.Errorf(store.Internal, "email record has %d parts, want %d", i+1, len(parts)+1)
		}
		parts[i], v = v[:j], v[j+len(recordSep):]
	}
	if _, read, ok := strings.Cut(v, recordSep); ok {
		r.Read = read == "1"
	}
	return r.decodeStrings(parts[:])
}

// decodeFields decodes the values of fields, as HMGET returns them.
func decodeFields(v []any) (*record, error) {
	var r record
	if err := r.decode(v); err != nil {
		return nil, err
	}
	return &r, nil
}

// decode sets r from the values of fields, as HMGET returns them, maybe
// followed by the read flag (nil when the hash has none).
func (r *record) decode(v []any) error {
	if len(v) == len(fields)+1 {
		switch v[len(fields)] {
		case nil, "0":
		case "1":
			r.Read = true
		default:
			return store.Errorf(store.Internal, "email has a read flag of %v", v[len(fields)])
		}
		v = v[:len(fields)]
	}
	if len(v) != len(fields) {
		return store.Errorf(store.Internal, "email has %d fields, want %d", len(v), len(fields))
	}
	var s [6]string
	for i, x := range v {
		str, ok := x.(string)
		if !ok {
			return store.Errorf(store.Internal, "email field %v is %T", fields[i], x)
		}
		s[i] = str
	}
	return r.decodeStrings(s[:])
}

// decodeStrings sets r from the values of fields.
func (r *record) decodeStrings(s []string) error {
	var ok bool
	if r.fixed, ok = fastFixed(s[0]); !ok {
		r.fixed = fixed{}
		if err := decodeJSON(s[0], &r.fixed); err != nil {
			return err
		}
	}
	r.Status = store.Status(s[1])
	if r.Subject, ok = fastOptString(s[2]); !ok {
		r.Subject = nil
		if err := decodeJSON(s[2], &r.Subject); err != nil {
			return err
		}
	}
	if r.Notes, ok = fastOptString(s[3]); !ok {
		r.Notes = nil
		if err := decodeJSON(s[3], &r.Notes); err != nil {
			return err
		}
	}
	if r.Labels, ok = fastStrings(s[4]); !ok {
		r.Labels = nil
		if err := decodeJSON(s[4], &r.Labels); err != nil {
			return err
		}
	}
	ms, err := strconv.ParseInt(s[5], 10, 64)
	if err != nil {
		return store.Wrap(store.Internal, err, "decode email")
	}
	r.UpdatedAt = ms
	return nil
}

func decodeJSON(s string, v any) error {
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return store.Wrap(store.Internal, err, "decode email")
	}
	return nil
}

// score is an email's position in the indexes: ReceivedAt in Unix
// milliseconds, which a float64 score holds exactly.
func (r *record) score() string { return formatInt(r.ReceivedAt) }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// bodyRecord is the JSON form of a body's parsed content as the older
// layout stored it next to the raw source in the body hash, every field
// written; compactBody, the current form, has the same names, and
// decodeBody reads both.
type bodyRecord struct {
	Text        *string            `json:"text"`
	HTML        *string            `json:"html"`
	Headers     map[string]string  `json:"headers"`
	Attachments []attachmentRecord `json:"att"`
	Transcript  *store.Transcript  `json:"tx,omitempty"`
	// Unparsed is true for a body whose parts are read from its raw
	// source (store.Body.Given nil); bodies written before it existed
	// were all stored parsed.
	Unparsed bool `json:"u,omitempty"`
}

type attachmentRecord struct {
	ContentID   *string `json:"cid"`
	ContentType *string `json:"type"`
	Disposition *string `json:"disp"`
	Filename    *string `json:"name"`
	Size        int64   `json:"size"`
}

// compactBody is bodyRecord as the current layout stores it: fields that
// are null or empty are left out (decodeBody reads them back as
// encodeBody's form has them).
type compactBody struct {
	Text        *string            `json:"text,omitempty"`
	HTML        *string            `json:"html,omitempty"`
	Headers     map[string]string  `json:"headers,omitempty"`
	Attachments []attachmentRecord `json:"att,omitempty"`
	Transcript  *store.Transcript  `json:"tx,omitempty"`
	Unparsed    bool               `json:"u,omitempty"`
}

// A body of the current layout is one string: its parsed content as JSON
// (compactBody), recordSep, then the raw source, either bodyPlain and the
// bytes as they are, or bodyZipped, the raw size in decimal, recordSep and
// the rawzip frame of the bytes. A body of largeBody bytes or more is a
// hash instead, "raw" the bytes and "meta" the JSON.
const (
	bodyPlain  = 'r'
	bodyZipped = 'z'
)

// largeBody is the raw size from which a body is stored as a hash of its
// raw source and its parsed content, like the bodies of the older layout,
// instead of a string: one string would be a copy of the raw source in
// mailsink's memory, and rawzip does not compress sources that large.
const largeBody = rawzip.MaxSize

// encodeBodyMeta returns the parsed content of b as stored (compactBody).
func encodeBodyMeta(b *store.Body) []byte {
	r := compactBody{Transcript: b.Transcript, Unparsed: b.Given == nil}
	if g := b.Given; g != nil {
		r.Text, r.HTML, r.Headers = g.Text, g.HTML, g.Headers
		if len(g.Attachments) > 0 {
			r.Attachments = make([]attachmentRecord, len(g.Attachments))
			for i, a := range g.Attachments {
				r.Attachments[i] = attachmentRecord(a)
			}
		}
	}
	meta, _ := json.Marshal(&r)
	return meta
}

// encodeBodyValue returns the body value of b (see bodyPlain).
func encodeBodyValue(z *rawzip.Compressor, b *store.Body) []byte {
	meta := encodeBodyMeta(b)
	frame, zipped := z.Compress(b.Raw)
	defer z.Release(frame)
	head := make([]byte, 0, len(meta)+2*len(recordSep)+21)
	head = append(append(head, meta...), recordSep...)
	payload := b.Raw
	if zipped {
		head = strconv.AppendInt(append(head, bodyZipped), int64(len(b.Raw)), 10)
		head = append(head, recordSep...)
		payload = frame
	} else {
		head = append(head, bodyPlain)
	}
	// One copy of the payload, into memory that is not zeroed first.
	return bytes.Join([][]byte{head, payload}, nil)
}

// decodeBodyValue decodes a body value (encodeBodyValue).
func decodeBodyValue(v string) (*store.Body, error) {
	meta, rest, ok := strings.Cut(v, recordSep)
	if !ok || rest == "" {
		return nil, store.Errorf(store.Internal, "decode body: no raw source")
	}
	switch rest[0] {
	case bodyPlain:
		return decodeBody(rest[1:], meta)
	case bodyZipped:
		size, frame, ok := strings.Cut(rest[1:], recordSep)
		n, err := strconv.Atoi(size)
		if !ok || err != nil {
			return nil, store.Errorf(store.Internal, "decode body: bad raw size")
		}
		raw, err := rawzip.Decompress([]byte(frame), n)
		if err != nil {
			return nil, store.Wrap(store.Internal, err, "decode body")
		}
		return decodeBodyBytes(raw, meta)
	}
	return nil, store.Errorf(store.Internal, "decode body: unknown raw form %q", rest[0])
}

func decodeBody(raw, meta string) (*store.Body, error) {
	return decodeBodyBytes([]byte(raw), meta)
}

func decodeBodyBytes(raw []byte, meta string) (*store.Body, error) {
	var br bodyRecord
	if err := json.Unmarshal([]byte(meta), &br); err != nil {
		return nil, store.Wrap(store.Internal, err, "decode body")
	}
	b := &store.Body{Raw: raw, Transcript: br.Transcript}
	if br.Unparsed {
		return b, nil
	}
	g := &store.Parts{Text: br.Text, HTML: br.HTML, Headers: br.Headers, Attachments: make([]store.Attachment, len(br.Attachments))}
	if g.Headers == nil {
		g.Headers = map[string]string{}
	}
	for i, a := range br.Attachments {
		g.Attachments[i] = store.Attachment(a)
	}
	b.Given = g
	return b, nil
}
