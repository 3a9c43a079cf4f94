// Package mailparse turns a raw RFC 5322 message into what mailsink shows of
// it: the top-level headers, the text and HTML bodies decoded to UTF-8, and
// the metadata of its attachments.
//
// It is a thin layer over github.com/emersion/go-message, which reads the
// headers, splits multiparts and undoes transfer encodings and charsets, and
// the standard library (net/mail, mime). Captured test mail is often
// malformed, and a sink must still show whatever can be read, so where
// go-message or the standard library give up, a small fallback keeps what
// mail in the wild needs (each is tested with the message of
// testdata/corpus that needs it). Every string it returns is valid UTF-8.
// Limits on nesting depth and part count keep hostile input from using
// unbounded stack or memory.
package mailparse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"
)

const (
	// maxDepth is how deep multiparts nest before their content is ignored.
	maxDepth = 32
	// maxParts is how many MIME entities of one message are looked at.
	maxParts = 1000
)

// Message is what Parse found in one raw message. Fields it could not find
// are nil or empty.
type Message struct {
	// MessageID is the Message-ID without angle brackets; nil if absent or
	// empty.
	MessageID *string
	// Subject is the first Subject header, unfolded and RFC 2047-decoded;
	// nil if there is none (an empty header gives a pointer to "").
	Subject *string
	// From, To and Cc hold the bare addresses (no display names) of those
	// headers, in order and as written (case kept).
	From []string
	To   []string
	Cc   []string
	// Date is the parsed Date header, nil when absent or unparseable.
	Date *time.Time
	Body Body
}

// Body is the content of a message.
type Body struct {
	// Raw is the input slice itself, not a copy.
	Raw []byte
	// Text and HTML come from the first text/plain and the first text/html
	// part that is not an attachment, decoded to UTF-8 with CRLF line breaks
	// turned into LF.
	Text *string
	HTML *string
	// Headers has the top-level headers with lower-case keys, values
	// unfolded and RFC 2047-decoded, repeated headers joined with ", ".
	// Never nil.
	Headers map[string]string
	// Attachments lists attachment metadata in document order (see Parse
	// for which parts count). Never nil.
	Attachments []Attachment
}

// Attachment is the metadata of one attachment.
type Attachment struct {
	ContentID   *string // without angle brackets
	ContentType *string // lower-case media type, without parameters
	Disposition *string // the Content-Disposition type, lower case
	// Filename is the Content-Disposition filename, else the Content-Type
	// name, else the last segment of the Content-Location.
	Filename *string
	Size     int64 // decoded bytes
}

// ErrPanic is returned by Parse when the parser panicked. The parser is
// fuzzed and should never panic; should it still, the message is not lost.
var ErrPanic = errors.New("mailparse: the parser panicked")

// Parse parses raw as far as it can. It returns an error only when the
// parser panicked: ErrPanic, with what was parsed until then. Malformed MIME
// is no error: it yields whatever could be parsed.
//
// A part is an attachment when it is not multipart and it has
// Content-Disposition "attachment", or a file name (Content-Disposition
// filename or Content-Type name, RFC 2231 and RFC 2047 forms included), or a
// Content-ID while not being text/plain or text/html (an inline image), or it
// is a message/rfc822 (counted as one attachment; its own parts are not
// looked into), or its media type is neither text/* nor message/* (a file
// without a name is still a file).
func Parse(raw []byte) (m *Message, err error) {
	m = newMessage(raw)
	defer func() {
		if recover() != nil {
			err = ErrPanic
		}
	}()
	parse(m, raw)
	return m, nil
}

// ParseHeader parses only raw's top-level header, for callers that need the
// fields of a message but not its content: the result's MessageID, Subject,
// From, To and Cc are those Parse returns, Body.Raw is raw, and the rest of
// Body is empty (no Text or HTML, Headers and Attachments empty but not
// nil). Date is left nil: no caller needs it, and net/mail's parse of it
// cost a third of ParseHeader. Its cost does not grow with the body. Errors
// are those of Parse.
func ParseHeader(raw []byte) (*Message, error) {
	return parseTop(raw, true)
}

// ParseSummary is ParseHeader without From, To and Cc (left nil): the
// fields ingest stores with every email, for a caller that has the sender
// and the recipients from the envelope. net/mail's parse of the addresses
// is most of what ParseHeader costs.
func ParseSummary(raw []byte) (*Message, error) {
	return parseTop(raw, false)
}

// parseTop is ParseHeader, with From, To and Cc only when withAddresses.
func parseTop(raw []byte, withAddresses bool) (m *Message, err error) {
	m = newMessage(raw)
	defer func() {
		if recover() != nil {
			err = ErrPanic
		}
	}()
	hdr, _ := splitHeader(skipMboxLine(raw))
	f, ok := scanSummaryFields(hdr)
	if !ok {
		f = fieldsOf(readHeader(hdr))
	}
	parseSummary(m, f)
	if withAddresses {
		parseAddresses(m, f)
	}
	return m, nil
}

func newMessage(raw []byte) *Message {
	return &Message{Body: Body{Raw: raw, Headers: map[string]string{}, Attachments: []Attachment{}}}
}

// ReadAttachment returns the metadata and the decoded content of the index-th
// attachment (from 0) of raw, in the order and by the rule of
// Message.Body.Attachments. ok is false when there is no such attachment.
func ReadAttachment(raw []byte, index int) (att Attachment, content []byte, ok bool) {
	if index < 0 {
		return Attachment{}, nil, false
	}
	defer func() {
		if recover() != nil {
			att, content, ok = Attachment{}, nil, false
		}
	}()
	hdr, body := splitHeader(skipMboxLine(raw))
	n := 0
	w := walker{visit: func(l *leaf, r io.Reader) bool {
		if !l.attachment() {
			return true
		}
		if n < index {
			n++
			return true
		}
		content = []byte{}
		readChunks(l.decoded(r), func(b []byte) { content = append(content, b...) })
		att, ok = l.metadata(int64(len(content))), true
		return false
	}}
	w.walk(readHeader(hdr), bytes.NewReader(body), 0, "text/plain")
	return att, content, ok
}

// ReadAttachments returns the decoded contents of the attachments whose
// indexes (as for ReadAttachment) are in want, reading raw once. An index
// with no attachment is absent from the result.
func ReadAttachments(raw []byte, want map[int]bool) (contents map[int][]byte) {
	contents = map[int][]byte{}
	if len(want) == 0 {
		return contents
	}
	defer func() {
		if recover() != nil {
			contents = map[int][]byte{}
		}
	}()
	hdr, body := splitHeader(skipMboxLine(raw))
	n := -1
	w := walker{visit: func(l *leaf, r io.Reader) bool {
		if !l.attachment() {
			return true
		}
		n++
		if want[n] {
			content := []byte{}
			readChunks(l.decoded(r), func(b []byte) { content = append(content, b...) })
			contents[n] = content
		}
		return len(contents) < len(want)
	}}
	w.walk(readHeader(hdr), bytes.NewReader(body), 0, "text/plain")
	return contents
}

// parse fills m from raw. Unlike Parse it lets panics through, so tests and
// the fuzzer see them.
func parse(m *Message, raw []byte) {
	hdr, body := splitHeader(skipMboxLine(raw))
	h := readHeader(hdr)
	parseFields(m, h)
	w := walker{visit: func(l *leaf, r io.Reader) bool {
		if l.attachment() {
			var n int64
			readChunks(l.decoded(r), func(b []byte) { n += int64(len(b)) })
			m.Body.Attachments = append(m.Body.Attachments, l.metadata(n))
			return true
		}
		switch l.mediaType {
		case "text/plain":
			if m.Body.Text == nil {
				s := l.text(r)
				m.Body.Text = &s
			}
		case "text/html":
			if m.Body.HTML == nil {
				s := l.text(r)
				m.Body.HTML = &s
			}
		}
		return true
	}}
	w.walk(h, bytes.NewReader(body), 0, "text/plain")
}

// walker visits the leaf entities of a message in document order.
type walker struct {
	// visit is called with each leaf and its body, still transfer-encoded;
	// false stops the walk.
	visit func(l *leaf, body io.Reader) bool
	parts int
	stop  bool
}

// leaf is a non-multipart entity.
type leaf struct {
	header    message.Header
	mediaType string // lower case, without parameters; never empty
	params    map[string]string
	disp      string // lower case, "" when absent
	dispParam map[string]string
}

// walk visits the entity with header h and body, at nesting depth.
// defaultType is the media type of an entity without a valid Content-Type:
// text/plain, or message/rfc822 inside multipart/digest (RFC 2046 5.1.5).
func (w *walker) walk(h message.Header, body io.Reader, depth int, defaultType string) {
	if w.stop {
		return
	}
	w.parts++
	if w.parts > maxParts {
		w.stop = true
		return
	}
	l := leaf{header: h}
	l.mediaType, l.params = mediaType(h.Get("Content-Type"))
	if !strings.Contains(l.mediaType, "/") {
		l.mediaType = defaultType // absent or invalid (RFC 2045 section 5.2)
	}
	if strings.HasPrefix(l.mediaType, "multipart/") {
		if depth >= maxDepth {
			return
		}
		child := "text/plain"
		if l.mediaType == "multipart/digest" {
			child = "message/rfc822"
		}
		mr := textproto.NewMultipartReader(body, l.params["boundary"])
		for !w.stop {
			p, err := mr.NextPart()
			if err != nil {
				return // the end, or a part that cannot be read
			}
			w.walk(message.Header{Header: p.Header}, p, depth+1, child)
		}
		return
	}
	if v := h.Get("Content-Disposition"); v != "" {
		l.disp, l.dispParam = mediaType(v)
	}
	if !w.visit(&l, body) {
		w.stop = true
	}
}

// readChunks calls fn with what r reads, chunk by chunk, until its end or
// its first error. Where a broken encoding ends the content early, how much
// was decoded depends on the size of the reads, so Parse and ReadAttachment
// both read this way to agree on the size.
func readChunks(r io.Reader, fn func([]byte)) {
	buf := make([]byte, 8<<10)
	for {
		n, err := r.Read(buf)
		fn(buf[:n])
		if err != nil {
			return
		}
	}
}
