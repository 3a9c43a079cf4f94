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
// Limits on nesting depth, part count and header fields keep hostile input
// from using unbounded stack or memory; Body.Cut says where they cut.
package mailparse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/textproto"
)

// The limits of Parse (docs/operations.md, "Limits"). A message past one is still
// parsed: Body.Cut says what was left out.
const (
	// MaxDepth is how deep multiparts nest before their content is ignored.
	MaxDepth = 32
	// MaxParts is how many MIME entities of one message are looked at.
	MaxParts = 1000
	// MaxHeaderFields is how many fields of one header (the message's or
	// a part's) are read; the fields after them are left out.
	MaxHeaderFields = 1000
)

// Cut says where parsing left out part of a message because of a limit;
// the zero Cut left out nothing.
type Cut struct {
	// HeaderFields: a header had more than MaxHeaderFields fields.
	HeaderFields bool
	// Parts: the message had more than MaxParts entities.
	Parts bool
	// Depth: multiparts nested deeper than MaxDepth.
	Depth bool
}

// Any reports whether anything was cut.
func (c Cut) Any() bool { return c.HeaderFields || c.Parts || c.Depth }

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
	// Cut says what the limits left out.
	Cut Cut
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
	return ParseContext(context.Background(), raw)
}

// ParseContext is Parse, stopping when ctx ends: then it returns ctx's
// error with what was parsed until then. Its time and memory are linear in
// len(raw).
func ParseContext(ctx context.Context, raw []byte) (m *Message, err error) {
	return parseRecovering(ctx, raw, true)
}

// ParseText is ParseContext for a reader of the text and the header alone
// (search's digest): attachments are found as ParseContext finds them, but
// their content is not decoded, and their Size is 0. Decoding it, to count
// the bytes, was half the CPU of an ingest of 100 KB messages with an
// attachment; the rest of the result is ParseContext's.
func ParseText(ctx context.Context, raw []byte) (m *Message, err error) {
	return parseRecovering(ctx, raw, false)
}

// parseRecovering is parse, with the attachments' sizes when sizes, that
// returns a panic of the parser as ErrPanic with what was parsed.
func parseRecovering(ctx context.Context, raw []byte, sizes bool) (m *Message, err error) {
	m = newMessage(raw)
	defer func() {
		if recover() != nil {
			err = ErrPanic
		}
	}()
	parse(ctx, m, raw, sizes)
	return m, ctx.Err()
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
		h, _ := readHeader(hdr)
		f = fieldsOf(h)
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
	_, ok = OpenAttachment(context.Background(), raw, index, func(a Attachment, r io.Reader) {
		att = a
		content = []byte{}
		readChunks(r, func(b []byte) { content = append(content, b...) })
		att.Size = int64(len(content))
	})
	return att, content, ok
}

// OpenAttachment calls use with the metadata of the index-th attachment of
// raw (as ReadAttachment; its Size is not known yet and is 0) and a reader
// of its decoded content, which use may read as far as it likes; it reads
// raw only up to that attachment and holds no copy of the content, so that
// a download can be streamed. It reports false, without calling use, when
// there is no such attachment or ctx ended first; n is then how many
// attachments raw has. A read of the content fails once ctx ends.
func OpenAttachment(ctx context.Context, raw []byte, index int, use func(Attachment, io.Reader)) (n int, ok bool) {
	if index < 0 {
		return 0, false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	hdr, body := splitHeader(skipMboxLine(raw))
	w := walker{ctx: ctx, visit: func(l *leaf, r io.Reader) bool {
		if !l.attachment() {
			return true
		}
		if n < index {
			n++
			return true
		}
		use(l.metadata(0), chunked{l.decoded(r)})
		ok = true
		return false
	}}
	w.walkTop(hdr, body)
	return n, ok
}

// chunked reads r in the chunks readChunks reads, so that a streamed
// attachment has the bytes, and the size, Parse counts.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), chunkSize)]) }

// ReadAttachments returns the decoded contents of the attachments whose
// indexes (as for ReadAttachment) are in want, reading raw once. An index
// with no attachment is absent from the result.
func ReadAttachments(ctx context.Context, raw []byte, want map[int]bool) (contents map[int][]byte) {
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
	w := walker{ctx: ctx, visit: func(l *leaf, r io.Reader) bool {
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
	w.walkTop(hdr, body)
	return contents
}

// parse fills m from raw, with the attachments' sizes when sizes. Unlike
// Parse it lets panics through, so tests and the fuzzer see them.
func parse(ctx context.Context, m *Message, raw []byte, sizes bool) {
	hdr, body := splitHeader(skipMboxLine(raw))
	h, cut := readHeader(hdr)
	parseFields(m, h)
	w := walker{ctx: ctx, cut: Cut{HeaderFields: cut}, visit: func(l *leaf, r io.Reader) bool {
		if l.attachment() {
			var n int64
			if sizes {
				readChunks(l.decoded(r), func(b []byte) { n += int64(len(b)) })
			}
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
	w.walk(h, w.reader(body), 0, "text/plain")
	m.Body.Cut = w.cut
}

// walker visits the leaf entities of a message in document order.
type walker struct {
	// ctx ends the walk: reads of the message fail once it is done.
	ctx context.Context
	// visit is called with each leaf and its body, still transfer-encoded;
	// false stops the walk.
	visit func(l *leaf, body io.Reader) bool
	parts int
	stop  bool
	cut   Cut
}

// walkTop walks the message of header block hdr and body.
func (w *walker) walkTop(hdr, body []byte) {
	h, cut := readHeader(hdr)
	w.cut.HeaderFields = cut
	w.walk(h, w.reader(body), 0, "text/plain")
}

// reader reads body until w.ctx ends.
func (w *walker) reader(body []byte) io.Reader {
	return &ctxReader{ctx: w.ctx, r: bytes.NewReader(body)}
}

// ctxReader reads r until ctx ends; then it fails with ctx's error, which
// ends whatever go-message was reading.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
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
	if w.stop || w.ctx.Err() != nil {
		return
	}
	w.parts++
	if w.parts > MaxParts {
		w.stop, w.cut.Parts = true, true
		return
	}
	l := leaf{header: h}
	l.mediaType, l.params = mediaType(h.Get("Content-Type"))
	if !strings.Contains(l.mediaType, "/") {
		l.mediaType = defaultType // absent or invalid (RFC 2045 section 5.2)
	}
	if strings.HasPrefix(l.mediaType, "multipart/") {
		if depth >= MaxDepth {
			w.cut.Depth = true
			return
		}
		child := "text/plain"
		if l.mediaType == "multipart/digest" {
			child = "message/rfc822"
		}
		boundary := l.params["boundary"]
		mr := textproto.NewMultipartReader(newFieldLimiter(body, boundary, &w.cut.HeaderFields), boundary)
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

// chunkSize is the size of readChunks's reads.
const chunkSize = 8 << 10

// readChunks calls fn with what r reads, chunk by chunk, until its end or
// its first error. Where a broken encoding ends the content early, how much
// was decoded depends on the size of the reads, so Parse and ReadAttachment
// both read this way to agree on the size.
func readChunks(r io.Reader, fn func([]byte)) {
	buf := make([]byte, chunkSize)
	for {
		n, err := r.Read(buf)
		fn(buf[:n])
		if err != nil {
			return
		}
	}
}
