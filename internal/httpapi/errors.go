package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/apperr"
)

// envelope is the error body of §7: {"error": {"code", "message", "details"?}}.
type envelope struct {
	Error envelopeBody `json:"error"`
}

type envelopeBody struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details []apperr.Detail `json:"details,omitempty"`
}

// apiError adapts *apperr.Error to what huma writes: status, headers, JSON body.
type apiError struct{ err *apperr.Error }

func (e apiError) Error() string                { return e.err.Error() }
func (e apiError) GetStatus() int               { return e.err.Status }
func (e apiError) ContentType(string) string    { return "application/json" }
func (e apiError) MarshalJSON() ([]byte, error) { return json.Marshal(toEnvelope(e.err)) }
func (e apiError) GetHeaders() http.Header {
	h := e.err.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if e.err.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.err.RetryAfter+time.Second-1)/time.Second)))
	}
	return h
}

func toEnvelope(e *apperr.Error) envelope {
	return envelope{Error: envelopeBody{Code: e.Code, Message: e.Message, Details: e.Details}}
}

// codeForStatus names the generic code of a status that huma or the mux produce themselves.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return apperr.CodeValidation
	case http.StatusUnauthorized:
		return apperr.CodeUnauthorized
	case http.StatusForbidden:
		return apperr.CodeForbidden
	case http.StatusNotFound:
		return apperr.CodeNotFound
	case http.StatusMethodNotAllowed:
		return apperr.CodeMethod
	case http.StatusConflict:
		return apperr.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return apperr.CodeTooLarge
	case http.StatusTooManyRequests:
		return apperr.CodeRateLimited
	case http.StatusUnsupportedMediaType:
		return "UNSUPPORTED_MEDIA_TYPE"
	case http.StatusNotAcceptable:
		return "NOT_ACCEPTABLE"
	}
	if status >= 500 {
		return apperr.CodeInternal
	}
	return "ERROR"
}

// internalError is the only thing a caller learns about an unexpected failure.
func internalError() *apperr.Error {
	return &apperr.Error{Status: http.StatusInternalServerError, Code: apperr.CodeInternal,
		Message: "internal error; the request ID in X-Request-Id identifies it in the server log"}
}

// newHumaError replaces huma.NewError so that every error huma raises itself (validation,
// unparsable bodies, oversized bodies) takes the envelope. Validation (huma's 422) becomes
// 400 VALIDATION_ERROR with one detail per failing field, without echoing the value.
func newHumaError(status int, msg string, errs ...error) huma.StatusError {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	if status >= 500 {
		return apiError{internalError()}
	}
	e := &apperr.Error{Status: status, Code: codeForStatus(status), Message: msg}
	switch status {
	case http.StatusRequestEntityTooLarge:
		e.Message = "request body too large"
	case http.StatusUnsupportedMediaType:
		return apiError{&apperr.Error{Status: status, Code: e.Code, Message: "send a JSON body with Content-Type: application/json"}}
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return apiError{ae}
		}
		var d huma.ErrorDetailer
		if errors.As(err, &d) {
			detail := d.ErrorDetail()
			e.Details = append(e.Details, apperr.Detail{Field: fieldName(detail.Location), Message: detail.Message})
			continue
		}
		e.Details = append(e.Details, apperr.Detail{Field: "body", Message: err.Error()})
	}
	if e.Code == apperr.CodeValidation {
		if e.Message == "" || strings.Contains(e.Message, "validation failed") {
			e.Message = "validation failed"
		}
		if len(e.Details) == 0 {
			e.Details = []apperr.Detail{{Field: "body", Message: msg}}
		}
	}
	return apiError{e}
}

// fieldName turns huma's "body.address.city" or "query.limit" into "address.city" or "limit".
func fieldName(location string) string {
	for _, prefix := range []string{"body.", "query.", "path.", "header."} {
		if strings.HasPrefix(location, prefix) {
			return strings.TrimPrefix(location, prefix)
		}
	}
	return location
}

// WriteError answers a plain handler's request with e in the error envelope.
func WriteError(w http.ResponseWriter, e *apperr.Error) {
	ae := apiError{e}
	for k, v := range ae.GetHeaders() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(toEnvelope(e))
}
