package httpapi

import (
	"net/http"

	"github.com/mailsink/mailsink/store"
)

// emailTranscript answers {"item": transcript}: the SMTP transaction that
// delivered the email, or null for an email that came over HTTP. What AUTH
// carried is redacted here too: earlier releases stored the user name.
func (a *API) emailTranscript(w http.ResponseWriter, r *http.Request) {
	id, ok := emailID(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.storeContext(r)
	defer cancel()
	read, err := a.cfg.Bodies.Raw(ctx, accountOf(r).ID, id)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	defer read.Close()
	writeJSON(w, http.StatusOK, map[string]*store.Transcript{"item": read.Body.Transcript.WithoutCredentials()})
}
