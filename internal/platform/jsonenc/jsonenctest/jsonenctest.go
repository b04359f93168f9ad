// Package jsonenctest holds a type's jsonenc.Appender to encoding/json in tests.
package jsonenctest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"gale/internal/platform/jsonenc"
)

// Fill sets every exported field of the struct ptr points to (recursively through pointers
// to structs) to a value other than its zero value, so that a field an AppendJSON forgets
// shows up in Match. seed varies the values.
func Fill(t testing.TB, ptr any, seed int) {
	t.Helper()
	fill(t, reflect.ValueOf(ptr).Elem(), seed)
}

var timeType = reflect.TypeOf(time.Time{})

func fill(t testing.TB, v reflect.Value, seed int) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		f, name := v.Field(i), v.Type().Field(i).Name
		setValue(t, f, seed+i, name)
		if f.IsZero() {
			t.Fatalf("Fill: %s.%s stayed zero", v.Type(), name)
		}
	}
}

func setValue(t testing.TB, f reflect.Value, n int, name string) {
	t.Helper()
	switch {
	case f.Type() == timeType:
		f.Set(reflect.ValueOf(time.Date(2026, 11, 23, 10, n%60, n%60, 1000*n, time.UTC)))
	case f.Type() == reflect.TypeOf(json.RawMessage(nil)):
		f.SetBytes([]byte(`{ "theme": "<dark>", "n": [1, 2.5] }`))
	case f.Kind() == reflect.String:
		f.SetString([]string{"web-01 <prod> & co", `Büro "Nord"`, "tab\there\nline", "\u2028 sep"}[n%4])
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		f.SetInt(int64(1000*n + 7))
	case f.Kind() == reflect.Float64:
		f.SetFloat([]float64{12.5, 1e-7, 3e21, 99.125}[n%4])
	case f.Kind() == reflect.Bool:
		f.SetBool(true)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		f.Set(reflect.ValueOf([]string{"critical", "<tag>"}).Convert(f.Type()))
	case f.Kind() == reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		if e := p.Elem(); e.Kind() == reflect.Struct && e.Type() != timeType {
			fill(t, e, n)
		} else {
			setValue(t, e, n, name)
		}
		f.Set(p)
	default:
		t.Fatalf("Fill: field %s of kind %s is not handled; extend jsonenctest", name, f.Kind())
	}
}

// Encode is v as the API's encoder writes it: encoding/json with HTML escaping off, without the
// trailing newline.
func Encode(t testing.TB, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
}

// Match fails t unless v's AppendJSON writes exactly what Encode writes for it.
func Match(t testing.TB, name string, v jsonenc.Appender) {
	t.Helper()
	want := Encode(t, v)
	got, err := v.AppendJSON(nil)
	if err != nil || string(got) != want {
		t.Errorf("%s: AppendJSON\n got %s (%v)\nwant %s", name, got, err, want)
	}
}
