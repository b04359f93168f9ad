package alertchannels_test

import (
	"testing"

	"gale/internal/testkit/apptest"
)

// TestPolicyMatchNamesOnlyVisibleTargets: organizations, sites and groups named in a
// policy's match must exist and be the policy's tenant's, on create and on update.
func TestPolicyMatchNamesOnlyVisibleTargets(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	ch := x.channel(x.ten.Partner, map[string]any{"name": "m", "type": "email", "config": map[string]any{"recipients": []string{"a@example.com"}}})
	group := func(c apptest.Caller, orgID string) string {
		return x.Must(201, c, "POST", api+"/groups", map[string]any{"orgId": orgID, "name": "g", "type": "static"}).Map(t)["id"].(string)
	}
	ownGroup, foreignGroup := group(x.ten.Partner, x.ten.OrgID), group(other.Partner, other.OrgID)
	const missing = "0190a0a0-0000-7000-8000-00000000dead"
	policy := func(match map[string]any) map[string]any {
		return map[string]any{"name": "p", "match": match, "steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{ch}}}}
	}
	refused := []struct {
		field string
		match map[string]any
	}{
		{"match.orgIds", map[string]any{"orgIds": []string{other.OrgID}}},
		{"match.orgIds", map[string]any{"orgIds": []string{x.ten.OrgID, missing}}},
		{"match.siteIds", map[string]any{"siteIds": []string{other.SiteID}}},
		{"match.siteIds", map[string]any{"siteIds": []string{missing}}},
		{"match.groupIds", map[string]any{"groupIds": []string{foreignGroup}}},
		{"match.groupIds", map[string]any{"groupIds": []string{missing}}},
	}
	for _, tc := range refused {
		r := x.Do(x.ten.Partner, "POST", api+"/alerts/policies", policy(tc.match))
		var env struct {
			Error struct {
				Code    string                   `json:"code"`
				Details []struct{ Field string } `json:"details"`
			} `json:"error"`
		}
		r.JSON(t, &env)
		if r.Status != 400 || env.Error.Code != "VALIDATION_ERROR" || len(env.Error.Details) != 1 || env.Error.Details[0].Field != tc.field {
			t.Errorf("create with match %v = %d %s, want 400 on %s", tc.match, r.Status, r.Body, tc.field)
		}
	}
	own := map[string]any{"orgIds": []string{x.ten.OrgID}, "siteIds": []string{x.ten.SiteID}, "groupIds": []string{ownGroup}}
	id := x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", policy(own)).Map(t)["id"].(string)
	for _, tc := range refused {
		if r := x.Do(x.ten.Partner, "PATCH", api+"/alerts/policies/"+id, map[string]any{"match": tc.match}); r.Status != 400 {
			t.Errorf("update to match %v = %d %s, want 400", tc.match, r.Status, r.Body)
		}
	}
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/policies/"+id, map[string]any{"match": own})
	// An organization's policy may not name another organization of its own partner.
	sibling := x.CreateOrg(x.admin, x.ten.PartnerID, "Alpha Sibling")
	orgPolicy := policy(map[string]any{"orgIds": []string{sibling}})
	orgPolicy["orgId"] = x.ten.OrgID
	if r := x.Do(x.ten.Partner, "POST", api+"/alerts/policies", orgPolicy); r.Status != 400 {
		t.Errorf("an organization's policy naming a sibling organization = %d %s, want 400", r.Status, r.Body)
	}
}
