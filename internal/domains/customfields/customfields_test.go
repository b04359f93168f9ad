package customfields_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/customfields"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

const fields = "/api/v1/custom-fields"

type world struct {
	e     *apptest.Env
	admin apptest.Caller
	a, b  apptest.Tenant // b is a foreign partner
	devA  string         // a device of a's organization
	devB  string         // a device of b's organization
}

func newWorld(t *testing.T) *world {
	w := &world{e: apptest.New(t)}
	w.admin = w.e.Admin()
	w.a = w.e.NewTenant(w.admin, "Alpha")
	w.b = w.e.NewTenant(w.admin, "Beta")
	w.devA = w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: w.a.OrgID, SiteID: w.a.SiteID, Hostname: "alpha-01"})
	w.devB = w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.b.PartnerID, OrgID: w.b.OrgID, SiteID: w.b.SiteID, Hostname: "alpha-01"})
	return w
}

func (w *world) create(c apptest.Caller, body map[string]any) map[string]any {
	w.e.T.Helper()
	return w.e.Must(http.StatusCreated, c, "POST", fields, body).Map(w.e.T)
}

// secondOrg adds an organization to partner a and returns it with its site.
func (w *world) secondOrg(name string) (orgID, siteID string) {
	w.e.T.Helper()
	orgID = w.e.CreateOrg(w.a.Partner, "", name)
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	w.e.Must(200, w.admin, "GET", "/api/v1/orgs/sites?orgId="+orgID, nil).JSON(w.e.T, &sites)
	return orgID, sites.Data[0].ID
}

func detailFields(t *testing.T, r *apptest.Response) []string {
	t.Helper()
	var env struct {
		Error struct {
			Details []struct {
				Field string `json:"field"`
			} `json:"details"`
		} `json:"error"`
	}
	r.JSON(t, &env)
	var out []string
	for _, d := range env.Error.Details {
		out = append(out, d.Field)
	}
	return out
}

func TestDefinitionValidation(t *testing.T) {
	w := newWorld(t)
	opts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("o%d", i)
		}
		return out
	}
	bad := map[string]map[string]any{
		"empty key":              {"key": "", "name": "X", "type": "text"},
		"upper-case key":         {"key": "Asset", "name": "X", "type": "text"},
		"key starts with digit":  {"key": "1asset", "name": "X", "type": "text"},
		"key starts with _":      {"key": "_asset", "name": "X", "type": "text"},
		"key with dash":          {"key": "asset-tag", "name": "X", "type": "text"},
		"key of 65":              {"key": "a" + strings.Repeat("b", 64), "name": "X", "type": "text"},
		"blank name":             {"key": "k", "name": "  ", "type": "text"},
		"unknown type":           {"key": "k", "name": "X", "type": "color"},
		"select without options": {"key": "k", "name": "X", "type": "select"},
		"select empty options":   {"key": "k", "name": "X", "type": "select", "options": []string{}},
		"multiselect 101":        {"key": "k", "name": "X", "type": "multiselect", "options": opts(101)},
		"duplicate options":      {"key": "k", "name": "X", "type": "select", "options": []string{"a", "b", "a"}},
		"blank option":           {"key": "k", "name": "X", "type": "select", "options": []string{"a", " "}},
		"options on text":        {"key": "k", "name": "X", "type": "text", "options": []string{"a"}},
		"options on number":      {"key": "k", "name": "X", "type": "number", "options": []string{}},
		"text default number":    {"key": "k", "name": "X", "type": "text", "defaultValue": 5},
		"number default string":  {"key": "k", "name": "X", "type": "number", "defaultValue": "5"},
		"boolean default string": {"key": "k", "name": "X", "type": "boolean", "defaultValue": "true"},
		"date default bad":       {"key": "k", "name": "X", "type": "date", "defaultValue": "2024-13-01"},
		"select default other":   {"key": "k", "name": "X", "type": "select", "options": []string{"a"}, "defaultValue": "b"},
		"multi default scalar":   {"key": "k", "name": "X", "type": "multiselect", "options": []string{"a"}, "defaultValue": "a"},
		"url default ftp":        {"key": "k", "name": "X", "type": "url", "defaultValue": "ftp://x.test"},
		"email default bad":      {"key": "k", "name": "X", "type": "email", "defaultValue": "not-an-email"},
	}
	for name, body := range bad {
		if r := w.e.Do(w.a.Partner, "POST", fields, body); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("%s: status %d %s, want 400 VALIDATION_ERROR", name, r.Status, r.Body)
		}
	}
	good := []map[string]any{
		{"key": "a", "name": "One letter", "type": "text"},
		{"key": "a" + strings.Repeat("b", 63), "name": "Longest key", "type": "text"},
		{"key": "asset_tag_2", "name": "Asset tag", "type": "text", "defaultValue": "none"},
		{"key": "rack_units", "name": "Rack units", "type": "number", "defaultValue": 1.5},
		{"key": "managed", "name": "Managed", "type": "boolean", "defaultValue": false},
		{"key": "warranty_end", "name": "Warranty end", "type": "date", "defaultValue": "2030-02-28"},
		{"key": "tier", "name": "Tier", "type": "select", "options": []string{"gold", "silver"}, "defaultValue": "gold"},
		{"key": "roles", "name": "Roles", "type": "multiselect", "options": opts(100), "defaultValue": []string{"o1", "o2"}},
		{"key": "docs", "name": "Docs", "type": "url", "defaultValue": "https://wiki.example.com/x"},
		{"key": "owner", "name": "Owner", "type": "email", "defaultValue": "ops@example.com"},
	}
	for _, body := range good {
		f := w.create(w.a.Partner, body)
		if f["orgId"] != nil || f["partnerId"] != w.a.PartnerID || f["type"] != body["type"] {
			t.Errorf("created %v", f)
		}
	}
	if f := w.create(w.a.Partner, map[string]any{"key": "flag", "name": "Flag", "type": "boolean", "defaultValue": false}); f["defaultValue"] != false {
		t.Errorf("a false default must be kept: %v", f)
	}
}

func TestDuplicateKeyIsAConflictWithinThePartner(t *testing.T) {
	w := newWorld(t)
	w.create(w.a.Partner, map[string]any{"key": "asset_tag", "name": "Asset tag", "type": "text"})
	if r := w.e.Do(w.a.Partner, "POST", fields, map[string]any{"key": "asset_tag", "name": "Other", "type": "number"}); r.Status != 409 {
		t.Errorf("duplicate partner key = %d, want 409", r.Status)
	}
	// An organization's field shares the partner's key space.
	if r := w.e.Do(w.a.Org, "POST", fields, map[string]any{"key": "asset_tag", "name": "Mine", "type": "text"}); r.Status != 409 {
		t.Errorf("duplicate key from an organization = %d, want 409", r.Status)
	}
	// Another partner has its own key space.
	w.create(w.b.Partner, map[string]any{"key": "asset_tag", "name": "Asset tag", "type": "text"})
}

func TestKeyAndTypeAreImmutable(t *testing.T) {
	w := newWorld(t)
	f := w.create(w.a.Partner, map[string]any{"key": "tier", "name": "Tier", "type": "select", "options": []string{"gold", "silver"}})
	path := fields + "/" + f["id"].(string)
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"key": "level"}); r.Status != 400 {
		t.Errorf("changing key = %d, want 400", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"type": "text"}); r.Status != 400 {
		t.Errorf("changing type = %d, want 400", r.Status)
	}
	// Sending them unchanged (a full object) is fine.
	got := w.e.Must(200, w.a.Partner, "PATCH", path, map[string]any{"key": "tier", "type": "select", "name": "Service tier",
		"required": true, "defaultValue": "silver"}).Map(t)
	if got["name"] != "Service tier" || got["required"] != true || got["defaultValue"] != "silver" || got["key"] != "tier" {
		t.Errorf("patched = %v", got)
	}
	// Options: the default must stay valid, and an option in use cannot go.
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"options": []string{"gold"}}); r.Status != 400 {
		t.Errorf("dropping the default's option = %d, want 400", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"options": []string{"gold", "silver", "gold"}}); r.Status != 400 {
		t.Errorf("duplicate options on update = %d, want 400", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"defaultValue": "bronze"}); r.Status != 400 {
		t.Errorf("default outside options = %d, want 400", r.Status)
	}
	w.e.Must(200, w.a.Partner, "PATCH", "/api/v1/devices/"+w.devA+"/custom-fields", map[string]any{"values": map[string]any{"tier": "gold"}})
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"options": []string{"silver", "bronze"}}); r.Status != 409 {
		t.Errorf("removing an option in use = %d, want 409", r.Status)
	}
	got = w.e.Must(200, w.a.Partner, "PATCH", path, map[string]any{"options": []string{"gold", "silver", "bronze"}, "defaultValue": nil}).Map(t)
	if len(got["options"].([]any)) != 3 || got["defaultValue"] != nil {
		t.Errorf("adding an option and clearing the default: %v", got)
	}
	text := w.create(w.a.Partner, map[string]any{"key": "note", "name": "Note", "type": "text"})
	if r := w.e.Do(w.a.Partner, "PATCH", fields+"/"+text["id"].(string), map[string]any{"options": []string{"a"}}); r.Status != 400 {
		t.Errorf("options on a text field by update = %d, want 400", r.Status)
	}
}

func TestCreatePlacement(t *testing.T) {
	w := newWorld(t)
	body := map[string]any{"key": "k1", "name": "K", "type": "text"}
	if r := w.e.Do(w.admin, "POST", fields, body); r.Status != 400 {
		t.Errorf("system create without partnerId = %d, want 400", r.Status)
	}
	body["partnerId"] = w.a.PartnerID
	if r := w.e.Do(w.a.Partner, "POST", fields, body); r.Status != 400 {
		t.Errorf("partner naming partnerId = %d, want 400", r.Status)
	}
	if f := w.create(w.admin, body); f["partnerId"] != w.a.PartnerID {
		t.Errorf("system create = %v", f)
	}
	if r := w.e.Do(w.admin, "POST", fields, map[string]any{"key": "k2", "name": "K", "type": "text", "partnerId": w.a.PartnerID,
		"orgId": w.b.OrgID}); r.Status != 400 {
		t.Errorf("system create with another partner's org = %d, want 400", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "POST", fields, map[string]any{"key": "k3", "name": "K", "type": "text", "orgId": w.b.OrgID}); r.Status != 400 {
		t.Errorf("partner naming a foreign org = %d, want 400", r.Status)
	}
	f := w.create(w.a.Partner, map[string]any{"key": "k4", "name": "K", "type": "text", "orgId": w.a.OrgID})
	if f["orgId"] != w.a.OrgID {
		t.Errorf("org field = %v", f)
	}
}

func TestOrganizationCallersAndPartnerWideFields(t *testing.T) {
	w := newWorld(t)
	pw := w.create(w.a.Partner, map[string]any{"key": "shared", "name": "Shared", "type": "text"})
	own := w.create(w.a.Org, map[string]any{"key": "mine", "name": "Mine", "type": "text"})
	if own["orgId"] != w.a.OrgID {
		t.Errorf("organization caller's field orgId = %v, want its organization", own["orgId"])
	}
	org2, _ := w.secondOrg("Alpha Two")
	other := w.create(w.a.Partner, map[string]any{"key": "theirs", "name": "Theirs", "type": "text", "orgId": org2})
	if r := w.e.Do(w.a.Org, "POST", fields, map[string]any{"key": "x", "name": "X", "type": "text", "orgId": org2}); r.Status != 400 {
		t.Errorf("organization caller creating for a sibling org = %d, want 400", r.Status)
	}

	// Reads: partner-wide and own, never a sibling organization's.
	var l struct {
		Data []map[string]any `json:"data"`
	}
	w.e.Must(200, w.a.Org, "GET", fields, nil).JSON(t, &l)
	if len(l.Data) != 2 || l.Data[0]["key"] != "mine" || l.Data[1]["key"] != "shared" {
		t.Errorf("organization caller's list = %v, want mine and shared by name", l.Data)
	}
	w.e.Must(200, w.a.Org, "GET", fields+"/"+pw["id"].(string), nil)
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		if r := w.e.Do(w.a.Org, m, fields+"/"+other["id"].(string), map[string]any{}); r.Status != 404 {
			t.Errorf("%s a sibling organization's field = %d, want 404", m, r.Status)
		}
	}
	// Writes to partner-wide fields are the partner's.
	if r := w.e.Do(w.a.Org, "PATCH", fields+"/"+pw["id"].(string), map[string]any{"name": "Hijack"}); r.Status != 403 {
		t.Errorf("organization caller changing a partner-wide field = %d, want 403", r.Status)
	}
	if r := w.e.Do(w.a.Org, "DELETE", fields+"/"+pw["id"].(string), nil); r.Status != 403 {
		t.Errorf("organization caller deleting a partner-wide field = %d, want 403", r.Status)
	}
	w.e.Must(200, w.a.Org, "PATCH", fields+"/"+own["id"].(string), map[string]any{"name": "Mine too"})
	w.e.Must(204, w.a.Org, "DELETE", fields+"/"+own["id"].(string), nil)

	// A partner user limited to selected organizations reads partner-wide fields but, like an
	// organization caller, does not manage them; a field of an organization it does not reach is 404.
	limitedID, _ := w.e.CreateUser("limited@alpha.test", access.LevelPartner, w.a.PartnerID, "", "")
	w.e.Must(200, w.a.Partner, "PATCH", "/api/v1/users/"+limitedID, map[string]any{"orgAccess": "selected", "orgIds": []string{w.a.OrgID}})
	limited := apptest.Bearer(w.e.Login("limited@alpha.test", apptest.UserPassword))
	w.e.Must(200, limited, "GET", fields+"/"+pw["id"].(string), nil)
	if r := w.e.Do(limited, "PATCH", fields+"/"+pw["id"].(string), map[string]any{"name": "Hijack"}); r.Status != 403 {
		t.Errorf("limited partner user changing a partner-wide field = %d, want 403", r.Status)
	}
	if r := w.e.Do(limited, "POST", fields, map[string]any{"key": "wide", "name": "Wide", "type": "text"}); r.Status != 403 {
		t.Errorf("limited partner user creating a partner-wide field = %d, want 403", r.Status)
	}
	w.create(limited, map[string]any{"key": "reached", "name": "Reached", "type": "text", "orgId": w.a.OrgID})
	if r := w.e.Do(limited, "GET", fields+"/"+other["id"].(string), nil); r.Status != 404 {
		t.Errorf("limited partner user reading an unreached org's field = %d, want 404", r.Status)
	}

	// A viewer reads but does not write.
	_, viewer := w.e.CreateUser("viewer@alpha.test", access.LevelOrganization, w.a.PartnerID, w.a.OrgID, access.RoleOrgViewer)
	w.e.Must(200, viewer, "GET", fields, nil)
	if r := w.e.Do(viewer, "POST", fields, map[string]any{"key": "v", "name": "V", "type": "text"}); r.Status != 403 {
		t.Errorf("viewer create = %d, want 403", r.Status)
	}
}

func TestListPagingSearchAndOrgFilter(t *testing.T) {
	w := newWorld(t)
	for i := 0; i < 5; i++ {
		w.create(w.a.Partner, map[string]any{"key": fmt.Sprintf("f%d", i), "name": fmt.Sprintf("Field %d", 4-i), "type": "text"})
	}
	org2, _ := w.secondOrg("Alpha Two")
	w.create(w.a.Partner, map[string]any{"key": "only_two", "name": "Only two", "type": "text", "orgId": org2})
	w.create(w.b.Partner, map[string]any{"key": "f0", "name": "Field 0", "type": "text"})

	var names []string
	cursor := ""
	for {
		var l struct {
			Data []map[string]any `json:"data"`
			Page struct {
				HasMore bool   `json:"hasMore"`
				Cursor  string `json:"cursor"`
			} `json:"pagination"`
		}
		w.e.Must(200, w.a.Partner, "GET", fields+"?limit=2&cursor="+cursor, nil).JSON(t, &l)
		for _, f := range l.Data {
			names = append(names, f["name"].(string))
			if f["partnerId"] != w.a.PartnerID {
				t.Errorf("foreign field listed: %v", f)
			}
		}
		if !l.Page.HasMore {
			break
		}
		cursor = l.Page.Cursor
	}
	want := "Field 0,Field 1,Field 2,Field 3,Field 4,Only two"
	if strings.Join(names, ",") != want {
		t.Errorf("paged names = %v, want %s", names, want)
	}
	count := func(q string) int {
		var l struct {
			Data []map[string]any `json:"data"`
		}
		w.e.Must(200, w.a.Partner, "GET", fields+q, nil).JSON(t, &l)
		return len(l.Data)
	}
	if n := count("?search=FIELD%203"); n != 1 {
		t.Errorf("search by name = %d, want 1", n)
	}
	if n := count("?search=only_"); n != 1 {
		t.Errorf("search by key = %d, want 1", n)
	}
	if n := count("?orgId=" + w.a.OrgID); n != 5 {
		t.Errorf("fields applying to the first org = %d, want the 5 partner-wide", n)
	}
	if n := count("?orgId=" + org2); n != 6 {
		t.Errorf("fields applying to the second org = %d, want 6", n)
	}
	if n := count("?orgId=" + w.b.OrgID); n != 0 {
		t.Errorf("fields of a foreign org = %d, want 0", n)
	}
}

func values(w *world, c apptest.Caller, dev string) map[string]map[string]any {
	w.e.T.Helper()
	var out struct {
		DeviceID string           `json:"deviceId"`
		Data     []map[string]any `json:"data"`
	}
	w.e.Must(200, c, "GET", "/api/v1/devices/"+dev+"/custom-fields", nil).JSON(w.e.T, &out)
	m := map[string]map[string]any{}
	for _, v := range out.Data {
		m[v["key"].(string)] = v
	}
	return m
}

func TestValueTypes(t *testing.T) {
	w := newWorld(t)
	w.create(w.a.Partner, map[string]any{"key": "t", "name": "t", "type": "text"})
	w.create(w.a.Partner, map[string]any{"key": "n", "name": "n", "type": "number"})
	w.create(w.a.Partner, map[string]any{"key": "b", "name": "b", "type": "boolean"})
	w.create(w.a.Partner, map[string]any{"key": "d", "name": "d", "type": "date"})
	w.create(w.a.Partner, map[string]any{"key": "s", "name": "s", "type": "select", "options": []string{"x", "y"}})
	w.create(w.a.Partner, map[string]any{"key": "m", "name": "m", "type": "multiselect", "options": []string{"x", "y", "z"}})
	w.create(w.a.Partner, map[string]any{"key": "u", "name": "u", "type": "url"})
	w.create(w.a.Partner, map[string]any{"key": "e", "name": "e", "type": "email"})
	path := "/api/v1/devices/" + w.devA + "/custom-fields"
	cases := []struct {
		key   string
		good  []any
		wrong []any
	}{
		{"t", []any{"hello", strings.Repeat("é", 4096)}, []any{5, true, "", strings.Repeat("a", 4097), []string{"a"}}},
		{"n", []any{42, -1.25, 0}, []any{"42", true, []int{1}}},
		{"b", []any{true, false}, []any{"true", 1}},
		{"d", []any{"2024-02-29", "1999-12-31"}, []any{"2023-02-29", "2024-1-5", "31/12/1999", "2024-01-01T00:00:00Z", 20240101}},
		{"s", []any{"x", "y"}, []any{"X", "w", []string{"x"}, 1}},
		{"m", []any{[]string{"x"}, []string{"z", "x"}}, []any{"x", []string{}, []string{"x", "x"}, []string{"x", "w"}, []any{1}}},
		{"u", []any{"https://example.com/a?b=c", "http://10.0.0.1:8080"}, []any{"example.com", "ftp://example.com", "https://", "javascript:alert(1)", 1}},
		{"e", []any{"ops@example.com"}, []any{"ops", "Ops <ops@example.com>", "ops@", 1}},
	}
	for _, c := range cases {
		for _, v := range c.good {
			w.e.Must(200, w.a.Partner, "PATCH", path, map[string]any{"values": map[string]any{c.key: v}})
		}
		for _, v := range c.wrong {
			r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"values": map[string]any{c.key: v}})
			if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
				t.Errorf("%s = %v: %d %s, want 400", c.key, v, r.Status, r.Body)
			} else if d := detailFields(t, r); len(d) != 1 || d[0] != "values."+c.key {
				t.Errorf("%s = %v: details %v", c.key, v, d)
			}
		}
	}
	got := values(w, w.a.Partner, w.devA)
	if got["m"]["value"].([]any)[0] != "z" || got["n"]["value"] != 0.0 || got["b"]["value"] != false || got["d"]["value"] != "1999-12-31" {
		t.Errorf("last good values not kept: %v", got)
	}
}

func TestValuesRoundTripDefaultsAndRules(t *testing.T) {
	w := newWorld(t)
	w.create(w.a.Partner, map[string]any{"key": "tier", "name": "Tier", "type": "select", "options": []string{"gold", "silver"}, "defaultValue": "silver"})
	w.create(w.a.Partner, map[string]any{"key": "owner", "name": "Owner", "type": "email", "required": true})
	w.create(w.a.Partner, map[string]any{"key": "note", "name": "Note", "type": "text"})
	org2, _ := w.secondOrg("Alpha Two")
	w.create(w.a.Partner, map[string]any{"key": "elsewhere", "name": "Elsewhere", "type": "text", "orgId": org2})
	path := "/api/v1/devices/" + w.devA + "/custom-fields"

	got := values(w, w.a.Org, w.devA)
	if len(got) != 3 || got["elsewhere"] != nil {
		t.Fatalf("applicable fields = %v, want tier, owner, note (not another org's)", got)
	}
	if got["tier"]["value"] != "silver" || got["tier"]["isDefault"] != true || got["note"]["value"] != nil || got["note"]["isDefault"] != false {
		t.Errorf("defaults = %v", got)
	}

	w.e.Must(200, w.a.Org, "PATCH", path, map[string]any{"values": map[string]any{"tier": "gold", "owner": "it@alpha.test", "note": "rack 4"}})
	got = values(w, w.a.Partner, w.devA)
	if got["tier"]["value"] != "gold" || got["tier"]["isDefault"] != false || got["owner"]["value"] != "it@alpha.test" || got["note"]["value"] != "rack 4" {
		t.Errorf("after set = %v", got)
	}
	if got["tier"]["updatedAt"] == nil {
		t.Errorf("own value without updatedAt: %v", got["tier"])
	}

	// null clears: the default shows again.
	w.e.Must(200, w.a.Org, "PATCH", path, map[string]any{"values": map[string]any{"tier": nil, "note": nil}})
	got = values(w, w.a.Partner, w.devA)
	if got["tier"]["value"] != "silver" || got["tier"]["isDefault"] != true || got["note"]["value"] != nil {
		t.Errorf("after clear = %v", got)
	}

	// Required cannot be cleared; unknown keys (and another org's field) are refused; all
	// problems come back together and nothing is written.
	r := w.e.Do(w.a.Org, "PATCH", path, map[string]any{"values": map[string]any{"owner": nil, "nope": 1, "elsewhere": "x", "note": 5, "tier": "gold"}})
	if r.Status != 400 {
		t.Fatalf("bad values = %d %s", r.Status, r.Body)
	}
	if d := strings.Join(detailFields(t, r), ","); d != "values.elsewhere,values.nope,values.note,values.owner" {
		t.Errorf("details = %s", d)
	}
	if got = values(w, w.a.Partner, w.devA); got["tier"]["value"] != "silver" || got["owner"]["value"] != "it@alpha.test" {
		t.Errorf("a refused PATCH wrote something: %v", got)
	}
	if r := w.e.Do(w.a.Org, "PATCH", path, map[string]any{"values": map[string]any{}}); r.Status != 400 {
		t.Errorf("empty values = %d, want 400", r.Status)
	}

	// The change is audited with a diff.
	var logs struct {
		Data []struct {
			Details map[string]any `json:"details"`
		} `json:"data"`
	}
	w.e.Must(200, w.a.Partner, "GET", "/api/v1/audit/logs?action=device.custom_fields.update", nil).JSON(t, &logs)
	if len(logs.Data) != 2 {
		t.Fatalf("audit entries = %d, want 2 (set, clear)", len(logs.Data))
	}
	changes := logs.Data[len(logs.Data)-1].Details["changes"].(map[string]any)
	if tier := changes["tier"].(map[string]any); tier["from"] != nil || tier["to"] != "gold" {
		t.Errorf("audit diff = %v", changes)
	}

	// A viewer reads values but cannot set them.
	_, viewer := w.e.CreateUser("viewer@alpha.test", access.LevelOrganization, w.a.PartnerID, w.a.OrgID, access.RoleOrgViewer)
	values(w, viewer, w.devA)
	if r := w.e.Do(viewer, "PATCH", path, map[string]any{"values": map[string]any{"note": "x"}}); r.Status != 403 {
		t.Errorf("viewer setting values = %d, want 403", r.Status)
	}
}

func TestDeleteRemovesValues(t *testing.T) {
	w := newWorld(t)
	f := w.create(w.a.Partner, map[string]any{"key": "note", "name": "Note", "type": "text"})
	w.e.Must(200, w.a.Partner, "PATCH", "/api/v1/devices/"+w.devA+"/custom-fields", map[string]any{"values": map[string]any{"note": "x"}})
	w.e.Must(204, w.a.Partner, "DELETE", fields+"/"+f["id"].(string), nil)
	var n int
	if err := w.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_custom_values`).Scan(&n); err != nil || n != 0 {
		t.Errorf("values left after delete = %d (%v)", n, err)
	}
	if r := w.e.Do(w.a.Partner, "GET", fields+"/"+f["id"].(string), nil); r.Status != 404 {
		t.Errorf("deleted field = %d, want 404", r.Status)
	}
	if got := values(w, w.a.Partner, w.devA); len(got) != 0 {
		t.Errorf("device still shows %v", got)
	}
}

func TestMoveDropsValuesOfTheOrganizationLeft(t *testing.T) {
	w := newWorld(t)
	w.create(w.a.Partner, map[string]any{"key": "tier", "name": "Tier", "type": "text"})
	room := w.create(w.a.Partner, map[string]any{"key": "room", "name": "Room", "type": "text", "orgId": w.a.OrgID})
	w.e.Must(200, w.a.Partner, "PATCH", "/api/v1/devices/"+w.devA+"/custom-fields",
		map[string]any{"values": map[string]any{"tier": "gold", "room": "B12"}})
	count := func() (n int) {
		t.Helper()
		if err := w.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_custom_values WHERE device_id = $1`, w.devA).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	org2, _ := w.secondOrg("Alpha Two")
	w.e.Must(200, w.a.Partner, "POST", "/api/v1/devices/"+w.devA+"/move-org", map[string]any{"orgId": org2})
	var left int
	if err := w.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_custom_values WHERE field_id = $1`, room["id"]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if got := values(w, w.a.Partner, w.devA); left != 0 || count() != 1 || got["tier"]["value"] != "gold" {
		t.Errorf("after the move: %d values of the old organization's field, %d in all, values %v; want 0, 1 and tier kept",
			left, count(), got)
	}
	w.e.Must(204, w.a.Partner, "DELETE", "/api/v1/devices/"+w.devA, nil)
	if n := count(); n != 1 {
		t.Errorf("values after decommissioning = %d, want the 1 kept", n)
	}
}

func TestHookRunsInTheTransaction(t *testing.T) {
	w := newWorld(t)
	var mu sync.Mutex
	var calls []string
	fail := false
	set := func(f bool) {
		mu.Lock()
		defer mu.Unlock()
		fail, calls = f, nil
	}
	called := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	app.Service[*customfields.Service](w.e.App).AddHook(func(ctx context.Context, tx *sql.Tx, deviceID string) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, deviceID)
		// The hook sees the new value inside the transaction.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM device_custom_values WHERE device_id = $1`, deviceID).Scan(&n); err != nil {
			return err
		}
		if fail {
			return errors.New("recompute failed")
		}
		return nil
	})
	f := w.create(w.a.Partner, map[string]any{"key": "note", "name": "Note", "type": "text"})
	path := "/api/v1/devices/" + w.devA + "/custom-fields"
	w.e.Must(200, w.a.Partner, "PATCH", path, map[string]any{"values": map[string]any{"note": "x"}})
	w.e.Must(200, w.a.Partner, "PATCH", path, map[string]any{"values": map[string]any{"note": "x"}}) // no change: no call
	if c := called(); len(c) != 1 || c[0] != w.devA {
		t.Fatalf("hook calls = %v, want one for the device", c)
	}
	set(true)
	if r := w.e.Do(w.a.Partner, "PATCH", path, map[string]any{"values": map[string]any{"note": "y"}}); r.Status != 500 {
		t.Errorf("PATCH with a failing hook = %d, want 500", r.Status)
	}
	if got := values(w, w.a.Partner, w.devA); got["note"]["value"] != "x" {
		t.Errorf("a failed hook must roll the change back: %v", got["note"])
	}
	set(false)
	w.e.Must(204, w.a.Partner, "DELETE", fields+"/"+f["id"].(string), nil)
	if c := called(); len(c) != 1 || c[0] != w.devA {
		t.Errorf("hook calls on delete = %v, want the device that had a value", c)
	}
	w.create(w.a.Partner, map[string]any{"key": "again", "name": "Again", "type": "text"})
	w.e.Must(200, w.a.Partner, "PATCH", path, map[string]any{"values": map[string]any{"again": "x"}})
}

func TestTenancy(t *testing.T) {
	w := newWorld(t)
	foreign := w.create(w.b.Partner, map[string]any{"key": "note", "name": "Note", "type": "text"})
	mine := w.create(w.a.Partner, map[string]any{"key": "note", "name": "Note", "type": "text"})
	fpath := fields + "/" + foreign["id"].(string)
	for _, c := range []apptest.Caller{w.a.Partner, w.a.Org} {
		for _, m := range []string{"GET", "PATCH", "DELETE"} {
			if r := w.e.Do(c, m, fpath, map[string]any{"name": "x"}); r.Status != 404 {
				t.Errorf("%s a foreign field = %d, want 404", m, r.Status)
			}
		}
		if r := w.e.Do(c, "GET", "/api/v1/devices/"+w.devB+"/custom-fields", nil); r.Status != 404 {
			t.Errorf("GET a foreign device's values = %d, want 404", r.Status)
		}
		if r := w.e.Do(c, "PATCH", "/api/v1/devices/"+w.devB+"/custom-fields", map[string]any{"values": map[string]any{"note": "x"}}); r.Status != 404 {
			t.Errorf("PATCH a foreign device's values = %d, want 404", r.Status)
		}
	}
	// An organization caller does not reach a sibling organization's device.
	org2, site2 := w.secondOrg("Alpha Two")
	dev2 := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: org2, SiteID: site2, Hostname: "two-01"})
	if r := w.e.Do(w.a.Org, "GET", "/api/v1/devices/"+dev2+"/custom-fields", nil); r.Status != 404 {
		t.Errorf("org caller on a sibling org's device = %d, want 404", r.Status)
	}
	values(w, w.a.Partner, dev2)
	// A decommissioned device is gone.
	if _, err := w.e.App.DB.SQL.Exec(`UPDATE devices SET decommissioned_at = $1 WHERE id = $2`, store.Now(), w.devA); err != nil {
		t.Fatal(err)
	}
	if r := w.e.Do(w.a.Partner, "GET", "/api/v1/devices/"+w.devA+"/custom-fields", nil); r.Status != 404 {
		t.Errorf("decommissioned device = %d, want 404", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "PATCH", "/api/v1/devices/"+w.devA+"/custom-fields", map[string]any{"values": map[string]any{"note": "x"}}); r.Status != 404 {
		t.Errorf("PATCH a decommissioned device = %d, want 404", r.Status)
	}
	// The foreign partner's value never shows through a same-key field.
	w.e.Must(200, w.b.Partner, "PATCH", "/api/v1/devices/"+w.devB+"/custom-fields", map[string]any{"values": map[string]any{"note": "beta"}})
	if got := values(w, w.a.Partner, dev2); got["note"]["fieldId"] != mine["id"] || got["note"]["value"] != nil {
		t.Errorf("values = %v", got)
	}
}
