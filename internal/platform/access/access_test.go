package access_test

import (
	"testing"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

func TestPermissionsHas(t *testing.T) {
	cases := []struct {
		grants access.Permissions
		perm   string
		want   bool
	}{
		{access.Permissions{"*:*"}, "devices:read", true},
		{access.Permissions{"devices:*"}, "devices:execute", true},
		{access.Permissions{"devices:*"}, "scripts:read", false},
		{access.Permissions{"*:read"}, "audit:read", true},
		{access.Permissions{"*:read"}, "audit:export", false},
		{access.Permissions{"devices:read"}, "devices:write", false},
		{nil, "devices:read", false},
	}
	for _, c := range cases {
		if got := c.grants.Has(c.perm); got != c.want {
			t.Errorf("%v.Has(%q) = %v, want %v", c.grants, c.perm, got, c.want)
		}
	}
}

func TestCoversRefusesEscalation(t *testing.T) {
	tech := access.Permissions{"devices:*", "users:read"}
	if !tech.Covers(access.Permissions{"devices:read", "devices:execute"}) {
		t.Error("a holder of devices:* cannot hand on devices:read")
	}
	if tech.Covers(access.Permissions{"users:delete"}) {
		t.Error("users:read covers users:delete")
	}
	if tech.Covers(access.Permissions{"*:read"}) {
		t.Error("devices:* and users:read cover *:read")
	}
	if !(access.Permissions{"*:*"}).Covers(access.Permissions{"*:read", "billing:manage"}) {
		t.Error("full admin does not cover everything")
	}
}

func TestValidGrant(t *testing.T) {
	for g, want := range map[string]bool{"devices:read": true, "devices:*": true, "*:read": true, "*:*": true,
		"devices:fly": false, "nothing:read": false, "devices": false, ":read": false, "": false} {
		if got := access.ValidGrant(g); got != want {
			t.Errorf("ValidGrant(%q) = %v, want %v", g, got, want)
		}
	}
}

func TestCatalogHasTheSpecsPermissions(t *testing.T) {
	for _, p := range []string{"devices:read", "devices:write", "devices:execute", "contracts:read", "alerts:read",
		"vulnerabilities:accept_risk", "billing:manage", "tickets:read", "tickets:write", "tickets:manage"} {
		if _, ok := access.LookupPermission(p); !ok {
			t.Errorf("catalog lacks %s", p)
		}
	}
}

func TestScopeFiltersFailClosed(t *testing.T) {
	for _, s := range []access.Scope{{}, {Level: access.LevelPartner}, {Level: access.LevelOrganization}, {Level: "bogus"}} {
		var a store.Args
		if got := s.OrgFilter(&a, "o", "p"); got != "FALSE" {
			t.Errorf("%+v.OrgFilter = %q, want FALSE", s, got)
		}
		if got := s.TenantFilter(&a, "o", "p"); got != "FALSE" {
			t.Errorf("%+v.TenantFilter = %q, want FALSE", s, got)
		}
		if s.CanSeeOrg("x", "y") {
			t.Errorf("%+v sees an organization", s)
		}
	}
}

func TestPartnerScopeWithSelectedOrganizations(t *testing.T) {
	s := access.Scope{Level: access.LevelPartner, PartnerID: "p1", OrgIDs: []string{"o1"}}
	if !s.CanSeeOrg("o1", "p1") || s.CanSeeOrg("o2", "p1") || s.CanSeeOrg("o1", "p2") {
		t.Error("selected-organization scope reaches the wrong organizations")
	}
	var a store.Args
	if got := s.OrgFilter(&a, "org_id", "partner_id"); got != "partner_id = $1 AND org_id IN ($2)" {
		t.Errorf("OrgFilter = %q", got)
	}
	none := access.Scope{Level: access.LevelPartner, PartnerID: "p1", OrgIDs: []string{}}
	if none.CanSeeOrg("o1", "p1") {
		t.Error("a partner user with no organizations sees one")
	}
}

func TestBuiltInRolesHoldValidGrants(t *testing.T) {
	for _, r := range access.BuiltInRoles() {
		for _, g := range r.Permissions {
			if !access.ValidGrant(g) {
				t.Errorf("%s grants unknown %s", r.Name, g)
			}
		}
	}
}

func TestTenantFilterKeepsPartnerRowsOfALimitedPartner(t *testing.T) {
	s := access.Scope{Level: access.LevelPartner, PartnerID: "p1", OrgIDs: []string{"o1"}}
	var a store.Args
	if got := s.TenantFilter(&a, "org_id", "partner_id"); got != "partner_id = $1 AND (org_id IS NULL OR org_id IN ($2))" {
		t.Errorf("TenantFilter = %q", got)
	}
	all := access.Scope{Level: access.LevelPartner, PartnerID: "p1"}
	var b store.Args
	if got := all.TenantFilter(&b, "org_id", "partner_id"); got != "partner_id = $1" {
		t.Errorf("unlimited TenantFilter = %q", got)
	}
}
