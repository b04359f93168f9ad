package store

import (
	"context"
	"encoding/json"
)

// EncodeStrings renders a list of strings for a JSON column; nil is an empty list.
func EncodeStrings(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
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
