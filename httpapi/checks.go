package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/mailsink/mailsink/internal/checks"
)

// emailCheck answers GET /v1/emails/{emailId}/checks/{check}: the result
// of the check (html, links, spam or auth) of the email, kept with it or
// run now (package checks); refresh=1 runs it again. A check can take
// longer than a store call (a link check fetches up to 100 URLs), so it
// is bounded by its own timeouts and the request's, not StoreTimeout.
func (a *API) emailCheck(w http.ResponseWriter, r *http.Request) {
	id, ok := emailID(w, r)
	if !ok {
		return
	}
	name := mux.Vars(r)["check"]
	if !checks.Known(name) || a.cfg.Checks == nil {
		writeMessage(w, http.StatusNotFound, "no such check: the checks are html, links, spam and auth")
		return
	}
	v := newValidationError()
	refresh := false
	switch q := r.URL.Query(); q.Get("refresh") {
	case "", "0", "false":
	case "1", "true":
		refresh = true
	default:
		v.field("refresh", "must be 1 or 0 (true or false)")
	}
	if !v.empty() {
		writeValidation(w, v)
		return
	}
	result, err := a.cfg.Checks.Result(r.Context(), accountOf(r).ID, id, name, refresh)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write(append(result, '\n'))
}
