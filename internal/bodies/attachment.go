package bodies

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/mailsink/mailsink/internal/mailparse"
)

// ServeAttachment answers the index-th attachment (from 0, as in
// Body.Attachments) of raw as a download, for the API and the dashboard
// alike: its media type, a Content-Disposition with its file name, a
// Content-Security-Policy that never lets a browser render it as a page of
// this origin, and its decoded content, streamed as raw is read (no
// parse of the whole message, no copy of the content). It reports false,
// with nothing written, when raw has no such attachment or ctx ended
// first; n is then how many attachments raw has.
func ServeAttachment(ctx context.Context, w http.ResponseWriter, raw []byte, index int) (n int, found bool) {
	return mailparse.OpenAttachment(ctx, raw, index, func(att mailparse.Attachment, content io.Reader) {
		ctype := "application/octet-stream"
		if att.ContentType != nil {
			if mt, params, err := mime.ParseMediaType(*att.ContentType); err == nil {
				ctype = mime.FormatMediaType(mt, params)
			}
		}
		name := "attachment-" + strconv.Itoa(index)
		if att.Filename != nil && *att.Filename != "" {
			name = *att.Filename
		}
		disposition := mime.FormatMediaType("attachment", map[string]string{"filename": name})
		if disposition == "" {
			disposition = "attachment"
		}
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Content-Disposition", disposition)
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, content)
	})
}
