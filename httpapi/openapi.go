package httpapi

import (
	"net/http"
	"strconv"
)

// openAPI serves the API contract (api/openapi.yaml) as JSON; the tests
// validate real answers against it so that it cannot drift.
func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.openAPIDocument)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.openAPIDocument)
}
