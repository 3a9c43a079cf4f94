package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/mailsink/mailsink/store"
)

// validationError is the API's validation error body (OpenAPI: ValidationErrorResponse).
type validationError struct {
	FormErrors  []string            `json:"formErrors"`
	FieldErrors map[string][]string `json:"fieldErrors"`
}

func newValidationError() *validationError {
	return &validationError{FormErrors: []string{}, FieldErrors: map[string][]string{}}
}

func (v *validationError) form(msg string) { v.FormErrors = append(v.FormErrors, msg) }

func (v *validationError) field(name, msg string) {
	v.FieldErrors[name] = append(v.FieldErrors[name], msg)
}

func (v *validationError) empty() bool {
	return len(v.FormErrors) == 0 && len(v.FieldErrors) == 0
}

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[store.Code]int{
	store.Invalid:       http.StatusBadRequest,
	store.NotFound:      http.StatusNotFound,
	store.Conflict:      http.StatusConflict,
	store.Unavailable:   http.StatusServiceUnavailable,
	store.TooLarge:      http.StatusRequestEntityTooLarge,
	store.Full:          http.StatusInsufficientStorage,
	store.QuotaExceeded: http.StatusTooManyRequests,
	store.Busy:          http.StatusServiceUnavailable,
	store.Upstream:      http.StatusBadGateway,
	store.Internal:      http.StatusInternalServerError,
}

// clientMessage is what a client is told for each code when the error has
// no message of its own.
var clientMessage = map[store.Code]string{
	store.NotFound:      "email not found",
	store.Conflict:      "conflict",
	store.Unavailable:   "store unavailable, try again",
	store.TooLarge:      "request body too large",
	store.Full:          "storage is full: nothing was stored; delete emails or try again later",
	store.QuotaExceeded: "the account's storage quota is used up: delete emails or wait for retention",
	store.Busy:          "busy: try again in a moment",
	store.Upstream:      "the upstream server failed",
	store.Internal:      "internal error",
}

// busyRetryAfter is the Retry-After of a Busy answer, in seconds: reads
// of large emails take about a second each.
const busyRetryAfter = "2"

// ended is the error of a request whose context ended (its store timeout,
// or the client gone): answered 503, as the store timing out would be.
func ended(err error) error {
	return store.Wrap(store.Unavailable, err, "the request took too long: try again")
}

// storeMessage is what a client is told of err: its own message, but for
// an internal error, else its code's.
func storeMessage(err error) string {
	code := store.CodeOf(err)
	var e *store.Error
	if errors.As(err, &e) && e.Msg != "" && code != store.Internal {
		return e.Msg
	}
	return clientMessage[code]
}

// writeError answers err with the status of its code and the matching
// envelope. Only internal errors are logged with their cause.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	code := store.CodeOf(err)
	status := statusOf[code]
	msg := storeMessage(err)
	switch code {
	case store.Invalid:
		v := newValidationError()
		v.form(msg)
		writeJSON(w, status, map[string]any{"error": v})
		return
	case store.Internal:
		log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	case store.Unavailable, store.Full:
		log.Warn("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case store.Upstream:
		log.Warn("upstream failed", "method", r.Method, "path", r.URL.Path, "err", err)
	case store.Busy:
		w.Header().Set("Retry-After", busyRetryAfter)
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeValidation(w http.ResponseWriter, v *validationError) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": v})
}

// writeRefusal answers status with msg: a 400 in the validation envelope,
// as every 400 of the API, with msg its one form error; another status with
// {"error": msg}.
func writeRefusal(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusBadRequest {
		v := newValidationError()
		v.form(msg)
		writeValidation(w, v)
		return
	}
	writeMessage(w, status, msg)
}

func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
