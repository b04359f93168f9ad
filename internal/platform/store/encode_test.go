package store_test

import (
	"testing"

	"gale/internal/platform/store"
)

func TestAssignAppliesOnlyWhatWasSent(t *testing.T) {
	name, other := "before", "after"
	store.Assign(&name, nil)
	if name != "before" {
		t.Errorf("Assign(nil) changed the field to %q", name)
	}
	store.Assign(&name, &other)
	if name != "after" {
		t.Errorf("Assign(&%q) = %q", other, name)
	}
}

func TestEncodeJSON(t *testing.T) {
	var nilMap map[string]int
	var nilPtr *struct{ A int }
	for _, c := range []struct {
		name   string
		v      any
		text   string
		orNull any
	}{
		{"list", []string{"a", "b"}, `["a","b"]`, `["a","b"]`},
		{"object", map[string]int{"a": 1}, `{"a":1}`, `{"a":1}`},
		{"nil", nil, "null", nil},
		{"nil map", nilMap, "null", nil},
		{"nil pointer", nilPtr, "null", nil},
		{"empty list", []string{}, "[]", "[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := store.EncodeJSON(c.v); got != c.text {
				t.Errorf("EncodeJSON(%#v) = %q, want %q", c.v, got, c.text)
			}
			if got := store.EncodeJSONOrNull(c.v); got != c.orNull {
				t.Errorf("EncodeJSONOrNull(%#v) = %#v, want %#v", c.v, got, c.orNull)
			}
		})
	}
}

func TestEncodeJSONPanicsOnAValueThatIsNotData(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("EncodeJSON(a channel) returned; want a panic")
		}
	}()
	store.EncodeJSON(make(chan int))
}
