package devices_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"gale/internal/agentproto"
	"gale/internal/devices"
	"gale/internal/httpapi"
)

// fill sets every field of the struct v points to a value other than its zero value, so that
// a field the fast encoder forgets shows up as a difference.
func fill(t *testing.T, v reflect.Value, seed int) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString([]string{"web-01 <prod>", `Büro "Nord"`, "tab\there", "\u2028x"}[(seed+i)%4])
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000*seed + i + 1))
		case reflect.Float64:
			f.SetFloat([]float64{12.5, 1e-7, 3e21, 99.125}[(seed+i)%4])
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"critical", "<tag>"}))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Date(2026, 11, 23, 10, i, seed, 1000*i, time.UTC)))
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			if p.Elem().Kind() == reflect.Struct && f.Type().Elem() != reflect.TypeOf(time.Time{}) {
				fill(t, p.Elem(), seed+i)
			} else {
				switch p.Elem().Kind() {
				case reflect.String:
					p.Elem().SetString("ptr & <value>")
				case reflect.Struct:
					p.Elem().Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600))))
				default:
					t.Fatalf("fill: unhandled pointer to %s", p.Elem().Kind())
				}
			}
			f.Set(p)
		default:
			t.Fatalf("fill: unhandled field kind %s of %s", f.Kind(), v.Type().Field(i).Name)
		}
		if f.IsZero() {
			t.Fatalf("fill: %s.%s stayed zero", v.Type(), v.Type().Field(i).Name)
		}
	}
}

func apiJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
}

// TestDeviceListJSONMatchesEncodingJSON holds the device list's own encoder to encoding/json
// byte for byte, with every field set and with the nullable ones empty.
func TestDeviceListJSONMatchesEncodingJSON(t *testing.T) {
	var full devices.Device
	fill(t, reflect.ValueOf(&full).Elem(), 1)
	bare := devices.Device{ID: "d2", Tags: []string{}, CreatedAt: time.Unix(0, 0).UTC()}
	quiet := full
	quiet.Metrics = &agentproto.Metrics{CPUPercent: 3, RAMUsedMB: 10} // load1 omitted when zero
	rows := []devices.Device{full, bare, quiet}
	next, limit, total := "cursor<&>", 50, 12345
	for name, list := range map[string]devices.DeviceList{
		"cursor":       {Devices: &rows, NextCursor: &next, Limit: &limit},
		"cursor-total": {Devices: &rows, NextCursor: &next, Limit: &limit, Total: &total},
		"empty":        {Devices: &[]devices.Device{}, NextCursor: new(string), Limit: &limit},
		"page":         {Data: &rows, Pagination: &httpapi.Pagination{HasMore: true, Page: 2, Limit: 50, Total: &total}},
	} {
		got, err := list.AppendJSON(nil)
		if want := apiJSON(t, list); err != nil || string(got) != want {
			t.Errorf("%s:\n got %s, %v\nwant %s", name, got, err, want)
		}
	}
}
