package devices_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// Targets resolve to the live devices in the caller's scope, each once; named devices that
// are unknown, another tenant's or decommissioned are missing; a bound tells when targets hold
// too many.
func TestResolveTargets(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten, other := e.NewTenant(admin, "Alpha"), e.NewTenant(admin, "Bravo")
	row := func(tn apptest.Tenant, host, status string) string {
		return e.InsertDevice(apptest.DeviceRow{PartnerID: tn.PartnerID, OrgID: tn.OrgID, SiteID: tn.SiteID, Hostname: host, Status: status})
	}
	a, b := row(ten, "a", ""), row(ten, "b", "offline")
	gone := row(ten, "gone", devices.StatusDecommissioned)
	foreign := row(other, "foreign", "")
	s := app.Service[*devices.Service](e.App)
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, ID: "test", Name: "test",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: ten.PartnerID, OrgID: ten.OrgID}})
	ids := func(r devices.Resolved) []string {
		out := r.IDs()
		slices.Sort(out)
		return out
	}
	want := []string{a, b}
	slices.Sort(want)

	r, err := s.ResolveTargets(ctx, devices.TargetDevices, []string{a, b, a, gone, foreign, "not-an-id"}, 10)
	if err != nil || !slices.Equal(ids(r), want) || r.Exceeds || !slices.Equal(r.Missing, []string{gone, foreign, "not-an-id"}) {
		t.Fatalf("named devices: %v missing %v exceeds %v, %v", ids(r), r.Missing, r.Exceeds, err)
	}
	for _, kind := range []string{devices.TargetSites, devices.TargetOrganization} {
		id := ten.SiteID
		if kind == devices.TargetOrganization {
			id = ten.OrgID
		}
		r, err := s.ResolveTargets(ctx, kind, []string{id}, 10)
		if err != nil || !slices.Equal(ids(r), want) || r.Exceeds {
			t.Fatalf("%s: %v exceeds %v, %v", kind, ids(r), r.Exceeds, err)
		}
		if r, err := s.ResolveTargets(ctx, kind, []string{id}, 1); err != nil || !r.Exceeds {
			t.Fatalf("%s over a bound of 1: exceeds %v, %v", kind, r.Exceeds, err)
		}
	}
	if r, err := s.ResolveTargets(ctx, devices.TargetOrganization, []string{other.OrgID}, 10); err != nil || len(r.Devices) != 0 {
		t.Fatalf("another tenant's organization: %v %v", ids(r), err)
	}
	if _, err := s.ResolveTargets(ctx, "planets", []string{a}, 10); err == nil {
		t.Fatal("an unknown kind resolved")
	}
}

// CheckTargets refuses targets that break a rule, field by field, and accepts the rest; what
// the IDs name must be the owner's, live and within the caller's scope.
func TestCheckTargets(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten, other := e.NewTenant(admin, "Alpha"), e.NewTenant(admin, "Bravo")
	sibling := e.CreateOrg(admin, ten.PartnerID, "Alpha Sibling")
	row := func(tn apptest.Tenant, host, status string) string {
		return e.InsertDevice(apptest.DeviceRow{PartnerID: tn.PartnerID, OrgID: tn.OrgID, SiteID: tn.SiteID, Hostname: host, Status: status})
	}
	group := func(tn apptest.Tenant) string {
		return e.Must(201, tn.Org, "POST", api+"/groups", map[string]any{"name": "Servers", "type": "static"}).Map(t)["id"].(string)
	}
	dev, gone, group1 := row(ten, "a", ""), row(ten, "gone", devices.StatusDecommissioned), group(ten)
	orgOwner := tenancy.Owner{PartnerID: ten.PartnerID, OrgID: ten.OrgID}
	partnerOwner := tenancy.Owner{PartnerID: ten.PartnerID}
	as := func(scope access.Scope) context.Context {
		return access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, ID: "test", Name: "test", Scope: scope})
	}
	partnerWide := as(access.Scope{Level: access.LevelPartner, PartnerID: ten.PartnerID})
	many := make([]string, devices.MaxTargetIDs+1)
	for i := range many {
		many[i] = store.NewID()
	}
	tests := []struct {
		name    string
		ctx     context.Context
		owner   tenancy.Owner
		targets devices.Targets
		field   string // the one detail wanted; empty: accepted
	}{
		{"an unknown type", partnerWide, orgOwner, devices.Targets{Type: "planets", IDs: []string{dev}}, "targets.type"},
		{"devices without IDs", partnerWide, orgOwner, devices.Targets{Type: devices.TargetDevices}, "targets.ids"},
		{"groups without IDs", partnerWide, orgOwner, devices.Targets{Type: devices.TargetGroups, IDs: []string{}}, "targets.ids"},
		{"more IDs than the bound", partnerWide, orgOwner, devices.Targets{Type: devices.TargetSites, IDs: many}, "targets.ids"},
		{"more organizations than the bound", partnerWide, partnerOwner, devices.Targets{Type: devices.TargetOrganization, IDs: many}, "targets.ids"},
		{"a malformed ID", partnerWide, orgOwner, devices.Targets{Type: devices.TargetDevices, IDs: []string{dev, "not-an-id"}}, "targets.ids[1]"},
		{"an ID listed twice", partnerWide, orgOwner, devices.Targets{Type: devices.TargetDevices, IDs: []string{dev, dev}}, "targets.ids[1]"},
		{"an organization's work naming another organization", partnerWide, orgOwner,
			devices.Targets{Type: devices.TargetOrganization, IDs: []string{sibling}}, "targets.ids"},
		{"an organization's work naming its own", partnerWide, orgOwner, devices.Targets{Type: devices.TargetOrganization, IDs: []string{ten.OrgID}}, ""},
		{"an organization's work naming none", partnerWide, orgOwner, devices.Targets{Type: devices.TargetOrganization}, ""},
		{"partner-wide work naming its organizations", partnerWide, partnerOwner,
			devices.Targets{Type: devices.TargetOrganization, IDs: []string{ten.OrgID, sibling}}, ""},
		{"partner-wide work naming another partner's organization", partnerWide, partnerOwner,
			devices.Targets{Type: devices.TargetOrganization, IDs: []string{ten.OrgID, other.OrgID}}, "targets.ids[1]"},
		{"the owner's site", partnerWide, orgOwner, devices.Targets{Type: devices.TargetSites, IDs: []string{ten.SiteID}}, ""},
		{"the owner's group", partnerWide, orgOwner, devices.Targets{Type: devices.TargetGroups, IDs: []string{group1}}, ""},
		{"the owner's device", partnerWide, orgOwner, devices.Targets{Type: devices.TargetDevices, IDs: []string{dev}}, ""},
		{"a device given as a site", partnerWide, orgOwner, devices.Targets{Type: devices.TargetSites, IDs: []string{dev}}, "targets.ids[0]"},
		{"a decommissioned device", partnerWide, orgOwner, devices.Targets{Type: devices.TargetDevices, IDs: []string{dev, gone}}, "targets.ids[1]"},
		{"a device of another organization than the owner's", partnerWide, tenancy.Owner{PartnerID: ten.PartnerID, OrgID: sibling},
			devices.Targets{Type: devices.TargetDevices, IDs: []string{dev}}, "targets.ids[0]"},
		{"a device out of the caller's scope", as(access.Scope{Level: access.LevelOrganization, PartnerID: ten.PartnerID, OrgID: sibling}),
			partnerOwner, devices.Targets{Type: devices.TargetDevices, IDs: []string{dev}}, "targets.ids[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			targets := tc.targets
			err := app.Service[*devices.Service](e.App).CheckTargets(tc.ctx, e.App.DB, &targets, tc.owner)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("CheckTargets(%+v) = %v, want nil", tc.targets, err)
				}
				return
			}
			if got := detailFields(err); !slices.Equal(got, []string{tc.field}) {
				t.Fatalf("CheckTargets(%+v) = %v (fields %v), want one detail on %s", tc.targets, err, got, tc.field)
			}
		})
	}

	// An organization's work naming its own organization keeps no IDs: it is that organization.
	own := devices.Targets{Type: devices.TargetOrganization, IDs: []string{ten.OrgID}}
	if err := app.Service[*devices.Service](e.App).CheckTargets(partnerWide, e.App.DB, &own, orgOwner); err != nil || own.IDs == nil || len(own.IDs) != 0 {
		t.Fatalf("own organization: %v %v", own.IDs, err)
	}
	if b, err := json.Marshal(devices.Targets{Type: devices.TargetOrganization}); err != nil || string(b) != `{"type":"organization","ids":[]}` {
		t.Fatalf("targets without IDs encode as %s (%v), want an empty list", b, err)
	}
}

// Another tenant's site, group or device is reported exactly as one that does not exist.
func TestCheckTargetsTellsNothingOfOtherTenants(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten, other := e.NewTenant(admin, "Alpha"), e.NewTenant(admin, "Bravo")
	theirGroup := e.Must(201, other.Org, "POST", api+"/groups", map[string]any{"name": "Theirs", "type": "static"}).Map(t)["id"].(string)
	theirDevice := e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "theirs"})
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, ID: "test", Name: "test",
		Scope: access.Scope{Level: access.LevelPartner, PartnerID: ten.PartnerID}})
	owner := tenancy.Owner{PartnerID: ten.PartnerID, OrgID: ten.OrgID}
	for kind, theirs := range map[string]string{devices.TargetSites: other.SiteID, devices.TargetGroups: theirGroup, devices.TargetDevices: theirDevice} {
		check := func(id string) error {
			return app.Service[*devices.Service](e.App).CheckTargets(ctx, e.App.DB, &devices.Targets{Type: kind, IDs: []string{id}}, owner)
		}
		foreign, missing := check(theirs), check(store.NewID())
		fe, ok := apperr.As(foreign)
		me, _ := apperr.As(missing)
		if !ok || me == nil || fe.Code != apperr.CodeValidation || !slices.Equal(fe.Details, me.Details) || fe.Message != me.Message {
			t.Errorf("%s: another tenant's = %v %+v, a missing one = %v %+v; want the same answer", kind, foreign, fe, missing, me)
		}
	}
}

func detailFields(err error) []string {
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.CodeValidation {
		return nil
	}
	out := make([]string, len(e.Details))
	for i, d := range e.Details {
		out[i] = d.Field
	}
	return out
}
