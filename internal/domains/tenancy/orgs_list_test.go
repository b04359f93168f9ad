package tenancy_test

import (
	"bytes"
	"net/http"
	"testing"

	"gale/internal/testkit/apptest"
)

// /orgs is the documented listing of organizations in scope; /orgs/ answers the same.
func TestOrganizationsInScopeAtOrgsWithAndWithoutSlash(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	p := e.CreatePartner(admin, "Listing MSP")
	e.CreateOrg(admin, p, "Customer A")
	e.CreateOrg(admin, p, "Customer B")
	plain := e.Must(http.StatusOK, admin, "GET", "/api/v1/orgs?partnerId="+p, nil)
	slash := e.Must(http.StatusOK, admin, "GET", "/api/v1/orgs/?partnerId="+p, nil)
	if !bytes.Equal(plain.Body, slash.Body) {
		t.Fatalf("GET /orgs = %s\nGET /orgs/ = %s", plain.Body, slash.Body)
	}
	if l := getList(e, admin, "/api/v1/orgs?partnerId="+p); len(l.Data) != 2 {
		t.Fatalf("GET /orgs listed %d organizations, want 2", len(l.Data))
	}
}
