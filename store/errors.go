package store

import (
	"errors"
	"fmt"
)

// Code classifies an error for the edges: httpapi maps it to an HTTP status
// and smtpd to an SMTP reply, each in one place.
type Code int

// Error codes. The zero value is Internal, so an unclassified error is never
// mistaken for a client mistake.
const (
	Internal      Code = iota // a bug or an unexpected failure: logged with its cause
	Invalid                   // the input is wrong: 400
	NotFound                  // no such email in the account: 404
	Conflict                  // the input clashes with stored state: 409
	Unavailable               // the backend cannot be reached now: 503 / SMTP 451
	TooLarge                  // the input is over a size limit: 413 / SMTP 552
	Full                      // the backend has no room (disk full, Redis maxmemory): 507 / SMTP 452 4.3.1
	QuotaExceeded             // the account stores as much as its quota allows: 429 / SMTP 452 4.2.2
	Busy                      // the process has no room to serve it now (the read budget): 503 with Retry-After
	Upstream                  // a configured upstream (spamd, a relay's mail server) fails or cannot be reached: 502
)

var codeNames = [...]string{"internal", "invalid", "not found", "conflict", "unavailable", "too large", "full", "quota exceeded", "busy", "upstream"}

func (c Code) String() string {
	if c < 0 || int(c) >= len(codeNames) {
		return fmt.Sprintf("code(%d)", int(c))
	}
	return codeNames[c]
}

// Error is an error with a Code. Msg is safe to show to a client; Err, the
// cause, is only logged.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Msg != "":
		return e.Msg + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Code.String() + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	}
	return e.Code.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a client-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with code, a client-safe message and the cause err.
// It returns nil when err is nil.
func Wrap(code Code, err error, msg string) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Msg: msg, Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, Internal when
// there is none, and -1 for a nil error.
func CodeOf(err error) Code {
	if err == nil {
		return -1
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// IsCode reports whether err carries code.
func IsCode(err error, code Code) bool {
	return err != nil && CodeOf(err) == code
}

// ErrNotFound is returned, wrapped or as is, when an email does not exist.
var ErrNotFound = &Error{Code: NotFound, Msg: "email not found"}
