// Package apperr is the one error type that crosses from services to the HTTP edge. A
// service returns an *Error for every outcome a caller should see (not found, conflict,
// validation, refusal); anything else is an internal error that the edge logs and hides.
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

// Detail names one field that failed validation.
type Detail struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an outcome the caller is told about, with its HTTP status and spec code.
type Error struct {
	Status  int
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
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// Invalid is a 400 about one field.
func Invalid(field, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeValidation, Message: "validation failed",
		Details: []Detail{{Field: field, Message: message}}}
}

// BadRequest is a 400 with the given code and message and no field details.
func BadRequest(code, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: message}
}

// Unauthorized is a 401.
func Unauthorized(message string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: message}
}

// Forbidden is a 403 with the generic code.
func Forbidden(message string) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: message}
}

// ForbiddenCode is a 403 with a specific code.
func ForbiddenCode(code, message string) *Error {
	return &Error{Status: http.StatusForbidden, Code: code, Message: message}
}

// MFARequired is the 403 of a tenancy-mutating write without an MFA-completed session.
func MFARequired() *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeMFARequired, Message: "MFA required"}
}

// Conflict is a 409 with the generic code.
func Conflict(message string) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: message}
}

// ConflictCode is a 409 with a specific code.
func ConflictCode(code, message string) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: message}
}

// RateLimited is a 429 telling the caller when to come back.
func RateLimited(retryAfter time.Duration) *Error {
	if retryAfter < time.Second {
		retryAfter = time.Second
	}
	return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited,
		Message: "too many requests; retry later", RetryAfter: retryAfter}
}
