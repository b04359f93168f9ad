package jsonenc

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrMissing is DecodeStrictRequired's error for an empty document.
var ErrMissing = errors.New("payload is missing")

// DecodeStrict decodes the JSON value raw starts with into v, and fails on a member that v
// has no field for, so a misspelt option is an error instead of being ignored. The errors
// are encoding/json's own (empty input is io.EOF); what follows the first value is not read.
func DecodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// DecodeStrictRequired is DecodeStrict for a document that must be sent: empty input is
// ErrMissing.
func DecodeStrictRequired(raw []byte, v any) error {
	if len(raw) == 0 {
		return ErrMissing
	}
	return DecodeStrict(raw, v)
}
