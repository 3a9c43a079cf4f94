package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mailsink/mailsink/store"
)

// diffEmail returns the differences between got and want, one per line, or
// "" when there are none. Timestamps must be the same instant, in UTC.
func diffEmail(got, want *store.Email) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	var d differ
	d.str("ID", got.ID, want.ID)
	d.str("AccountID", got.AccountID, want.AccountID)
	d.ptr("MessageID", got.MessageID, want.MessageID)
	d.str("Sender", got.Sender, want.Sender)
	d.str("Recipient", got.Recipient, want.Recipient)
	d.ptr("Subject", got.Subject, want.Subject)
	d.str("Status", string(got.Status), string(want.Status))
	d.ptr("Notes", got.Notes, want.Notes)
	if got.Labels == nil || !slices.Equal(got.Labels, want.Labels) {
		d.add("Labels", fmt.Sprintf("%q (nil: %v)", got.Labels, got.Labels == nil), fmt.Sprintf("%q", want.Labels))
	}
	if got.RawSize != want.RawSize {
		d.add("RawSize", got.RawSize, want.RawSize)
	}
	d.time("ReceivedAt", got.ReceivedAt, want.ReceivedAt)
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.time("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	return d.String()
}

// diffBody is diffEmail for bodies.
func diffBody(got, want *store.Body) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	var d differ
	if !bytes.Equal(got.Raw, want.Raw) {
		d.add("Raw", abbrev(got.Raw), abbrev(want.Raw))
	}
	switch g, w := got.Given, want.Given; {
	case (g == nil) != (w == nil):
		d.add("Given", g, w)
	case g != nil:
		diffParts(&d, g, w)
	}
	if g, w := fmt.Sprintf("%+v", got.Transcript), fmt.Sprintf("%+v", want.Transcript); (got.Transcript == nil) != (want.Transcript == nil) ||
		got.Transcript != nil && transcriptString(got.Transcript) != transcriptString(want.Transcript) {
		d.add("Transcript", g, w)
	}
	return d.String()
}

// diffParts adds what differs between two bodies' given parts. Got's
// Headers and Attachments must not be nil.
func diffParts(d *differ, got, want *store.Parts) {
	d.ptr("Text", got.Text, want.Text)
	d.ptr("HTML", got.HTML, want.HTML)
	wantHeaders := want.Headers
	if wantHeaders == nil {
		wantHeaders = map[string]string{}
	}
	if got.Headers == nil || !maps.Equal(got.Headers, wantHeaders) {
		d.add("Headers", fmt.Sprintf("%q (nil: %v)", got.Headers, got.Headers == nil), fmt.Sprintf("%q", wantHeaders))
	}
	if got.Attachments == nil || len(got.Attachments) != len(want.Attachments) {
		d.add("len(Attachments)", fmt.Sprintf("%d (nil: %v)", len(got.Attachments), got.Attachments == nil), len(want.Attachments))
		return
	}
	for i := range want.Attachments {
		g, w := got.Attachments[i], want.Attachments[i]
		p := fmt.Sprintf("Attachments[%d].", i)
		d.ptr(p+"ContentID", g.ContentID, w.ContentID)
		d.ptr(p+"ContentType", g.ContentType, w.ContentType)
		d.ptr(p+"Disposition", g.Disposition, w.Disposition)
		d.ptr(p+"Filename", g.Filename, w.Filename)
		if g.Size != w.Size {
			d.add(p+"Size", g.Size, w.Size)
		}
	}
}

// transcriptString shows every field of t.
func transcriptString(t *store.Transcript) string {
	return fmt.Sprintf("%+v", *t)
}

type differ struct{ lines []string }

func (d *differ) add(field string, got, want any) {
	d.lines = append(d.lines, fmt.Sprintf("%s: got %v, want %v", field, got, want))
}

func (d *differ) str(field, got, want string) {
	if got != want {
		d.add(field, fmt.Sprintf("%q", got), fmt.Sprintf("%q", want))
	}
}

func (d *differ) ptr(field string, got, want *string) {
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil || *got != *want:
		d.add(field, showPtr(got), showPtr(want))
	}
}

func (d *differ) time(field string, got, want time.Time) {
	if !got.Equal(want) || got.Location() != time.UTC {
		d.add(field, got.Format(time.RFC3339Nano)+" "+got.Location().String(), want.Format(time.RFC3339Nano))
	}
}

func (d *differ) String() string {
	s := ""
	for _, l := range d.lines {
		s += "\n\t" + l
	}
	return s
}

func showPtr(p *string) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("&%q", *p)
}

// abbrev shows a byte string in failure messages without printing megabytes.
func abbrev(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes %q...", len(b), b[:64])
}
