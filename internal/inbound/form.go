package inbound

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
)

// form is a decoded form body: fields and uploaded files.
type form struct {
	values url.Values
	files  map[string]*file
}

// file is one uploaded file of a multipart form.
type file struct {
	Filename    string
	ContentType string
	Data        []byte
}

func (f *form) get(name string) string { return f.values.Get(name) }

// parseForm decodes a multipart/form-data or
// application/x-www-form-urlencoded body of at most maxParts fields and
// files.
func parseForm(contentType string, body []byte, maxParts int) (*form, error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, refuse(Malformed, "the Content-Type %q is not a form (multipart/form-data or application/x-www-form-urlencoded)", contentType)
	}
	f := &form{values: url.Values{}, files: map[string]*file{}}
	switch mediaType {
	case "application/x-www-form-urlencoded":
		if n := bytes.Count(body, []byte("&")) + 1; n > maxParts {
			return nil, refuse(Malformed, "the form has %d fields, more than the %d accepted", n, maxParts)
		}
		if f.values, err = url.ParseQuery(string(body)); err != nil {
			return nil, refuse(Malformed, "the form body does not decode: %v", err)
		}
		return f, nil
	case "multipart/form-data":
	default:
		return nil, refuse(Malformed, "the Content-Type %q is not a form (multipart/form-data or application/x-www-form-urlencoded)", mediaType)
	}
	if params["boundary"] == "" {
		return nil, refuse(Malformed, "the multipart Content-Type has no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for n := 0; ; n++ {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return nil, refuse(Malformed, "the multipart form does not decode: %v", err)
		}
		if n >= maxParts {
			return nil, refuse(Malformed, "the form has more than the %d fields and files accepted", maxParts)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, refuse(Malformed, "the multipart form does not decode: %v", err)
		}
		name := p.FormName()
		if name == "" {
			continue
		}
		if p.FileName() != "" {
			f.files[name] = &file{Filename: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data}
			continue
		}
		// A text field sent as a file part without a file name (some
		// clients do this for body-mime) is a value all the same.
		f.values.Add(name, string(data))
	}
}

// formValue is a field that may come as a value or as a file.
func (f *form) formValue(name string) (string, bool) {
	if v, ok := f.values[name]; ok && len(v) > 0 {
		return v[0], true
	}
	if fl, ok := f.files[name]; ok {
		return string(fl.Data), true
	}
	return "", false
}

// mediaTypeOf is the media type of a Content-Type header, lower case.
func mediaTypeOf(ct string) string {
	mt, _, _ := mime.ParseMediaType(ct)
	return strings.ToLower(mt)
}

// rawOrComposed is the message of a form that carries either the raw MIME
// in the field raw (when the provider is set to send it) or the parsed
// parts that parts reads, composed into MIME within lim.
func (f *form) rawOrComposed(raw string, parts func(*form) (*Parts, error), lim Limits) ([]byte, error) {
	if v, ok := f.formValue(raw); ok {
		if strings.TrimSpace(v) == "" {
			return nil, refuse(Malformed, "%s (the raw message) is empty", raw)
		}
		return []byte(v), nil
	}
	p, err := parts(f)
	if err != nil {
		return nil, err
	}
	if lim.MaxMessageBytes > 0 && p.Size() > lim.MaxMessageBytes {
		return nil, refuse(Malformed, "the message is %d bytes, over the limit of %d", p.Size(), lim.MaxMessageBytes)
	}
	return Compose(p), nil
}
