// Package mailparse turns a raw RFC 5322 message into what mailsink stores
// and shows of it: the top-level headers, the text and HTML bodies decoded to
// UTF-8, and the metadata of its attachments.
//
// It works on the raw bytes in place and never fails: captured test mail is
// often malformed (bad boundaries, unknown charsets, 8-bit headers, missing
// line breaks), and a sink must still show whatever can be read. Every
// string it returns is valid UTF-8. Limits on nesting depth and part count
// keep hostile input from using unbounded stack or memory.
//
// It is written by hand on golang.org/x/text's charsets rather than on
// github.com/emersion/go-message, which the design first named: go-message's
// readers stop with an error at a malformed header line or an unknown
// charset, where a sink must go on and keep what it can, and they copy what
// this package reads in place.
package mailparse

import (
	"bytes"
	"strings"
	"time"

	"github.com/mailsink/mailsink/store"
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
	// MessageID is the Message-ID without angle brackets, white space and
	// comments; nil if absent or empty.
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
	// Body holds the parsed content. Body.Raw is the input slice itself,
	// not a copy. Body.Text and Body.HTML come from the first text/plain and
	// the first text/html part that is not an attachment, decoded to UTF-8
	// with CRLF line breaks turned into LF. Body.Headers has the top-level
	// headers with lower-case keys, values unfolded and decoded, repeated
	// headers joined with ", "; 8-bit header text that is not UTF-8 is read
	// in the charset the top-level Content-Type declares, if any.
	// Body.Attachments lists attachment metadata in document order (see
	// Parse for which parts count); Size counts decoded bytes, and a part
	// without a file name is named by the last segment of its
	// Content-Location, if it has one. Headers and Attachments are never
	// nil.
	Body store.Body
}

// Parse parses raw as far as it can. It never returns an error and never
// panics: malformed MIME yields whatever could be parsed.
//
// A part is an attachment when it is not multipart and it has
// Content-Disposition "attachment", or a file name (Content-Disposition
// filename or Content-Type name, RFC 2231 and RFC 2047 forms included), or a
// Content-ID while not being text/plain or text/html (an inline image), or it
// is a message/rfc822 (counted as one attachment; its own parts are not
// looked into), or its media type is neither text/* nor message/* (a file
// without a name is still a file).
func Parse(raw []byte) (m *Message) {
	m = &Message{Body: store.Body{
		Raw:         raw,
		Headers:     map[string]string{},
		Attachments: []store.Attachment{},
	}}
	defer func() {
		// The parser is fuzzed and must not panic; should it still, the
		// message is not lost: keep what was parsed so far.
		_ = recover()
	}()
	parse(m, raw)
	return m
}

// Attachment returns the metadata and the decoded content of the index-th
// attachment (from 0) of raw, in the order and by the rule of
// Message.Body.Attachments. For parts that are not base64 or
// quoted-printable encoded, content is a subslice of raw. ok is false when
// there is no such attachment.
func Attachment(raw []byte, index int) (att store.Attachment, content []byte, ok bool) {
	if index < 0 {
		return store.Attachment{}, nil, false
	}
	defer func() {
		if recover() != nil {
			att, content, ok = store.Attachment{}, nil, false
		}
	}()
	msg := readMessage(raw, nil)
	n := 0
	w := walker{visit: func(l *leaf) bool {
		name, isAtt := l.attachment(&msg.dec)
		if !isAtt {
			return true
		}
		if n < index {
			n++
			return true
		}
		content = decodeTransfer(l.enc, l.body)
		att = l.metadata(name, len(content), &msg.dec)
		ok = true
		return false
	}}
	w.walk(msg.top, msg.body, 0, "text/plain")
	return att, content, ok
}

// parse fills m from raw. Unlike Parse it lets panics through, so tests and
// the fuzzer see them.
func parse(m *Message, raw []byte) {
	var (
		subject, messageID, date []byte
		seenSubject, seenID      bool
		seenDate                 bool
		fields                   []rawField
	)
	msg := readMessage(raw, func(name, value []byte) {
		fields = append(fields, rawField{name, value})
		switch {
		case equalFold(name, "subject"):
			if !seenSubject {
				subject, seenSubject = value, true
			}
		case equalFold(name, "message-id"):
			if !seenID {
				messageID, seenID = value, true
			}
		case equalFold(name, "date"):
			if !seenDate {
				date, seenDate = value, true
			}
		case equalFold(name, "from"):
			m.From = appendAddresses(m.From, value)
		case equalFold(name, "to"):
			m.To = appendAddresses(m.To, value)
		case equalFold(name, "cc"):
			m.Cc = appendAddresses(m.Cc, value)
		}
	})
	dec := &msg.dec
	var repeated map[string][]string // values of fields that occur more than once
	for _, f := range fields {
		key := lowerASCII(f.name)
		value := dec.words(unfold(f.value))
		if prev, ok := m.Body.Headers[key]; ok {
			if repeated == nil {
				repeated = map[string][]string{}
			}
			if repeated[key] == nil {
				repeated[key] = []string{prev}
			}
			repeated[key] = append(repeated[key], value)
			continue
		}
		m.Body.Headers[key] = value
	}
	for key, values := range repeated {
		m.Body.Headers[key] = strings.Join(values, ", ")
	}
	if seenSubject {
		s := dec.words(unfold(subject))
		m.Subject = &s
	}
	if seenID {
		if id := cleanID(messageID); id != "" {
			m.MessageID = &id
		}
	}
	if seenDate {
		if t, ok := parseDate(date); ok {
			m.Date = &t
		}
	}

	w := walker{visit: func(l *leaf) bool {
		if name, isAtt := l.attachment(dec); isAtt {
			att := l.metadata(name, decodedSize(l.enc, l.body), dec)
			m.Body.Attachments = append(m.Body.Attachments, att)
			return true
		}
		switch l.mediaType {
		case "text/plain":
			if m.Body.Text == nil {
				s := l.text()
				m.Body.Text = &s
			}
		case "text/html":
			if m.Body.HTML == nil {
				s := l.text()
				m.Body.HTML = &s
			}
		}
		return true
	}}
	w.walk(msg.top, msg.body, 0, "text/plain")
}

type rawField struct {
	name, value []byte
}

// message is the top level of a raw message.
type message struct {
	body []byte
	top  partHeader    // its MIME headers
	dec  headerDecoder // how its header text is decoded
}

// readMessage splits raw into header and body, calls each (when not nil)
// with every top-level field in order, and works out how 8-bit header text
// is to be read: in the charset the message declares, if any.
func readMessage(raw []byte, each func(name, value []byte)) message {
	hdr, body := splitHeader(raw, true)
	msg := message{body: body}
	sc := fieldScanner{rest: hdr}
	for {
		name, value, ok := sc.next()
		if !ok {
			break
		}
		msg.top.note(name, value)
		if each != nil {
			each(name, value)
		}
	}
	if msg.top.hasCType {
		ct := parseHeaderValue(unfold(msg.top.ctype))
		if cs, ok := ct.raw("charset"); ok {
			msg.dec.raw8 = lookupCharset(cs)
		}
	}
	return msg
}

// partHeader holds the raw values of the MIME fields of one entity; the
// first of each counts.
type partHeader struct {
	ctype, cdisp, cte, cid, cloc []byte
	hasCType, hasCDisp           bool
	hasCTE, hasCID, hasCLoc      bool
}

func (h *partHeader) note(name, value []byte) {
	if len(name) < len("content-id") || !equalFold(name[:8], "content-") {
		return
	}
	switch {
	case !h.hasCType && equalFold(name, "content-type"):
		h.ctype, h.hasCType = value, true
	case !h.hasCDisp && equalFold(name, "content-disposition"):
		h.cdisp, h.hasCDisp = value, true
	case !h.hasCTE && equalFold(name, "content-transfer-encoding"):
		h.cte, h.hasCTE = value, true
	case !h.hasCID && equalFold(name, "content-id"):
		h.cid, h.hasCID = value, true
	case !h.hasCLoc && equalFold(name, "content-location"):
		h.cloc, h.hasCLoc = value, true
	}
}

func scanPartHeader(hdr []byte) partHeader {
	var h partHeader
	sc := fieldScanner{rest: hdr}
	for {
		name, value, ok := sc.next()
		if !ok {
			return h
		}
		h.note(name, value)
	}
}

// walker visits the leaf entities of a message in document order.
type walker struct {
	visit func(l *leaf) bool // false stops the walk
	parts int
	stop  bool
}

// leaf is a non-multipart entity.
type leaf struct {
	mediaType string // lower-case, without parameters; never empty
	ctype     headerValue
	disp      headerValue
	hasDisp   bool
	cid       []byte
	hasCID    bool
	location  []byte // Content-Location, nil if absent
	enc       transferEncoding
	body      []byte // still transfer-encoded
}

// walk visits the entity with MIME header h and body, at nesting depth.
// defaultType is the media type of an entity without a valid Content-Type:
// text/plain, or message/rfc822 inside multipart/digest (RFC 2046 5.1.5).
func (w *walker) walk(h partHeader, body []byte, depth int, defaultType string) {
	if w.stop {
		return
	}
	w.parts++
	if w.parts > maxParts {
		w.stop = true
		return
	}
	l := leaf{body: body, enc: parseTransferEncoding(h.cte)}
	if h.hasCType {
		l.ctype = parseHeaderValue(unfold(h.ctype))
	}
	mt := l.ctype.token
	if !validMediaType(mt) {
		mt = defaultType // absent or invalid (RFC 2045 section 5.2)
	}
	if strings.HasPrefix(mt, "multipart/") {
		if depth >= maxDepth {
			return
		}
		child := "text/plain"
		if mt == "multipart/digest" {
			child = "message/rfc822"
		}
		each := func(part []byte) bool {
			ph, pb := splitHeader(part, false)
			w.walk(scanPartHeader(ph), pb, depth+1, child)
			return !w.stop
		}
		boundary, _ := l.ctype.raw("boundary")
		found := splitMultipart(body, boundary, each)
		if !found {
			if g := guessBoundary(body); g != "" && g != boundary {
				found = splitMultipart(body, g, each)
			}
		}
		if found {
			return
		}
		// No delimiter at all: show the body as text rather than nothing.
		mt, l.ctype = "text/plain", headerValue{}
	}
	l.mediaType = mt
	if h.hasCDisp {
		l.disp, l.hasDisp = parseHeaderValue(unfold(h.cdisp)), true
	}
	l.cid, l.hasCID = h.cid, h.hasCID
	if h.hasCLoc {
		l.location = h.cloc
	}
	if !w.visit(&l) {
		w.stop = true
	}
}

// validMediaType reports whether mt is type/subtype made of RFC 2045 tokens.
func validMediaType(mt string) bool {
	slash := strings.IndexByte(mt, '/')
	if slash <= 0 || slash == len(mt)-1 {
		return false
	}
	for i := 0; i < len(mt); i++ {
		if i != slash && !isTokenChar(mt[i]) {
			return false
		}
	}
	return true
}

// attachment reports whether l is an attachment (see Parse) and returns its
// file name, "" when it has none.
func (l *leaf) attachment(dec *headerDecoder) (filename string, ok bool) {
	filename = l.filename(dec)
	switch {
	case l.disp.token == "attachment", filename != "":
		return filename, true
	case l.mediaType == "message/rfc822", l.mediaType == "message/global":
		return filename, true
	case l.mediaType == "text/plain", l.mediaType == "text/html":
		return filename, false
	case l.contentID() != "":
		return filename, true
	}
	return filename, !strings.HasPrefix(l.mediaType, "text/") && !strings.HasPrefix(l.mediaType, "message/")
}

// filename returns the Content-Disposition filename, else the Content-Type
// name, decoded; "" if there is none.
func (l *leaf) filename(dec *headerDecoder) string {
	if s, ok := l.disp.get("filename", dec); ok {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	if s, ok := l.ctype.get("name", dec); ok {
		return strings.TrimSpace(s)
	}
	return ""
}

func (l *leaf) contentID() string {
	if !l.hasCID {
		return ""
	}
	return cleanID(l.cid)
}

// metadata describes l as an attachment of size decoded bytes. Without a
// file name, the last segment of its Content-Location (RFC 2557) names it;
// that does not make a part an attachment, as a name would.
func (l *leaf) metadata(filename string, size int, dec *headerDecoder) store.Attachment {
	att := store.Attachment{Size: int64(size)}
	if filename == "" && l.location != nil {
		filename = locationName(l.location, dec)
	}
	mt := l.mediaType
	att.ContentType = &mt
	if filename != "" {
		att.Filename = &filename
	}
	if l.hasDisp && l.disp.token != "" {
		d := validString([]byte(l.disp.token))
		att.Disposition = &d
	}
	if id := l.contentID(); id != "" {
		att.ContentID = &id
	}
	return att
}

// locationName returns the last path segment of a Content-Location URI,
// "" for a cid: URI or one that ends in "/".
func locationName(v []byte, dec *headerDecoder) string {
	v = unfold(v)
	if len(v) >= 4 && equalFold(v[:4], "cid:") {
		return ""
	}
	if i := bytes.IndexAny(v, "?#"); i >= 0 {
		v = v[:i]
	}
	if i := bytes.LastIndexAny(v, "/\\"); i >= 0 {
		v = v[i+1:]
	}
	if bytes.IndexByte(v, '%') >= 0 {
		v = percentDecode(nil, v)
	}
	return strings.TrimSpace(dec.words(v))
}

// text decodes l's body to valid UTF-8 with LF line breaks.
func (l *leaf) text() string {
	cs, _ := l.ctype.raw("charset")
	return textString(decodeCharset(lookupCharset(cs), decodeTransfer(l.enc, l.body)))
}
