// Package apperr is the one error type that crosses from services to the HTTP edge. A
// service returns an *Error for every outcome a caller should see (not found, conflict,
// validation, refusal); anything else is an internal error that the edge logs and hides.
//
// An Error names its Kind, not an HTTP status: services say what happened, and httpapi alone
// decides how that is answered. Errors that are not *Error should be wrapped with context on
// their way up (fmt.Errorf("load site %s: %w", id, err)) so that the log line of a 500 says
// where it came from; an *Error inside such a wrapping is still found by As.
package apperr

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Codes used across the API. Domain-specific codes named by the spec are spelled where they
// are raised, exactly as the spec spells them.
const (
	CodeValidation   = "VALIDATION_ERROR"
	CodeUnauthorized = "UNAUTHORIZED"
	CodeForbidden    = "FORBIDDEN"
	CodeMFARequired  = "MFA_REQUIRED"
	CodeNotFound     = "NOT_FOUND"
	CodeConflict     = "CONFLICT"
	CodeRateLimited  = "RATE_LIMITED"
	CodeTooLarge     = "PAYLOAD_TOO_LARGE"
	CodeMethod       = "METHOD_NOT_ALLOWED"
	CodeInternal     = "INTERNAL"
)

// Kind is what kind of outcome an error is. httpapi maps each kind to its HTTP status.
type Kind uint8

// The kinds of outcome a caller is told about. The zero Kind is KindInternal: an Error nobody
// classified is hidden like any unexpected failure.
const (
	KindInternal Kind = iota
	// KindInvalid: the request is malformed or breaks a rule of its fields (400).
	KindInvalid
	// KindUnauthenticated: no credential, or one that is refused (401).
	KindUnauthenticated
	// KindForbidden: the caller is known but may not do this (403).
	KindForbidden
	// KindNotFound: the resource does not exist or is outside the caller's scope (404).
	KindNotFound
	// KindMethodNotAllowed: the path exists, the method does not (405).
	KindMethodNotAllowed
	// KindConflict: the resource's state forbids the change, or another caller won a race (409).
	KindConflict
	// KindTooLarge: the request body exceeds its limit (413).
	KindTooLarge
	// KindUnsupportedMedia: the body is not of a type the operation reads (415).
	KindUnsupportedMedia
	// KindUnprocessable: the request is well formed but cannot be honoured as sent, such as an
	// idempotency key reused with another body (422).
	KindUnprocessable
	// KindRateLimited: the caller must wait (429, with Retry-After).
	KindRateLimited
	// KindNotImplemented: the operation is declared but the server cannot carry it out yet,
	// such as one that needs a domain this server does not have (501).
	KindNotImplemented
	// KindUpstream: a party the server relies on (a device's agent, a mail server) failed (502).
	KindUpstream
	// KindUnavailable: the server or a device cannot take the request now (503).
	KindUnavailable
	// KindTimeout: a party the server waited on did not answer in time (504).
	KindTimeout
)

// Detail names one field that failed validation.
type Detail struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an outcome the caller is told about, with its kind and spec code.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Details []Detail
	// RetryAfter, when set, becomes the Retry-After header (429).
	RetryAfter time.Duration
	// Header holds further response headers (the partner API's X-RateLimit-* on a 429); nil
	// means none.
	Header http.Header
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// As returns the *Error inside err, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code string) bool {
	e, ok := As(err)
	return ok && e.Code == code
}

// NotFound is the answer for a missing resource and, identically, for one outside the
// caller's scope.
func NotFound(what string) *Error {
	return &Error{Kind: KindNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// Invalid is a validation error about one field.
func Invalid(field, message string) *Error {
	return &Error{Kind: KindInvalid, Code: CodeValidation, Message: "validation failed",
		Details: []Detail{{Field: field, Message: message}}}
}

// InvalidFields is a validation error listing several fields.
func InvalidFields(details []Detail) *Error {
	return &Error{Kind: KindInvalid, Code: CodeValidation, Message: "validation failed", Details: details}
}

// BadRequest is a validation-kind error with the given code and message and no field details.
func BadRequest(code, message string) *Error {
	return &Error{Kind: KindInvalid, Code: code, Message: message}
}

// Unauthorized is a refused or missing credential.
func Unauthorized(message string) *Error {
	return &Error{Kind: KindUnauthenticated, Code: CodeUnauthorized, Message: message}
}

// Forbidden is a refusal with the generic code.
func Forbidden(message string) *Error {
	return &Error{Kind: KindForbidden, Code: CodeForbidden, Message: message}
}

// ForbiddenCode is a refusal with a specific code.
func ForbiddenCode(code, message string) *Error {
	return &Error{Kind: KindForbidden, Code: code, Message: message}
}

// MFARequired is the refusal of an MFA-gated operation without an MFA-completed session.
func MFARequired() *Error {
	return &Error{Kind: KindForbidden, Code: CodeMFARequired, Message: "MFA required"}
}

// Conflict is a conflict with the generic code.
func Conflict(message string) *Error {
	return &Error{Kind: KindConflict, Code: CodeConflict, Message: message}
}

// ConflictCode is a conflict with a specific code.
func ConflictCode(code, message string) *Error {
	return &Error{Kind: KindConflict, Code: code, Message: message}
}

// NotImplemented is the answer of an operation the server declares but cannot carry out yet.
func NotImplemented(code, message string) *Error {
	return &Error{Kind: KindNotImplemented, Code: code, Message: message}
}

// RateLimited tells the caller when to come back.
func RateLimited(retryAfter time.Duration) *Error {
	if retryAfter < time.Second {
		retryAfter = time.Second
	}
	return &Error{Kind: KindRateLimited, Code: CodeRateLimited, Message: "too many requests; retry later", RetryAfter: retryAfter}
}
