package mailparse

import (
	"io"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message"
)

// mediaType parses a Content-Type or Content-Disposition value with
// mime.ParseMediaType (RFC 2231 parameters included), or lenientParams when
// only the parameters are at fault, and decodes RFC 2047 words in parameter
// values. It returns "" for a value it cannot read.
func mediaType(v string) (string, map[string]string) {
	t, params, err := mime.ParseMediaType(v)
	switch {
	case err == mime.ErrInvalidMediaParameter:
		params = lenientParams(v)
	case err != nil:
		return "", nil
	case strings.Contains(v, "*="):
		// mime.ParseMediaType drops RFC 2231 values in charsets other
		// than UTF-8 and US-ASCII.
		for k, p := range lenientParams(v) {
			if _, ok := params[k]; !ok {
				params[k] = p
			}
		}
	}
	for k, p := range params {
		params[k] = decodeText(p)
	}
	return t, params
}

// attachment reports whether l is an attachment (see Parse).
func (l *leaf) attachment() bool {
	switch {
	case l.disp == "attachment", l.filename() != "":
		return true
	case l.mediaType == "message/rfc822", l.mediaType == "message/global":
		return true
	case l.mediaType == "text/plain", l.mediaType == "text/html":
		return false
	case l.contentID() != "":
		return true
	}
	return !strings.HasPrefix(l.mediaType, "text/") && !strings.HasPrefix(l.mediaType, "message/")
}

// filename returns the Content-Disposition filename, else the Content-Type
// name; "" if there is none.
func (l *leaf) filename() string {
	if s := strings.TrimSpace(l.dispParam["filename"]); s != "" {
		return s
	}
	return strings.TrimSpace(l.params["name"])
}

func (l *leaf) contentID() string {
	return cleanID(l.header.Get("Content-Id"))
}

// metadata describes l as an attachment of size decoded bytes. Without a
// file name, the last segment of its Content-Location (RFC 2557) names it;
// that does not make a part an attachment, as a name would.
func (l *leaf) metadata(size int64) Attachment {
	att := Attachment{Size: size}
	mt := l.mediaType
	att.ContentType = &mt
	name := l.filename()
	if name == "" {
		name = locationName(l.header.Get("Content-Location"))
	}
	if name != "" {
		att.Filename = &name
	}
	if l.disp != "" {
		d := l.disp
		att.Disposition = &d
	}
	if id := l.contentID(); id != "" {
		att.ContentID = &id
	}
	return att
}

// locationName returns the last path segment of a Content-Location URI,
// "" for a cid: URI or one that ends in "/".
func locationName(v string) string {
	if strings.HasPrefix(strings.ToLower(v), "cid:") {
		return ""
	}
	if i := strings.IndexAny(v, "?#"); i >= 0 {
		v = v[:i]
	}
	if i := strings.LastIndexAny(v, `/\`); i >= 0 {
		v = v[i+1:]
	}
	if u, err := url.PathUnescape(v); err == nil {
		v = u
	}
	return validUTF8(strings.TrimSpace(v))
}

// decoded returns the content of l, read from its transfer-encoded body:
// go-message undoes the transfer encoding (an unknown one leaves the bytes
// as they are), and text is read in its charset (see charsetReader).
func (l *leaf) decoded(body io.Reader) io.Reader {
	var h message.Header
	h.Set("Content-Transfer-Encoding", l.header.Get("Content-Transfer-Encoding"))
	e, _ := message.New(h, body) // an unknown encoding is a soft error
	if !strings.HasPrefix(l.mediaType, "text/") {
		return e.Body
	}
	r, _ := charsetReader(l.params["charset"], e.Body)
	return r
}

// text reads l as valid UTF-8 with LF line breaks.
func (l *leaf) text(body io.Reader) string {
	b, _ := io.ReadAll(l.decoded(body)) // what was decoded before an error is kept
	return cleanText(b)
}

// cleanText returns b with CRLF turned into LF, then each run of bytes that
// are not UTF-8 replaced by U+FFFD (as validUTF8 does), in one pass and one
// copy: a 25 MB part costs 25 MB more, not four copies of it.
func cleanText(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	start := 0       // the start of the bytes not yet written
	invalid := false // the last byte written was U+FFFD for an invalid run
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\r' && i+1 < len(b) && b[i+1] == '\n':
			out.Write(b[start:i])
			i++
			start = i
		case c < utf8.RuneSelf:
			invalid = false
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r != utf8.RuneError || n > 1 {
				invalid = false
				i += n
				continue
			}
			out.Write(b[start:i])
			if !invalid {
				out.WriteString("\uFFFD")
				invalid = true
			}
			i++
			start = i
		}
	}
	out.Write(b[start:])
	return out.String()
}

func validUTF8(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

// lenientParams reads the parameters of a Content-Type or
// Content-Disposition value that mime.ParseMediaType refuses: split at
// semicolons, values unquoted, RFC 2231 extended
// values in any charset. Corpus: unquoted values with "=" (boundaries of
// mime_emails/raw_email_with_illegal_boundary.eml,
// raw_email_with_binary_encoded.eml, plain_emails/raw_email_bad_time.eml),
// with spaces (attachment_emails/attachment_with_unquoted_name.eml), 8-bit
// text (attachment_nonascii_filename.eml) or encoded words
// (attachment_with_base64_encoded_name.eml), and an RFC 2231 name in
// ISO-2022-JP (attachment_with_encoded_name.eml).
func lenientParams(v string) map[string]string {
	params := map[string]string{}
	parts := strings.Split(v, ";")
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		k, val = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = strings.ReplaceAll(val[1:len(val)-1], `\`, "")
		}
		if base, ok := strings.CutSuffix(k, "*"); ok {
			k, val = base, decode2231(val)
		}
		if _, seen := params[k]; !seen {
			params[k] = val
		}
	}
	return params
}

// decode2231 decodes an RFC 2231 extended value, charset'language'text.
func decode2231(v string) string {
	cs, rest, _ := strings.Cut(v, "'")
	_, text, ok := strings.Cut(rest, "'")
	if !ok {
		return v
	}
	if u, err := url.PathUnescape(text); err == nil {
		text = u
	}
	r, _ := charsetReader(cs, strings.NewReader(text))
	b, _ := io.ReadAll(r)
	return string(b)
}
