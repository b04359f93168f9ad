package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// EncodeStrings renders a list of strings for a JSON column; nil is an empty list.
func EncodeStrings(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

// EncodeJSON renders v for a JSON column. What is stored is plain data (strings, numbers,
// lists and objects of them), so a value that does not encode is a bug: it panics.
func EncodeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T for a JSON column: %v", v, err))
	}
	return string(b)
}

// EncodeJSONOrNull is EncodeJSON for a nullable column: nil, or a value that encodes as
// JSON null (a nil pointer, slice or map), is SQL NULL.
func EncodeJSONOrNull(v any) any {
	s := EncodeJSON(v)
	if s == "null" {
		return nil
	}
	return s
}

// DecodeStrings reads a JSON list of strings; JSON null is an empty list, never nil.
func DecodeStrings(raw string) ([]string, error) {
	out := []string{}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// QueryStrings runs a query of one text column and returns its values in row order.
func QueryStrings(ctx context.Context, q Querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
