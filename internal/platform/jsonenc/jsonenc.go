// Package jsonenc holds the JSON helpers shared by the server's packages.
//
// It appends JSON without reflection, byte for byte as encoding/json writes it with HTML
// escaping off (the API's encoder). The largest responses (device lists) implement Appender
// with it; encoding/json spends most of its time there in reflection and in re-validating
// what time.Time's MarshalJSON returns. A type's tests compare its AppendJSON with
// encoding/json so the two cannot drift apart.
//
// It also decodes strictly (DecodeStrict): a document a caller sends for a fixed shape (a
// command's payload, a condition document) is refused when it names a member the shape does
// not have, rather than read as if the member were not there.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Appender is a value that appends its own JSON encoding to b.
type Appender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// Key appends a member name and its colon, after a comma unless the object is just opened.
func Key(b []byte, name string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// String appends s as a JSON string.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		var esc string
		size := 1
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				esc = `\"`
			case '\\':
				esc = `\\`
			case '\b':
				esc = `\b`
			case '\f':
				esc = `\f`
			case '\n':
				esc = `\n`
			case '\r':
				esc = `\r`
			case '\t':
				esc = `\t`
			}
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				esc = `\ufffd`
			case r == '\u2028':
				esc = `\u2028`
			case r == '\u2029':
				esc = `\u2029`
			default:
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		if esc != "" {
			b = append(b, esc...)
		} else {
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// StringPtr appends *s, or null.
func StringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return String(b, *s)
}

// Strings appends ss as an array of strings (null for a nil slice).
func Strings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, s)
	}
	return append(b, ']')
}

// Int appends n.
func Int(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// IntPtr appends *n, or null.
func IntPtr(b []byte, n *int) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	return Int(b, int64(*n))
}

// Bool appends v.
func Bool(b []byte, v bool) []byte { return strconv.AppendBool(b, v) }

// Float appends f as encoding/json formats a float64: decimal notation, exponent notation
// outside [1e-6, 1e21) with no padding of the exponent. JSON has no NaN or infinity, which
// encoding/json refuses with an error.
func Float(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-07 → e-7
		b = b[:n-1]
	}
	return b, nil
}

// Time appends t as time.Time's MarshalJSON does (RFC 3339 with nanoseconds as needed).
func Time(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, &json.UnsupportedValueError{Str: t.String()}
	}
	b = append(b, '"')
	if t.Location() != time.UTC {
		b = t.AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), nil
	}
	// The API's times are UTC: written by position, several times faster than AppendFormat.
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, 'T'), hour, 2)
	b = appendDigits(append(b, ':'), minute, 2)
	b = appendDigits(append(b, ':'), sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		width := 9
		for ns%10 == 0 {
			ns /= 10
			width--
		}
		b = appendDigits(append(b, '.'), ns, width)
	}
	return append(b, 'Z', '"'), nil
}

// appendDigits appends n zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, buf[:width]...)
}

// TimePtr appends *t, or null.
func TimePtr(b []byte, t *time.Time) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	return Time(b, *t)
}

// Value appends v: through its AppendJSON when it has one, else through encoding/json with
// HTML escaping off, as the API's encoder writes it.
func Value(b []byte, v any) ([]byte, error) {
	if a, ok := v.(Appender); ok {
		return a.AppendJSON(b)
	}
	buf := bytes.NewBuffer(b) // encodes into b's spare capacity
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Raw appends a JSON text held as json.RawMessage, compacted as encoding/json writes it.
func Raw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	if bytes.ContainsAny(raw, " \t\r\n") || !json.Valid(raw) {
		return Value(b, raw)
	}
	return append(b, raw...), nil
}

// NonNil returns l, or an empty slice when l is nil, so that it encodes as [] rather than
// null.
func NonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}
