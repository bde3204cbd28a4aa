// Package desk holds what every part of Handoff Desk shares: the short vocabulary of errors that
// the domain packages return and the HTTP layer maps to status codes in one place.
package desk

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Error codes. Only Internal errors are logged; the message of the others is safe to show.
const (
	Conflict     = "conflict"               // the request clashes with current state (409)
	Internal     = "internal"               // a bug or an outage; the text never reaches the client (500)
	Invalid      = "invalid"                // the input breaks a rule (422)
	NotFound     = "not_found"              // nothing there, or nothing the caller may see (404)
	Unauthorized = "unauthorized"           // no valid credentials (401)
	Forbidden    = "forbidden"              // credentials valid, action not allowed (403)
	RateLimited  = "rate_limited"           // a guard refuses for now; retry later (429)
	Unavailable  = "unavailable"            // the desk cannot take it right now (503)
	TooLarge     = "too_large"              // the body is over the limit (413)
	BadRequest   = "bad_request"            // the request cannot be read at all (400)
	Unsupported  = "unsupported_media_type" // the body's media type or encoding is not one we read (415)
)

// Error is an application error with a code the caller can act on and a message a person can read.
type Error struct {
	Code    string
	Message string
	// Reason names the cause within the code for machines, e.g. "contact_hourly_limit".
	Reason string
	// RetryAfter tells a refused caller when trying again can succeed (RateLimited, Unavailable).
	RetryAfter time.Duration
	// Details are extra facts for the caller, e.g. {"open_handoff_id": "ho_1"}.
	Details map[string]string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of an application error, or Internal for anything else.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrorMessage returns the message of an application error; other errors get a generic text so
// that internal details never leak to clients.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// Fields collects what is wrong with a form, field by field, so that one answer names every bad
// field at once, as the API's 422 does. Err is an Invalid error whose Details map each bad field
// to its complaint, for a form to show beside the field.
type Fields map[string]string

// Add records a complaint about field; the first one about a field is kept.
func (f Fields) Add(field, format string, args ...any) {
	if _, ok := f[field]; !ok {
		f[field] = fmt.Sprintf(format, args...)
	}
}

// Err returns nil when no field is bad; otherwise an Invalid error naming each bad field.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(f))
	if len(names) == 1 {
		return &Error{Code: Invalid, Message: f[names[0]], Details: f}
	}
	complaints := make([]string, len(names))
	for i, name := range names {
		complaints[i] = f[name]
	}
	return &Error{Code: Invalid, Message: fmt.Sprintf("%d fields are invalid: %s", len(names), strings.Join(complaints, "; ")), Details: f}
}

// FieldsOf returns what an error says about a form's fields (Fields.Err's, or a Conflict's that
// names the field it clashes on), or nil.
func FieldsOf(err error) map[string]string {
	var e *Error
	if errors.As(err, &e) {
		return e.Details
	}
	return nil
}
