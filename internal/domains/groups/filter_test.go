package groups

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gale/internal/platform/apperr"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time { t := now.Add(-d); return &t }

const site1 = "0190a0a0-0000-7000-8000-000000000001"

func web() *Snapshot {
	return &Snapshot{Hostname: "WEB-01.example", OSType: "linux", OSName: "Debian GNU/Linux", OSVersion: "12.5", SiteID: site1,
		Status: "online", LastSeen: ago(3 * time.Minute), Tags: []string{"prod", "web"},
		Custom: map[string]any{"tier": "gold", "rack": 4.0, "managed": true, "roles": []any{"db", "cache"}, "note": "Rack B"}}
}

func TestFilterMatches(t *testing.T) {
	mac := &Snapshot{Hostname: "mbp", OSType: "macos", Status: "offline"}
	never := &Snapshot{Hostname: "new", Status: "pending"}
	cases := []struct {
		filter string
		dev    *Snapshot
		want   bool
	}{
		{`{"all":[{"field":"tag","op":"eq","value":"prod"}]}`, web(), true},
		{`{"all":[{"field":"tag","op":"eq","value":"PROD"}]}`, web(), true},
		{`{"all":[{"field":"tag","op":"eq","value":"staging"}]}`, web(), false},
		{`{"all":[{"field":"tag","op":"neq","value":"prod"}]}`, web(), false},
		{`{"all":[{"field":"tag","op":"neq","value":"prod"}]}`, mac, true},
		{`{"all":[{"field":"tag","op":"in","value":["x","web"]}]}`, web(), true},
		{`{"all":[{"field":"tag","op":"startsWith","value":"pr"}]}`, web(), true},
		{`{"all":[{"field":"tag","op":"contains","value":"ro"}]}`, web(), true},
		{`{"all":[{"field":"tag","op":"exists"}]}`, web(), true},
		{`{"all":[{"field":"tag","op":"exists"}]}`, mac, false},
		{`{"all":[{"field":"tag","op":"exists","value":false}]}`, mac, true},
		{`{"all":[{"field":"hostname","op":"glob","value":"web-*"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"glob","value":"web-0?.example"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"glob","value":"db-*"}]}`, web(), false},
		{`{"all":[{"field":"hostname","op":"glob","value":"web-[0-9]*"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"eq","value":"web-01.EXAMPLE"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"neq","value":"web-01.example"}]}`, web(), false},
		{`{"all":[{"field":"hostname","op":"contains","value":"01.ex"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"startsWith","value":"Web"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"matches","value":"^WEB-\\d+"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"matches","value":"^web-\\d+"}]}`, web(), false},
		{`{"all":[{"field":"hostname","op":"matches","value":"(?i)^web-\\d+"}]}`, web(), true},
		{`{"all":[{"field":"hostname","op":"in","value":["a","web-01.example"]}]}`, web(), true},
		{`{"all":[{"field":"osType","op":"eq","value":"linux"}]}`, web(), true},
		{`{"all":[{"field":"osType","op":"eq","value":"darwin"}]}`, mac, true},
		{`{"all":[{"field":"osType","op":"eq","value":"macos"}]}`, mac, true},
		{`{"all":[{"field":"osType","op":"in","value":["windows","darwin"]}]}`, mac, true},
		{`{"all":[{"field":"osType","op":"neq","value":"darwin"}]}`, mac, false},
		{`{"all":[{"field":"osName","op":"contains","value":"debian"}]}`, web(), true},
		{`{"all":[{"field":"osName","op":"exists"}]}`, mac, false},
		{`{"all":[{"field":"osVersion","op":"startsWith","value":"12."}]}`, web(), true},
		{`{"all":[{"field":"siteId","op":"eq","value":"` + site1 + `"}]}`, web(), true},
		{`{"all":[{"field":"siteId","op":"neq","value":"` + site1 + `"}]}`, web(), false},
		{`{"all":[{"field":"status","op":"eq","value":"online"}]}`, web(), true},
		{`{"all":[{"field":"status","op":"eq","value":"offline"}]}`, web(), false},
		{`{"all":[{"field":"status","op":"in","value":["offline","pending"]}]}`, never, true},
		{`{"all":[{"field":"lastSeen","op":"withinMinutes","value":5}]}`, web(), true},
		{`{"all":[{"field":"lastSeen","op":"withinMinutes","value":2}]}`, web(), false},
		{`{"all":[{"field":"lastSeen","op":"olderThanMinutes","value":2}]}`, web(), true},
		{`{"all":[{"field":"lastSeen","op":"olderThanMinutes","value":5}]}`, web(), false},
		{`{"all":[{"field":"lastSeen","op":"olderThanMinutes","value":5}]}`, never, true},
		{`{"all":[{"field":"lastSeen","op":"withinMinutes","value":5}]}`, never, false},
		{`{"all":[{"field":"customField.tier","op":"eq","value":"GOLD"}]}`, web(), true},
		{`{"all":[{"field":"customField.tier","op":"neq","value":"gold"}]}`, web(), false},
		{`{"all":[{"field":"customField.tier","op":"neq","value":"gold"}]}`, mac, true},
		{`{"all":[{"field":"customField.rack","op":"eq","value":4}]}`, web(), true},
		{`{"all":[{"field":"customField.rack","op":"eq","value":"4"}]}`, web(), false},
		{`{"all":[{"field":"customField.managed","op":"eq","value":true}]}`, web(), true},
		{`{"all":[{"field":"customField.roles","op":"eq","value":"cache"}]}`, web(), true},
		{`{"all":[{"field":"customField.roles","op":"in","value":["web","db"]}]}`, web(), true},
		{`{"all":[{"field":"customField.note","op":"contains","value":"rack"}]}`, web(), true},
		{`{"all":[{"field":"customField.note","op":"startsWith","value":"b"}]}`, web(), false},
		{`{"all":[{"field":"customField.tier","op":"exists"}]}`, web(), true},
		{`{"all":[{"field":"customField.tier","op":"exists"}]}`, mac, false},
		{`{"all":[{"field":"customField.nope","op":"exists","value":false}]}`, web(), true},
		// all and any, with one level of nesting.
		{`{"all":[{"field":"tag","op":"eq","value":"prod"},{"field":"status","op":"eq","value":"offline"}]}`, web(), false},
		{`{"any":[{"field":"tag","op":"eq","value":"nope"},{"field":"status","op":"eq","value":"online"}]}`, web(), true},
		{`{"any":[{"field":"tag","op":"eq","value":"nope"},{"field":"status","op":"eq","value":"offline"}]}`, web(), false},
		{`{"all":[{"field":"osType","op":"eq","value":"linux"},{"any":[{"field":"tag","op":"eq","value":"x"},{"field":"hostname","op":"glob","value":"web-*"}]}]}`, web(), true},
		{`{"any":[{"field":"osType","op":"eq","value":"windows"},{"all":[{"field":"tag","op":"eq","value":"prod"},{"field":"tag","op":"eq","value":"db"}]}]}`, web(), false},
	}
	for _, c := range cases {
		f, _, err := ParseFilter(json.RawMessage(c.filter))
		if err != nil {
			t.Errorf("ParseFilter(%s) = %v", c.filter, err)
			continue
		}
		if got := f.Match(c.dev, now); got != c.want {
			t.Errorf("ParseFilter(%s).Match(%s) = %v, want %v", c.filter, c.dev.Hostname, got, c.want)
		}
	}
}

func TestFilterRefusals(t *testing.T) {
	many := make([]string, 51)
	for i := range many {
		many[i] = `{"field":"tag","op":"eq","value":"t"}`
	}
	manyIn := `"` + strings.Repeat(`a","`, 100) + `a"`
	cases := []struct {
		filter string
		fields string // the details' fields, comma-separated
	}{
		{`[]`, "filter"},
		{`"x"`, "filter"},
		{`{}`, "filter"},
		{`{"all":[],"any":[]}`, "filter"},
		{`{"none":[]}`, "filter.none"},
		{`{"all":[]}`, "filter.all"},
		{`{"all":{}}`, "filter.all"},
		{`{"all":[1]}`, "filter.all[0]"},
		{`{"all":[{"field":"tag","op":"eq","value":"x","extra":1}]}`, "filter.all[0].extra"},
		{`{"all":[{"field":"color","op":"eq","value":"x"}]}`, "filter.all[0].field"},
		{`{"all":[{"field":7,"op":"eq","value":"x"}]}`, "filter.all[0].field"},
		{`{"all":[{"op":"eq","value":"x"}]}`, "filter.all[0].field"},
		{`{"all":[{"field":"customField.Bad-Key","op":"eq","value":"x"}]}`, "filter.all[0].field"},
		{`{"all":[{"field":"tag","op":"glob","value":"x*"}]}`, "filter.all[0].op"},
		{`{"all":[{"field":"lastSeen","op":"eq","value":"x"}]}`, "filter.all[0].op"},
		{`{"all":[{"field":"status","op":"contains","value":"on"}]}`, "filter.all[0].op"},
		{`{"all":[{"field":"tag","value":"x"}]}`, "filter.all[0].op"},
		{`{"all":[{"field":"tag","op":"eq"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"tag","op":"eq","value":5}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"tag","op":"eq","value":""}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"tag","op":"eq","value":"` + strings.Repeat("x", 201) + `"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"osType","op":"eq","value":"beos"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"status","op":"in","value":["online","asleep"]}]}`, "filter.all[0].value[1]"},
		{`{"all":[{"field":"siteId","op":"eq","value":"not-an-id"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"hostname","op":"glob","value":"web-["}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"hostname","op":"matches","value":"(unclosed"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"hostname","op":"in","value":"web"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"hostname","op":"in","value":[]}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"hostname","op":"in","value":[` + manyIn + `]}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"lastSeen","op":"withinMinutes","value":0}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"lastSeen","op":"withinMinutes","value":1.5}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"lastSeen","op":"withinMinutes","value":"5"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"lastSeen","op":"olderThanMinutes","value":525601}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"tag","op":"exists","value":"yes"}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"customField.tier","op":"eq","value":["gold"]}]}`, "filter.all[0].value"},
		{`{"all":[{"field":"customField.tier","op":"contains","value":5}]}`, "filter.all[0].value"},
		{`{"all":[{"any":[{"all":[{"field":"tag","op":"eq","value":"x"}]}]}]}`, "filter.all[0].any[0]"},
		{`{"all":[{"any":[{"field":"tag","op":"eq","value":1}]}]}`, "filter.all[0].any[0].value"},
		{`{"all":[{"any":[],"field":"tag"}]}`, "filter.all[0]"},
		{`{"all":[` + strings.Join(many, ",") + `]}`, "filter"},
		// Every problem is reported, not just the first.
		{`{"any":[{"field":"nope","op":"eq","value":"x"},{"field":"tag","op":"eq","value":3,"z":1}]}`,
			"filter.any[0].field,filter.any[1].z,filter.any[1].value"},
	}
	for _, c := range cases {
		_, _, err := ParseFilter(json.RawMessage(c.filter))
		ae, ok := apperr.As(err)
		if !ok || ae.Kind != apperr.KindInvalid || ae.Code != apperr.CodeValidation {
			t.Errorf("ParseFilter(%s) = %v, want a 400 VALIDATION_ERROR", c.filter, err)
			continue
		}
		var fields []string
		for _, d := range ae.Details {
			fields = append(fields, d.Field)
		}
		if got := strings.Join(fields, ","); got != c.fields {
			t.Errorf("ParseFilter(%s) details = %s, want %s", c.filter, got, c.fields)
		}
	}
}

func TestFilterCanonicalFormAndHelpers(t *testing.T) {
	f, canonical, err := ParseFilter(json.RawMessage(`{ "any": [ {"value": 5, "op": "eq", "field": "customField.rack"},
		{"all": [{"field": "siteId", "op": "in", "value": ["` + site1 + `"]}]} ] }`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"any":[{"field":"customField.rack","op":"eq","value":5},{"all":[{"field":"siteId","op":"in","value":["` + site1 + `"]}]}]}`
	if canonical != want {
		t.Errorf("canonical = %s, want %s", canonical, want)
	}
	var leaves []string
	f.leaves(func(c *Cond) { leaves = append(leaves, c.at+" "+c.Field+" "+c.Key) })
	if !f.UsesCustomFields() || strings.Join(leaves, ",") != "filter.any[0] customField rack,filter.any[1].all[0] siteId " {
		t.Errorf("helpers: custom %v leaves %q", f.UsesCustomFields(), leaves)
	}
	plain, _, _ := ParseFilter(json.RawMessage(`{"all":[{"field":"tag","op":"eq","value":"x"}]}`))
	if plain.UsesCustomFields() {
		t.Error("a tag filter does not need custom fields")
	}
}
