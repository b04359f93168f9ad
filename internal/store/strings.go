package store

import "encoding/json"

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
