package identity_test

import (
	"encoding/base64"
	"net/http"
	"sync"
	"testing"

	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/testkit/apptest"
)

type reviewItem struct {
	ID        string  `json:"id"`
	UserID    string  `json:"userId"`
	UserEmail string  `json:"userEmail"`
	RoleID    string  `json:"roleId"`
	RoleName  string  `json:"roleName"`
	OrgID     *string `json:"orgId"`
	OrgAccess string  `json:"orgAccess"`
	Decision  string  `json:"decision"`
	Note      string  `json:"note"`
	AppliedAt *string `json:"appliedAt"`
}

type review struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Status       string       `json:"status"`
	ItemCount    int          `json:"itemCount"`
	PendingCount int          `json:"pendingCount"`
	CompletedAt  *string      `json:"completedAt"`
	Items        []reviewItem `json:"items"`
}

func TestAccessReviewFlow(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	e.NewTenant(e.Admin(), "Beta")
	goneID, gone := e.CreateUser("leaver@alpha.test", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgTechnician)
	e.Must(http.StatusOK, gone, "GET", api+"/users/me", nil)

	var r review
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/access-reviews", map[string]any{"name": "Q3 review",
		"dueAt": "2030-01-01T00:00:00Z"}).JSON(t, &r)
	if r.Status != identity.ReviewInProgress || r.ItemCount != 3 || r.PendingCount != 3 || len(r.Items) != 3 {
		t.Fatalf("new review = %+v", r)
	}
	got := map[string]reviewItem{}
	for _, it := range r.Items {
		got[it.UserEmail] = it
	}
	leaver, ok := got["leaver@alpha.test"]
	if !ok || leaver.RoleID != access.RoleOrgTechnician || leaver.RoleName != "Organization Technician" || leaver.OrgID == nil ||
		*leaver.OrgID != a.OrgID || leaver.Decision != "pending" {
		t.Fatalf("items = %+v", r.Items)
	}
	if _, ok := got["beta-org@gale.test"]; ok {
		t.Fatal("review snapshotted another partner's user")
	}

	itemURL := func(id string) string { return api + "/access-reviews/" + r.ID + "/items/" + id }
	e.Must(http.StatusOK, a.Partner, "PATCH", itemURL(leaver.ID), map[string]any{"decision": "revoke", "note": "left the company"})
	wantStatus(t, e.Do(a.Partner, "POST", api+"/access-reviews/"+r.ID+"/complete", nil), http.StatusConflict, apperr.CodeConflict)
	wantStatus(t, e.Do(a.Partner, "PATCH", itemURL(leaver.ID), map[string]any{"decision": "maybe"}), http.StatusBadRequest, apperr.CodeValidation)
	// Nobody revokes itself.
	wantStatus(t, e.Do(a.Partner, "PATCH", itemURL(got["alpha-partner@gale.test"].ID), map[string]any{"decision": "revoke"}),
		http.StatusForbidden, apperr.CodeForbidden)
	for _, email := range []string{"alpha-partner@gale.test", "alpha-org@gale.test"} {
		e.Must(http.StatusOK, a.Partner, "PATCH", itemURL(got[email].ID), map[string]any{"decision": "keep"})
	}

	var done review
	e.Must(http.StatusOK, a.Partner, "POST", api+"/access-reviews/"+r.ID+"/complete", nil).JSON(t, &done)
	if done.Status != identity.ReviewCompleted || done.CompletedAt == nil || done.PendingCount != 0 {
		t.Fatalf("completed = %+v", done)
	}
	for _, it := range done.Items {
		if (it.AppliedAt != nil) != (it.UserID == goneID) {
			t.Fatalf("item %s applied = %v", it.UserEmail, it.AppliedAt)
		}
	}
	// The revocation took effect: disabled, session over; the others keep theirs.
	var u user
	e.Must(http.StatusOK, a.Partner, "GET", api+"/users/"+goneID, nil).JSON(t, &u)
	if u.Status != identity.StatusDisabled {
		t.Fatalf("revoked user = %+v", u)
	}
	wantStatus(t, e.Do(gone, "GET", api+"/users/me", nil), http.StatusUnauthorized, apperr.CodeUnauthorized)
	me(e, a.Org)
	if auditCount(t, e, "access_review.revoke", goneID) != 1 || auditCount(t, e, "access_review.complete", r.ID) != 1 ||
		auditCount(t, e, "access_review.create", r.ID) != 1 {
		t.Fatal("review not audited")
	}

	// Completed is final.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/access-reviews/"+r.ID+"/complete", nil), http.StatusConflict, apperr.CodeConflict)
	wantStatus(t, e.Do(a.Partner, "PATCH", itemURL(leaver.ID), map[string]any{"decision": "keep"}), http.StatusConflict, apperr.CodeConflict)

	var l list[review]
	e.Must(http.StatusOK, a.Partner, "GET", api+"/access-reviews?status=completed", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != r.ID || l.Data[0].Items != nil {
		t.Fatalf("list = %+v", l.Data)
	}
	// A new review leaves the disabled user out.
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/access-reviews", map[string]any{"name": "Q4"}).JSON(t, &r)
	if r.ItemCount != 2 {
		t.Fatalf("second review has %d items", r.ItemCount)
	}
}

func TestAccessReviewConcurrentCompletion(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	id, _ := e.CreateUser("x@alpha.test", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgViewer)
	var r review
	e.Must(http.StatusCreated, a.Org, "POST", api+"/access-reviews", map[string]any{"name": "Org review"}).JSON(t, &r)
	if r.ItemCount != 2 {
		t.Fatalf("org review has %d items", r.ItemCount)
	}
	for _, it := range r.Items {
		decision := "keep"
		if it.UserID == id {
			decision = "revoke"
		}
		e.Must(http.StatusOK, a.Org, "PATCH", api+"/access-reviews/"+r.ID+"/items/"+it.ID, map[string]any{"decision": decision})
	}
	var wg sync.WaitGroup
	statuses := make([]int, 4)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.Do(a.Org, "POST", api+"/access-reviews/"+r.ID+"/complete", nil).Status
		}()
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
		default:
			t.Fatalf("concurrent completion statuses = %v", statuses)
		}
	}
	if ok != 1 {
		t.Fatalf("concurrent completion statuses = %v, want exactly one 200", statuses)
	}
	if n := auditCount(t, e, "access_review.revoke", id); n != 1 {
		t.Fatalf("revocation audited %d times", n)
	}
}

func TestAccessReviewTenancyIsolation(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	var br review
	e.Must(http.StatusCreated, b.Partner, "POST", api+"/access-reviews", map[string]any{"name": "Beta review"}).JSON(t, &br)
	var bo review
	e.Must(http.StatusCreated, b.Org, "POST", api+"/access-reviews", map[string]any{"name": "Beta org review"}).JSON(t, &bo)
	var ao review
	e.Must(http.StatusCreated, a.Org, "POST", api+"/access-reviews", map[string]any{"name": "Alpha org review"}).JSON(t, &ao)

	for _, rv := range []review{br, bo} {
		item := rv.Items[0].ID
		for _, c := range []apptest.Caller{a.Partner, a.Org} {
			wantStatus(t, e.Do(c, "GET", api+"/access-reviews/"+rv.ID, nil), http.StatusNotFound, apperr.CodeNotFound)
			wantStatus(t, e.Do(c, "PATCH", api+"/access-reviews/"+rv.ID+"/items/"+item, map[string]any{"decision": "revoke"}),
				http.StatusNotFound, apperr.CodeNotFound)
			wantStatus(t, e.Do(c, "POST", api+"/access-reviews/"+rv.ID+"/complete", nil), http.StatusNotFound, apperr.CodeNotFound)
		}
	}
	// An item of another review is not found through one's own review.
	wantStatus(t, e.Do(a.Org, "PATCH", api+"/access-reviews/"+ao.ID+"/items/"+br.Items[0].ID, map[string]any{"decision": "keep"}),
		http.StatusNotFound, apperr.CodeNotFound)
	// A partner sees its organizations' reviews, an organization not its partner's.
	var l list[review]
	e.Must(http.StatusOK, a.Partner, "GET", api+"/access-reviews", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != ao.ID {
		t.Fatalf("alpha partner lists %+v", l.Data)
	}
	e.Must(http.StatusOK, b.Org, "GET", api+"/access-reviews", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != bo.ID {
		t.Fatalf("beta org lists %+v", l.Data)
	}
	e.Must(http.StatusOK, admin, "GET", api+"/access-reviews?limit=2", nil).JSON(t, &l)
	if len(l.Data) != 2 || !l.Pagination.HasMore || l.Data[0].ID != ao.ID {
		t.Fatalf("system page 1 = %+v", l)
	}
	e.Must(http.StatusOK, admin, "GET", api+"/access-reviews?limit=2&cursor="+l.Pagination.Cursor, nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != br.ID || l.Pagination.HasMore {
		t.Fatalf("system page 2 = %+v", l)
	}
	// A forged cursor is the caller's mistake, on either database.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`["not-a-uuid","` + br.ID + `"]`))
	wantStatus(t, e.Do(admin, "GET", api+"/access-reviews?cursor="+forged, nil), http.StatusBadRequest, apperr.CodeValidation)
	// Beta's review is untouched.
	var got review
	e.Must(http.StatusOK, b.Partner, "GET", api+"/access-reviews/"+br.ID, nil).JSON(t, &got)
	if got.Status != identity.ReviewInProgress || got.PendingCount != got.ItemCount {
		t.Fatalf("beta review = %+v", got)
	}
}

func TestOperationsRegistered(t *testing.T) {
	e := apptest.New(t)
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	e.Must(http.StatusOK, apptest.Anonymous, "GET", api+"/openapi.json", nil).JSON(t, &doc)
	ids := map[string]bool{}
	for _, ops := range doc.Paths {
		for _, op := range ops {
			ids[op.OperationID] = true
		}
	}
	for _, id := range []string{"get-me", "update-me", "list-users", "list-assignable-roles", "get-user", "invite-user",
		"resend-invite", "update-user", "delete-user", "assign-user-role", "list-roles", "create-role", "get-role",
		"update-role", "delete-role", "clone-role", "list-role-users", "get-role-effective-permissions",
		"list-available-permissions", "list-access-reviews", "create-access-review", "get-access-review",
		"decide-access-review-item", "complete-access-review"} {
		if !ids[id] {
			t.Errorf("operation %s is not registered", id)
		}
	}
}
