package patches_test

import (
	"context"
	"testing"

	"gale/internal/domains/patches"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

func orgCtx(ten apptest.Tenant, orgID string) context.Context {
	return access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorUser, ID: "u", Email: "u@gale.test",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: ten.PartnerID, OrgID: orgID}})
}

// A device's patches, a patch's devices and a device's summary keep to the caller's
// organizations, even within one partner; a decision of the organization shows where asked.
func TestDeviceAndPatchViewsKeepToScope(t *testing.T) {
	f := newFixture(t)
	second := f.e.CreateOrg(f.e.Admin(), f.a.PartnerID, "Alpha Second")
	mine := f.device(f.a, "mine-01", "linux")
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	f.e.Must(200, f.e.Admin(), "GET", api+"/orgs/sites?orgId="+second, nil).JSON(t, &sites)
	theirs := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: second, SiteID: sites.Data[0].ID, Hostname: "theirs-01"})
	_, cmds := f.scan(f.a.Partner, mine, theirs)
	f.result(f.a, mine, cmds[mine], agentproto.ResultCompleted, scanResult(true, upd("openssl", "1", "2", true), upd("vim", "1", "2", false)))
	f.result(apptest.Tenant{PartnerID: f.a.PartnerID, OrgID: second}, theirs, cmds[theirs], agentproto.ResultCompleted,
		scanResult(false, upd("openssl", "1", "2", true)))
	ssl := byPackage(f.patchList(f.a.Partner, ""))["openssl 2"]

	ctx := orgCtx(f.a, f.a.OrgID)
	list, _, _, err := f.s.DevicePatches(ctx, mine, patches.DevicePatchFilter{}, store.Page{Limit: 10})
	if err != nil || len(list) != 2 || list[0].State != patches.DeviceStatePending || list[0].InstalledVersion != "1" || list[0].OrgID != f.a.OrgID {
		t.Fatalf("the device's patches: %+v (%v)", list, err)
	}
	if list, _, _, err := f.s.DevicePatches(ctx, theirs, patches.DevicePatchFilter{}, store.Page{Limit: 10}); err != nil || len(list) != 0 {
		t.Fatalf("another organization's device shows patches: %+v (%v)", list, err)
	}
	if _, _, _, err := f.s.DevicePatches(ctx, mine, patches.DevicePatchFilter{States: []string{"gone"}}, store.Page{Limit: 10}); !apperr.IsCode(err, apperr.CodeValidation) {
		t.Fatalf("an unknown state: %v", err)
	}
	devs, _, _, err := f.s.PatchDevices(ctx, ssl.ID, []string{patches.DeviceStatePending}, store.Page{Limit: 10})
	if err != nil || len(devs) != 1 || devs[0].DeviceID != mine || devs[0].Hostname != "mine-01" {
		t.Fatalf("the patch's devices for one organization: %+v (%v)", devs, err)
	}
	if devs, _, _, _ := f.s.PatchDevices(orgCtx(f.a, ""), ssl.ID, nil, store.Page{Limit: 10}); len(devs) != 0 {
		t.Fatalf("a scope without an organization sees devices: %+v", devs)
	}
	if _, _, _, err := f.s.PatchDevices(orgCtx(f.b, f.b.OrgID), ssl.ID, nil, store.Page{Limit: 10}); !apperr.IsCode(err, apperr.CodeNotFound) {
		t.Fatalf("another partner's patch: %v", err)
	}
	if s, err := f.s.DeviceSummary(ctx, mine); err != nil || !s.Scanned || s.Pending != 2 || s.CriticalPending != 1 || !s.RebootRequired || s.LastScanAt == nil {
		t.Fatalf("the device's summary: %+v (%v)", s, err)
	}
	if s, err := f.s.DeviceSummary(ctx, theirs); err != nil || s.Scanned {
		t.Fatalf("another organization's device's summary: %+v (%v)", s, err)
	}

	if _, err := f.s.Decide(ctx, ssl.ID, patches.ApprovalApproved, "", "", nil); err != nil {
		t.Fatal(err)
	}
	if p, err := f.s.GetPatchIn(ctx, ssl.ID, f.a.OrgID); err != nil || p.PatchApproval != patches.ApprovalApproved {
		t.Fatalf("the patch for the organization: %s (%v)", p.PatchApproval, err)
	}
	if p, err := f.s.GetPatch(ctx, ssl.ID); err != nil || p.PatchApproval != patches.ApprovalPending {
		t.Fatalf("the partner's decision: %s (%v)", p.PatchApproval, err)
	}
	if _, err := f.s.GetPatchIn(ctx, ssl.ID, second); !apperr.IsCode(err, apperr.CodeValidation) {
		t.Fatalf("another organization's decision: %v", err)
	}
	list, _, _, _ = f.s.DevicePatches(ctx, mine, patches.DevicePatchFilter{States: []string{patches.DeviceStatePending}}, store.Page{Limit: 10})
	for _, p := range list {
		if want := map[bool]string{true: patches.ApprovalApproved, false: patches.ApprovalPending}[p.ID == ssl.ID]; p.PatchApproval != want {
			t.Fatalf("%s on the device is %s, want %s", p.Title, p.PatchApproval, want)
		}
	}
}
