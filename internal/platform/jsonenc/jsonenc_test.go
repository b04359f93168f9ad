package jsonenc_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"gale/internal/platform/jsonenc"
	"gale/internal/platform/jsonenc/jsonenctest"
)

var samples = []string{"", "host-01", `quote " and \ back`, "<a href='x'>&amp;</a>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "Büro-PC ünïcödé 日本", "line\u2028sep\u2029par", "bad \xff\xfe utf8 \xc3", "emoji 🚀"}

func TestStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		if got, want := string(jsonenc.String(nil, s)), jsonenctest.Encode(t, s); got != want {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	}
	if got, want := string(jsonenc.Strings(nil, samples)), jsonenctest.Encode(t, samples); got != want {
		t.Errorf("Strings = %s, want %s", got, want)
	}
	if got := string(jsonenc.Strings(nil, nil)); got != "null" {
		t.Errorf("Strings(nil) = %s, want null", got)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(jsonenc.String(nil, s)), jsonenctest.Encode(t, s); got != want {
			t.Fatalf("String(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 12.5, 99.99, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e22, -3e-8,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1 + 0.2, 123456789.123} {
		got, err := jsonenc.Float(nil, f)
		if want := jsonenctest.Encode(t, f); err != nil || string(got) != want {
			t.Errorf("Float(%v) = %s, %v; want %s", f, got, err, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := jsonenc.Float(nil, f); err == nil {
			t.Errorf("Float(%v): want an error, as encoding/json gives", f)
		}
	}
}

func TestTimeMatchesEncodingJSON(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 11, 23, 15, 49, 42, 123456000, time.UTC),
		time.Date(2026, 11, 23, 15, 49, 42, 0, time.UTC),
		time.Date(2026, 11, 23, 15, 49, 42, 1, time.FixedZone("x", -5*3600-30*60)),
		time.Date(2026, 1, 2, 3, 4, 5, 100, time.UTC),
		time.Date(999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 6, 30, 0, 0, 0, 500000000, time.UTC),
		time.Date(2026, 6, 30, 12, 0, 0, 0, time.FixedZone("UTC", 0)),
		{},
	} {
		got, err := jsonenc.Time(nil, at)
		if want := jsonenctest.Encode(t, at); err != nil || string(got) != want {
			t.Errorf("Time(%v) = %s, %v; want %s", at, got, err, want)
		}
	}
	if _, err := jsonenc.Time(nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("Time(year 10000): want an error, as encoding/json gives")
	}
	if got, _ := jsonenc.TimePtr(nil, nil); string(got) != "null" {
		t.Errorf("TimePtr(nil) = %s, want null", got)
	}
}

func FuzzTime(f *testing.F) {
	f.Add(int64(1795448982), int64(123456000))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		at := time.Unix(sec%253402300800, nsec%1_000_000_000).UTC()
		got, err := jsonenc.Time(nil, at)
		if want, werr := json.Marshal(at); (err == nil) != (werr == nil) || (err == nil && string(got) != string(want)) {
			t.Fatalf("Time(%v) = %s, %v; want %s, %v", at, got, err, want, werr)
		}
	})
}

func TestKeysAndValues(t *testing.T) {
	n := 7
	s := "<b>"
	b := append([]byte(nil), '{')
	b = jsonenc.IntPtr(jsonenc.Key(b, "n"), &n)
	b = jsonenc.IntPtr(jsonenc.Key(b, "none"), nil)
	b = jsonenc.StringPtr(jsonenc.Key(b, "s"), &s)
	b = jsonenc.Bool(jsonenc.Key(b, "ok"), true)
	b, err := jsonenc.Value(jsonenc.Key(b, "v"), map[string]string{"a": "<&>"})
	b = append(b, '}')
	want := `{"n":7,"none":null,"s":"<b>","ok":true,"v":{"a":"<&>"}}`
	if err != nil || string(b) != want {
		t.Errorf("got %s, %v; want %s", b, err, want)
	}
}

func TestNonNil(t *testing.T) {
	var none []string
	if b, _ := json.Marshal(jsonenc.NonNil(none)); string(b) != "[]" {
		t.Errorf("NonNil(nil) encodes as %s, want []", b)
	}
	if got := jsonenc.NonNil([]int{1, 2}); len(got) != 2 || got[1] != 2 {
		t.Errorf("NonNil([1 2]) = %v, want it unchanged", got)
	}
}
