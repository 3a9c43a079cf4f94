package mailparse

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/charset"
	"github.com/emersion/go-message/textproto"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
)

// skipMboxLine drops the "From sender date" line that starts a message
// saved from an mbox file (corpus: 21 messages, e.g.
// plain_emails/raw_email.eml), but not an obsolete "From : name <addr>"
// field (rfc2822/example13.eml). It also drops a UTF-8 byte-order mark that
// an editor put before the first header (TestByteOrderMark).
func skipMboxLine(raw []byte) []byte {
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	line, rest, _ := bytes.Cut(raw, []byte("\n"))
	if name, _, _ := bytes.Cut(line, []byte(":")); bytes.HasPrefix(line, []byte("From ")) &&
		bytes.ContainsAny(bytes.TrimSpace(name), " \t") {
		return rest
	}
	return raw
}

// splitHeader splits an entity into its header block, with the empty line
// that ends it, and its body.
func splitHeader(b []byte) (hdr, body []byte) {
	for off := 0; off < len(b); {
		n := bytes.IndexByte(b[off:], '\n') + 1
		if n == 0 {
			return b, nil
		}
		if line := b[off : off+n]; string(line) == "\n" || string(line) == "\r\n" {
			return b[:off+n], b[off+n:]
		}
		off += n
	}
	return b, nil
}

// headerReader reads the header block hdr with a buffer of its size, up to
// bufio's default: a header is most often under 1 KB. A header under the
// default size fits the buffer either way, so no line is split or read
// differently (FuzzHeaderReader).
func headerReader(hdr []byte) *bufio.Reader {
	return bufio.NewReaderSize(bytes.NewReader(hdr), min(len(hdr)+1, 4096))
}

// readHeader parses a header block with go-message, at most its first
// MaxHeaderFields fields (cut is true when there were more). go-message
// stops at a line that is neither a field nor folded; such a line is taken
// as folded instead, so the fields after it are not lost (corpus:
// plain_emails/raw_email_incorrect_header.eml, rfc2822/example13.eml).
func readHeader(hdr []byte) (h message.Header, cut bool) {
	hdr, cut = firstFields(hdr, MaxHeaderFields)
	th, err := textproto.ReadHeader(headerReader(hdr))
	if err != nil && err != io.EOF {
		var fixed []byte
		for line := range bytes.Lines(hdr) {
			if !startsField(line) && line[0] != ' ' && line[0] != '\t' && len(bytes.TrimSpace(line)) > 0 {
				fixed = append(fixed, ' ')
			}
			fixed = append(fixed, line...)
		}
		th, _ = textproto.ReadHeader(headerReader(fixed))
	}
	return message.Header{Header: th}, cut
}

// firstFields returns the header block hdr cut before its (max+1)th field,
// and whether it was cut. A field starts at each line that does not start
// with a space or a tab.
func firstFields(hdr []byte, max int) ([]byte, bool) {
	fields := 0
	for off := 0; off < len(hdr); {
		if c := hdr[off]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			if fields++; fields > max {
				return hdr[:off], true
			}
		}
		n := bytes.IndexByte(hdr[off:], '\n')
		if n < 0 {
			break
		}
		off += n + 1
	}
	return hdr, false
}

// startsField reports whether line is "name: value", the name made of
// printable US-ASCII (RFC 5322 section 3.6.8) and maybe followed by white
// space (obsolete syntax).
func startsField(line []byte) bool {
	name, _, ok := bytes.Cut(line, []byte(":"))
	name = bytes.TrimRight(name, " \t")
	return ok && len(name) > 0 && bytes.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) < 0
}

// parseFields fills m's fields and Headers from the top-level header h.
func parseFields(m *Message, h message.Header) {
	parseHeaders(m, h)
	f := fieldsOf(h)
	parseSummary(m, f)
	parseAddresses(m, f)
	if t, ok := parseDate(f.date); ok {
		m.Date = &t
	}
}

// parseHeaders fills m.Body.Headers from the top-level header h.
func parseHeaders(m *Message, h message.Header) {
	var order []string
	values := map[string][]string{}
	for f := h.Fields(); f.Next(); {
		key := strings.ToLower(f.Key())
		if values[key] == nil {
			order = append(order, key)
		}
		values[key] = append(values[key], decodeText(f.Value()))
	}
	for _, key := range order {
		m.Body.Headers[key] = strings.Join(values[key], ", ")
	}
}

// summaryFields are the values of the top-level header fields that
// Message's fields other than Body come from, unfolded as go-message reads
// them but not decoded: the first Subject, Message-ID and Date, every From,
// To and Cc.
type summaryFields struct {
	subject    string
	hasSubject bool
	messageID  string
	date       string
	from       []string
	to         []string
	cc         []string
}

// fieldsOf returns the summary fields of the header h.
func fieldsOf(h message.Header) summaryFields {
	return summaryFields{
		subject:    h.Get("Subject"),
		hasSubject: h.Has("Subject"),
		messageID:  h.Get("Message-Id"),
		date:       h.Get("Date"),
		from:       h.Values("From"),
		to:         h.Values("To"),
		cc:         h.Values("Cc"),
	}
}

// parseSummary fills m's Subject and MessageID from f.
func parseSummary(m *Message, f summaryFields) {
	if f.hasSubject {
		s := decodeText(f.subject)
		m.Subject = &s
	}
	if id := cleanID(f.messageID); id != "" {
		m.MessageID = &id
	}
}

// parseAddresses fills m's From, To and Cc from f.
func parseAddresses(m *Message, f summaryFields) {
	m.From = addresses(f.from)
	m.To = addresses(f.to)
	m.Cc = addresses(f.cc)
}

// scanSummaryFields returns fieldsOf(readHeader(hdr)) without go-message,
// for the header blocks mail is sent with: every line ends in LF or CRLF,
// has no other CR, and is a field ("name: value", the name of printable
// US-ASCII, maybe with spaces or tabs around it) or the continuation of one
// (it starts with a space or a tab), but for the empty line that ends the
// block. There go-message reads every field, and a field's value is its
// lines, each without its line end and the spaces and tabs around it, the
// empty ones left out, joined with a space. ok is false for any other
// header block, which readHeader must read (FuzzScanSummaryFields compares
// the two). go-message costs about two thirds of ParseHeader
// (BenchmarkParse/plain-2KB/header-only): a map and a string for every
// field of the header, when the summary needs five.
func scanSummaryFields(hdr []byte) (f summaryFields, ok bool) {
	if len(hdr) == 0 || hdr[len(hdr)-1] != '\n' || hdr[0] == ' ' || hdr[0] == '\t' {
		return summaryFields{}, false
	}
	fields := 0     // readHeader reads the first MaxHeaderFields
	kind := notKept // the field being read
	var (
		value []byte
		seen  uint // a bit for each kind met
	)
	for len(hdr) > 0 {
		n := bytes.IndexByte(hdr, '\n')
		line := hdr[:n]
		hdr = hdr[n+1:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		switch {
		case bytes.IndexByte(line, '\r') >= 0:
			return summaryFields{}, false
		case len(line) == 0:
			if len(hdr) > 0 {
				return summaryFields{}, false // an empty line inside the block
			}
		case line[0] == ' ' || line[0] == '\t':
			if kind != notKept {
				value = appendSegment(value, line)
			}
		default:
			f.add(kind, value, &seen)
			if fields++; fields > MaxHeaderFields {
				return f, true
			}
			name, rest, found := bytes.Cut(line, []byte(":"))
			if !found {
				return summaryFields{}, false
			}
			name = bytes.Trim(name, " \t")
			for _, c := range name {
				if c < '!' || c > '~' {
					return summaryFields{}, false
				}
			}
			kind = summaryKind(name)
			value = value[:0]
			if kind != notKept {
				value = appendSegment(value, rest)
			}
		}
	}
	f.add(kind, value, &seen)
	return f, true
}

// The summary fields scanSummaryFields keeps.
const (
	notKept = iota
	subjectField
	messageIDField
	dateField
	fromField
	toField
	ccField
)

// summaryKind returns which summary field a field named name is.
func summaryKind(name []byte) int {
	switch len(name) {
	case 2:
		if bytes.EqualFold(name, []byte("To")) {
			return toField
		}
		if bytes.EqualFold(name, []byte("Cc")) {
			return ccField
		}
	case 4:
		if bytes.EqualFold(name, []byte("From")) {
			return fromField
		}
		if bytes.EqualFold(name, []byte("Date")) {
			return dateField
		}
	case 7:
		if bytes.EqualFold(name, []byte("Subject")) {
			return subjectField
		}
	case 10:
		if bytes.EqualFold(name, []byte("Message-Id")) {
			return messageIDField
		}
	}
	return notKept
}

// add records value, read for a field of kind: the first Subject, Message-ID
// and Date count (seen has a bit for each kind met), and every From, To and
// Cc.
func (f *summaryFields) add(kind int, value []byte, seen *uint) {
	first := *seen&(1<<kind) == 0
	*seen |= 1 << kind
	switch kind {
	case subjectField:
		if first {
			f.subject, f.hasSubject = string(value), true
		}
	case messageIDField:
		if first {
			f.messageID = string(value)
		}
	case dateField:
		if first {
			f.date = string(value)
		}
	case fromField:
		f.from = append(f.from, string(value))
	case toField:
		f.to = append(f.to, string(value))
	case ccField:
		f.cc = append(f.cc, string(value))
	}
}

// appendSegment appends one line of a field's value to value as go-message
// unfolds it: without the spaces and tabs around it, after a space unless
// it is the first, and not at all when it is empty.
func appendSegment(value, line []byte) []byte {
	line = bytes.Trim(line, " \t")
	if len(line) == 0 {
		return value
	}
	if len(value) > 0 {
		value = append(value, ' ')
	}
	return append(value, line...)
}

// wordDecoder decodes RFC 2047 encoded words; it is never changed.
var wordDecoder = &mime.WordDecoder{CharsetReader: charsetReader}

// charsetReader returns r decoded from the charset label to UTF-8. Labels
// are looked up as mail clients and browsers do (the WHATWG Encoding
// Standard: ISO-8859-1 text is read as windows-1252, whose 0x80-0x9F are
// printable; corpus: attachment_emails/attachment_pdf_non_ascii.eml), then in
// go-message's table. US-ASCII is read as UTF-8, which mail labelled so often
// is, and so is a charset neither knows: bytes that are not UTF-8 become
// U+FFFD, the rest stays readable.
func charsetReader(label string, r io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "", "utf-8", "us-ascii":
		return r, nil
	}
	if enc, _ := htmlindex.Get(label); enc != nil && enc != encoding.Replacement {
		return enc.NewDecoder().Reader(r), nil
	}
	if dec, err := charset.Reader(label, r); err == nil {
		return dec, nil
	}
	return r, nil
}

// decodeText decodes the RFC 2047 encoded words of a header value into
// valid UTF-8; a value that does not decode is kept as written.
func decodeText(v string) string {
	if s, err := wordDecoder.DecodeHeader(v); err == nil {
		v = s
	}
	return validUTF8(strings.TrimSpace(v))
}

// addresses returns the bare addresses of address-list header values.
func addresses(values []string) []string {
	var out []string
	parser := mail.AddressParser{WordDecoder: wordDecoder}
	for _, v := range values {
		list, err := parser.ParseList(v)
		if err != nil {
			out = append(out, lenientAddresses(v)...)
			continue
		}
		for _, a := range list {
			out = append(out, validUTF8(a.Address))
		}
	}
	return out
}

// lenientAddresses reads an address list that net/mail refuses, so that one
// odd mailbox does not lose the others: comments are dropped, the content of
// angle brackets is an address (without an obsolete route), and elsewhere
// every word with an "@" is one, white space around "." and "@" ignored.
// Corpus: rfc2822/example10.eml, example11.eml and example13.eml (obsolete
// syntax of RFC 5322 section 4.4), plain_emails/mix_caps_content_type.eml
// and raw_email_multiple_from.eml (no angle brackets, no commas),
// raw_email_with_at_display_name.eml ("@" in a display name).
func lenientAddresses(v string) []string {
	var out []string
	for _, box := range strings.Split(stripComments(v), ",") {
		if _, addr, ok := strings.Cut(box, "<"); ok {
			addr, _, _ = strings.Cut(addr, ">")
			if i := strings.LastIndexByte(addr, ':'); i >= 0 {
				addr = addr[i+1:] // "@route:" before the address
			}
			if addr = strings.Join(strings.Fields(addr), ""); strings.Contains(addr, "@") {
				out = append(out, validUTF8(addr))
			}
			continue
		}
		for _, w := range strings.Fields(spaceAroundDots.ReplaceAllString(box, "$1")) {
			if strings.Contains(w, "@") {
				out = append(out, validUTF8(w))
			}
		}
	}
	return out
}

// parseDate parses a Date header with net/mail. Comments, and white space
// around the colons of the time, are obsolete syntax (RFC 5322 section
// 4.3) that it does not take (corpus: rfc2822/example13.eml).
func parseDate(v string) (time.Time, bool) {
	if len(v) > 1000 {
		return time.Time{}, false // not a date, and not worth the work
	}
	// The form almost every message has, first: net/mail tries its 48
	// layouts in turn (24 fail before this one), each failure an error
	// to allocate. Whatever this layout parses, net/mail parses alike
	// (FuzzParseDate).
	if t, err := time.Parse(usualDate, v); err == nil {
		return t, true
	}
	t, err := mail.ParseDate(v)
	if err != nil {
		t, err = mail.ParseDate(spaceAroundColons.ReplaceAllString(stripComments(v), ":"))
	}
	return t, err == nil
}

// usualDate is RFC 5322's date-time with a day of the week and seconds.
const usualDate = "Mon, 2 Jan 2006 15:04:05 -0700"

var spaceAroundColons = regexp.MustCompile(`\s*:\s*`)

// cleanID returns a Message-ID or Content-ID without angle brackets, white
// space and comments (obsolete syntax; corpus: rfc2822/example13.eml).
func cleanID(v string) string {
	v = strings.TrimSpace(stripComments(v))
	if i := strings.IndexByte(v, '<'); i >= 0 {
		v = v[i+1:]
		if j := strings.IndexByte(v, '>'); j >= 0 {
			v = v[:j]
		}
	}
	return validUTF8(strings.Join(strings.Fields(v), ""))
}

// spaceAroundDots matches white space around "." and "@", which obsolete
// syntax allows inside an address ("jdoe@test . example").
var spaceAroundDots = regexp.MustCompile(`\s*([.@])\s*`)

// stripComments replaces the (nested) comments of a header value with a
// space.
func stripComments(v string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && depth > 0:
			i++ // an escaped character in a comment
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			if depth--; depth == 0 {
				b.WriteByte(' ')
			}
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}
