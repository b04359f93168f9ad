package vulnerabilities_test

import (
	"context"
	"strings"
	"testing"

	"gale/internal/domains/vulnerabilities"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

func orgCtx(ten apptest.Tenant) context.Context {
	return access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorUser, ID: "u", Name: "u",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: ten.PartnerID, OrgID: ten.OrgID}})
}

// The console's lookups: a CVE's headline, a device's findings worst first, and the search of
// the lists, each within the caller's scope.
func TestCVEDeviceFindingsAndSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	web := f.device(f.a, "web", map[string]string{"openssl": "3.0.11-1~deb12u1", "jq": "1.6-2.1+deb12u1"})
	other := f.device(f.b, "other", map[string]string{"jq": "1.6-2.1+deb12u1"})
	f.importOSV(osv("CVE-2026-0001", "openssl", "3.0.13-1~deb12u1", critical, true), osv("CVE-2026-0003", "jq", "1.6-2.1+deb12u3", medium, false))
	a, b := orgCtx(f.a), orgCtx(f.b)

	v, err := f.s.CVE(a, "cve-2026-0001")
	if err != nil || v.CVEID != "CVE-2026-0001" || v.Severity != "critical" || !v.KnownExploited || v.OpenFindings != 1 || v.AffectedDevices != 1 ||
		len(v.Packages) != 1 || v.Summary != "test CVE-2026-0001" {
		t.Fatalf("CVE = %+v, %v", v, err)
	}
	if _, err := f.s.CVE(b, "CVE-2026-0001"); !apperr.IsCode(err, apperr.CodeNotFound) {
		t.Fatalf("a CVE without findings in scope: %v", err)
	}
	if _, err := f.s.CVE(a, "CVE-2026-"+strings.Repeat("9", 40)); !apperr.IsCode(err, apperr.CodeNotFound) {
		t.Fatalf("an overlong CVE ID: %v", err)
	}

	got, _, _, err := f.s.DeviceFindings(a, web.DeviceID, "", store.Page{Limit: 10})
	if err != nil || len(got) != 2 || got[0].CVEID != "CVE-2026-0001" || got[1].CVEID != "CVE-2026-0003" {
		t.Fatalf("device findings = %+v, %v", got, err)
	}
	if _, err := f.s.Mitigate(a, got[0].ID, vulnerabilities.VulnMitigate{}); err != nil {
		t.Fatal(err)
	}
	if got, _, _, _ := f.s.DeviceFindings(a, web.DeviceID, vulnerabilities.StatusMitigated, store.Page{Limit: 10}); len(got) != 1 {
		t.Fatalf("mitigated findings = %+v", got)
	}
	one, next, _, err := f.s.DeviceFindings(a, web.DeviceID, "", store.Page{Limit: 1})
	if err != nil || len(one) != 1 || next == "" {
		t.Fatalf("a page of one: %+v %q %v", one, next, err)
	}
	for _, id := range []string{other.DeviceID, "not-an-id"} {
		if _, _, _, err := f.s.DeviceFindings(a, id, "", store.Page{Limit: 10}); !apperr.IsCode(err, apperr.CodeNotFound) {
			t.Fatalf("findings of %s out of scope: %v", id, err)
		}
	}
	if _, _, _, err := f.s.DeviceFindings(a, web.DeviceID, "ignored", store.Page{Limit: 10}); !apperr.IsCode(err, apperr.CodeValidation) {
		t.Fatalf("a bad status: %v", err)
	}

	for search, want := range map[string]int{"jq": 1, "0003": 1, "TEST CVE": 1, "nothing": 0} {
		list, _, _, err := f.s.List(a, vulnerabilities.ListFilter{Search: search}, store.Page{Limit: 10})
		if err != nil || len(list) != want {
			t.Fatalf("search %q = %+v, %v", search, list, err)
		}
		groups, _, _, err := f.s.Software(a, vulnerabilities.ListFilter{Search: search}, store.Page{Limit: 10})
		if err != nil || len(groups) != want {
			t.Fatalf("software search %q = %+v, %v", search, groups, err)
		}
	}
}
