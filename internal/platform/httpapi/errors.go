package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/platform/apperr"
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

// kindStatus is the one place where an outcome becomes an HTTP status.
var kindStatus = map[apperr.Kind]int{
	apperr.KindInternal:         http.StatusInternalServerError,
	apperr.KindInvalid:          http.StatusBadRequest,
	apperr.KindUnauthenticated:  http.StatusUnauthorized,
	apperr.KindForbidden:        http.StatusForbidden,
	apperr.KindNotFound:         http.StatusNotFound,
	apperr.KindMethodNotAllowed: http.StatusMethodNotAllowed,
	apperr.KindConflict:         http.StatusConflict,
	apperr.KindTooLarge:         http.StatusRequestEntityTooLarge,
	apperr.KindUnsupportedMedia: http.StatusUnsupportedMediaType,
	apperr.KindUnprocessable:    http.StatusUnprocessableEntity,
	apperr.KindRateLimited:      http.StatusTooManyRequests,
	apperr.KindNotImplemented:   http.StatusNotImplemented,
	apperr.KindUpstream:         http.StatusBadGateway,
	apperr.KindUnavailable:      http.StatusServiceUnavailable,
	apperr.KindTimeout:          http.StatusGatewayTimeout,
}

// StatusOf is the HTTP status that answers e.
func StatusOf(e *apperr.Error) int {
	if s, ok := kindStatus[e.Kind]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// kindOf is the kind of an error status that huma or the router produce themselves.
func kindOf(status int) apperr.Kind {
	for k, s := range kindStatus {
		if s == status {
			return k
		}
	}
	if status == http.StatusRequestTimeout {
		return apperr.KindInvalid
	}
	return apperr.KindInternal
}

// apiError adapts *apperr.Error to what huma writes: status, headers, JSON body.
type apiError struct{ err *apperr.Error }

func (e apiError) Error() string                { return e.err.Error() }
func (e apiError) GetStatus() int               { return StatusOf(e.err) }
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

// MaxDetails bounds the details of an error answer: beyond it, one last entry says how many
// more there were, so that an answer to a huge invalid body stays small.
const MaxDetails = 20

// maxDetailText bounds each detail's field and message, which may quote what the caller sent.
const maxDetailText = 200

func toEnvelope(e *apperr.Error) envelope {
	body := envelopeBody{Code: e.Code, Message: clip(e.Message, 4*maxDetailText)}
	details := e.Details
	if len(details) > MaxDetails {
		details = details[:MaxDetails-1]
	}
	for _, d := range details {
		body.Details = append(body.Details, apperr.Detail{Field: clip(d.Field, maxDetailText), Message: clip(d.Message, maxDetailText)})
	}
	if n := len(e.Details) - len(details); n > 0 {
		body.Details = append(body.Details, apperr.Detail{Field: "", Message: "and " + strconv.Itoa(n) + " more"})
	}
	return envelope{Error: body}
}

// clip cuts s to at most max bytes, on a rune boundary, marking the cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// codeForStatus names the generic code of a status that huma or the router produce themselves.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestTimeout:
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
	return &apperr.Error{Kind: apperr.KindInternal, Code: apperr.CodeInternal,
		Message: "internal error; the request ID in X-Request-Id identifies it in the server log"}
}

// newHumaError replaces huma.NewError so that every error huma raises itself (validation,
// unparsable bodies, oversized bodies) takes the envelope. Validation (huma's 422) becomes
// 400 VALIDATION_ERROR with one detail per failing field, without echoing the value. An
// *apperr.Error among errs (the input policy's refusal, met while huma read the body) is the
// answer as it is.
func newHumaError(status int, msg string, errs ...error) huma.StatusError {
	for _, err := range errs {
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return apiError{ae}
		}
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	if status >= 500 {
		return apiError{internalError()}
	}
	if status == http.StatusUnsupportedMediaType {
		return apiError{&apperr.Error{Kind: apperr.KindUnsupportedMedia, Code: codeForStatus(status),
			Message: "send a JSON body with Content-Type: application/json"}}
	}
	e := &apperr.Error{Kind: kindOf(status), Code: codeForStatus(status), Message: msg}
	if status == http.StatusRequestEntityTooLarge {
		e.Message = "request body too large"
	}
	for _, err := range errs {
		if err == nil {
			continue
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
	w.WriteHeader(StatusOf(e))
	_ = json.NewEncoder(w).Encode(toEnvelope(e))
}
