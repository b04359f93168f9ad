package identity_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"gale/internal/testkit/apptest"
)

const api = "/api/v1"

type user struct {
	ID        string   `json:"id"`
	Email     string   `json:"email"`
	Name      string   `json:"name"`
	Status    string   `json:"status"`
	Scope     string   `json:"scope"`
	PartnerID *string  `json:"partnerId"`
	OrgID     *string  `json:"orgId"`
	RoleID    string   `json:"roleId"`
	RoleName  string   `json:"roleName"`
	OrgAccess string   `json:"orgAccess"`
	OrgIDs    []string `json:"orgIds"`
}

type role struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Scope       string   `json:"scope"`
	BuiltIn     bool     `json:"builtIn"`
	Permissions []string `json:"permissions"`
	PartnerID   *string  `json:"partnerId"`
	OrgID       *string  `json:"orgId"`
	UserCount   *int     `json:"userCount"`
}

type pageInfo struct {
	HasMore bool   `json:"hasMore"`
	Cursor  string `json:"cursor"`
	Page    int    `json:"page"`
	Limit   int    `json:"limit"`
	Total   *int   `json:"total"`
}

type list[T any] struct {
	Data       []T      `json:"data"`
	Pagination pageInfo `json:"pagination"`
}

type inviteResult struct {
	User      user   `json:"user"`
	InviteURL string `json:"inviteUrl"`
	EmailSent bool   `json:"emailSent"`
}

// me returns the caller's own profile.
func me(e *apptest.Env, c apptest.Caller) user {
	e.T.Helper()
	var u user
	e.Must(http.StatusOK, c, "GET", api+"/users/me", nil).JSON(e.T, &u)
	return u
}

func listUsers(e *apptest.Env, c apptest.Caller, query string) list[user] {
	e.T.Helper()
	var l list[user]
	e.Must(http.StatusOK, c, "GET", api+"/users"+query, nil).JSON(e.T, &l)
	return l
}

func emails(us []user) []string {
	out := []string{}
	for _, u := range us {
		out = append(out, u.Email)
	}
	return out
}

func roleIDs(rs []role) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// tokenOf extracts the token from an invitation link.
func tokenOf(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatalf("parse %q: %v", link, err)
	}
	tok := u.Query().Get("token")
	if tok == "" || u.Path != "/accept-invite" {
		t.Fatalf("invite link %q has no token", link)
	}
	return tok
}

func createRole(e *apptest.Env, c apptest.Caller, body map[string]any) role {
	e.T.Helper()
	var r role
	e.Must(http.StatusCreated, c, "POST", api+"/roles", body).JSON(e.T, &r)
	return r
}

// auditCount counts audit entries with the action about the resource.
func auditCount(t *testing.T, e *apptest.Env, action, resourceID string) int {
	t.Helper()
	var n int
	err := e.App.DB.SQL.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_logs WHERE action = $1 AND resource_id = $2`,
		action, resourceID).Scan(&n)
	if err != nil {
		t.Fatalf("count audit entries: %v", err)
	}
	return n
}

func wantStatus(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || (code != "" && r.ErrorCode() != code) {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
