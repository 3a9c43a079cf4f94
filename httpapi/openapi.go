package httpapi

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDocument describes every endpoint (scripts/openapi_gen.py writes
// it); the tests validate real responses against it so that it cannot drift.
//
//go:embed openapi.json
var openAPIDocument []byte

func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
