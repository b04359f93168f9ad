package auth

import (
	"testing"
	"time"

	"gale/internal/platform/access"
)

// A cached principal comes back as it went in, as a copy: a partner caller limited to no
// organization (an empty, non-nil list) must not come back unlimited (nil), and a handler's
// change to its copy must not reach the cache.
func TestCachedPrincipalsKeepTheirLimitsAndAreCopies(t *testing.T) {
	c := newPrincipalCache(time.Hour)
	now := time.Now()
	in := &access.Principal{ID: "u", Scope: access.Scope{Level: access.LevelPartner, PartnerID: "p", OrgIDs: []string{}},
		Permissions: access.Permissions{"devices:read"}}
	c.put("token", in, c.Generation(), now)
	in.Permissions[0] = "changed after put"
	out, ok := c.get("token", now)
	if !ok || out.Scope.OrgIDs == nil || len(out.Scope.OrgIDs) != 0 || out.Permissions[0] != "devices:read" {
		t.Fatalf("cached principal = %+v (%v)", out, ok)
	}
	out.Permissions[0] = "changed after get"
	if again, _ := c.get("token", now); again.Permissions[0] != "devices:read" {
		t.Fatalf("a copy's change reached the cache: %v", again.Permissions)
	}
}
