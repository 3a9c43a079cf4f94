package redisstore

import (
	"encoding/json"
	"strconv"
	"time"

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
)

// fields lists the hash fields in the order the scripts and GetEmail read
// them (HMGET) and decodeFields expects them.
var fields = []string{fieldFixed, fieldStatus, fieldSubject, fieldNotes, fieldLabels, fieldUpdated}

// fixed is the JSON form of the immutable part of an email's metadata.
// Timestamps are Unix milliseconds, the precision store.Email promises.
type fixed struct {
	// Body is the id of the body key; bodyScript reads it with cjson.
	Body       string  `json:"b"`
	ID         string  `json:"id"`
	AccountID  string  `json:"acc"`
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
	labels := r.Labels
	if labels == nil {
		labels = []string{}
	}
	return &store.Email{
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

// marshal returns v as json.Marshal writes it. It cannot fail: what is
// stored is made of strings, integers, slices and maps with string keys.
func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// decodeFields decodes the values of fields, as HMGET returns them.
func decodeFields(v []any) (*record, error) {
	var r record
	if err := r.decode(v); err != nil {
		return nil, err
	}
	return &r, nil
}

// decode sets r from the values of fields, as HMGET returns them.
func (r *record) decode(v []any) error {
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

// bodyRecord is the JSON form of a body's parsed content, stored next to the
// raw source in the body hash.
type bodyRecord struct {
	Text        *string            `json:"text"`
	HTML        *string            `json:"html"`
	Headers     map[string]string  `json:"headers"`
	Attachments []attachmentRecord `json:"att"`
	Transcript  *store.Transcript  `json:"tx,omitempty"`
	// Unparsed is store.Body.Unparsed; bodies written before it existed
	// were all parsed.
	Unparsed bool `json:"u,omitempty"`
}

type attachmentRecord struct {
	ContentID   *string `json:"cid"`
	ContentType *string `json:"type"`
	Disposition *string `json:"disp"`
	Filename    *string `json:"name"`
	Size        int64   `json:"size"`
}

// encodeBody returns the bodyRecord of b as json.Marshal writes it, with
// nil headers as {} and nil attachments as [].
func encodeBody(b *store.Body) string {
	r := bodyRecord{Text: b.Text, HTML: b.HTML, Headers: b.Headers, Attachments: make([]attachmentRecord, len(b.Attachments)), Transcript: b.Transcript, Unparsed: b.Unparsed}
	if r.Headers == nil {
		r.Headers = map[string]string{}
	}
	for i, a := range b.Attachments {
		r.Attachments[i] = attachmentRecord(a)
	}
	return marshal(&r)
}

func decodeBody(raw, meta string) (*store.Body, error) {
	var br bodyRecord
	if err := json.Unmarshal([]byte(meta), &br); err != nil {
		return nil, store.Wrap(store.Internal, err, "decode body")
	}
	b := &store.Body{
		Raw:         []byte(raw),
		Text:        br.Text,
		HTML:        br.HTML,
		Headers:     br.Headers,
		Attachments: make([]store.Attachment, len(br.Attachments)),
		Transcript:  br.Transcript,
		Unparsed:    br.Unparsed,
	}
	if b.Headers == nil {
		b.Headers = map[string]string{}
	}
	for i, a := range br.Attachments {
		b.Attachments[i] = store.Attachment(a)
	}
	return b, nil
}
