package devices_test

import (
	"context"
	"slices"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/platform/access"
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
