package inbound

import (
	"bufio"
	"encoding/json"
	"net/textproto"
	"strconv"
	"strings"
)

// SendGrid reads a request of SendGrid's Inbound Parse webhook: a
// multipart form with the raw MIME in email (when "POST the raw, full MIME
// message" is on), else the parsed fields (headers, text, html, from, to,
// cc, subject, attachment-info and the attachmentN files). The envelope
// comes in the JSON field envelope ({"to": [...], "from": "..."}).
// SendGrid sends no delivery id, so the Delivery has none. Its errors are
// *Error.
func SendGrid(contentType string, body []byte, lim Limits) (*Delivery, error) {
	if mt := mediaTypeOf(contentType); mt != "multipart/form-data" {
		return nil, refuse(Malformed, "Inbound Parse posts multipart/form-data, not %q", contentType)
	}
	f, err := parseForm(contentType, body, lim.maxParts())
	if err != nil {
		return nil, err
	}
	d := &Delivery{}
	if env := f.get("envelope"); env != "" {
		var e struct {
			To   []string `json:"to"`
			From string   `json:"from"`
		}
		if err := json.Unmarshal([]byte(env), &e); err != nil {
			return nil, refuse(Malformed, `envelope is not JSON like {"to": ["a@example.com"], "from": "b@example.com"}: %v`, err)
		}
		d.Sender, d.Recipients = strings.TrimSpace(e.From), e.To
	}
	if raw, ok := f.formValue("email"); ok {
		if strings.TrimSpace(raw) == "" {
			return nil, refuse(Malformed, "email (the raw message) is empty")
		}
		d.Raw = []byte(raw)
		return d, nil
	}
	p, err := sendGridParts(f)
	if err != nil {
		return nil, err
	}
	if lim.MaxMessageBytes > 0 && p.Size() > lim.MaxMessageBytes {
		return nil, refuse(Malformed, "the message is %d bytes, over the limit of %d", p.Size(), lim.MaxMessageBytes)
	}
	d.Raw = Compose(p)
	return d, nil
}

func sendGridParts(f *form) (*Parts, error) {
	p := &Parts{From: f.get("from"), To: f.get("to"), Cc: f.get("cc"), Subject: f.get("subject"),
		Text: f.get("text"), HTML: f.get("html")}
	if h := f.get("headers"); h != "" {
		// headers is the message's header block as received.
		r := textproto.NewReader(bufio.NewReader(strings.NewReader(strings.TrimRight(h, "\r\n") + "\r\n\r\n")))
		for {
			line, err := r.ReadContinuedLine()
			if err != nil || line == "" {
				break
			}
			if name, value, ok := strings.Cut(line, ":"); ok {
				p.Header = append(p.Header, Field{name, strings.TrimSpace(value)})
			}
		}
	}
	if len(p.Header) == 0 && p.From == "" && p.Text == "" && p.HTML == "" {
		return nil, refuse(Malformed, "the request has neither email (the raw message) nor the parsed message (headers, from, text, html): is this an Inbound Parse post?")
	}
	var info map[string]struct {
		Filename  string `json:"filename"`
		Name      string `json:"name"`
		Type      string `json:"type"`
		ContentID string `json:"content-id"`
	}
	if s := f.get("attachment-info"); s != "" {
		if err := json.Unmarshal([]byte(s), &info); err != nil {
			return nil, refuse(Malformed, "attachment-info is not a JSON object: %v", err)
		}
	}
	for i := 1; ; i++ {
		name := "attachment" + strconv.Itoa(i)
		fl, ok := f.files[name]
		if !ok {
			if _, described := info[name]; described {
				return nil, refuse(Malformed, "%s is described in attachment-info but not sent", name)
			}
			break
		}
		a := Attachment{Filename: fl.Filename, ContentType: fl.ContentType, Content: fl.Data}
		if in, ok := info[name]; ok {
			a.Filename = firstNonEmpty(in.Filename, in.Name, a.Filename)
			a.ContentType = firstNonEmpty(in.Type, a.ContentType)
			a.ContentID = in.ContentID
		}
		p.Attachments = append(p.Attachments, a)
	}
	return p, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
