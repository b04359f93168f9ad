package audit

import (
	"encoding/json"
	"reflect"
)

// Diff summarizes a change for the audit log: for every top-level JSON field that differs
// between before and after, {"from": old, "to": new}.
func Diff(before, after any) map[string]any {
	b, a := asMap(before), asMap(after)
	out := map[string]any{}
	for k, v := range a {
		if k == "updatedAt" {
			continue
		}
		if old, ok := b[k]; !ok || !reflect.DeepEqual(old, v) {
			out[k] = map[string]any{"from": b[k], "to": v}
		}
	}
	return map[string]any{"changes": out}
}

// Snapshot is the details of a created or deleted resource: its JSON fields.
func Snapshot(v any) map[string]any { return map[string]any{"resource": asMap(v)} }

func asMap(v any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}
