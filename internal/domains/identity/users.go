// Package identity manages who can use Gale: users and their invitations, roles (built-in
// and custom), and access reviews. Credentials (passwords, sessions, MFA, keys) belong to
// package auth, which reads users through this package's views.
package identity

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// User statuses.
const (
	StatusInvited  = "invited"
	StatusActive   = "active"
	StatusDisabled = "disabled"
)

// Organization access of partner users.
const (
	OrgAccessAll      = "all"
	OrgAccessSelected = "selected"
	OrgAccessNone     = "none"
)

// User is the API view of a user.
type User struct {
	ID          string       `json:"id" format:"uuid"`
	Email       string       `json:"email"`
	Name        string       `json:"name"`
	Status      string       `json:"status" enum:"invited,active,disabled"`
	Scope       access.Level `json:"scope" enum:"system,partner,organization"`
	PartnerID   *string      `json:"partnerId"`
	OrgID       *string      `json:"orgId"`
	RoleID      string       `json:"roleId"`
	RoleName    string       `json:"roleName"`
	OrgAccess   string       `json:"orgAccess" enum:"all,selected,none" doc:"Partner users: which organizations they reach."`
	OrgIDs      []string     `json:"orgIds,omitempty" doc:"With orgAccess selected: the organizations reached."`
	MFAEnabled  bool         `json:"mfaEnabled"`
	LastLoginAt *time.Time   `json:"lastLoginAt"`
	CreatedAt   time.Time    `json:"createdAt"`
	UpdatedAt   time.Time    `json:"updatedAt"`
}

// userColumns is selected by every user query, in scanUser's order.
const userColumns = `u.id, u.email, u.name, u.status, u.scope, u.partner_id, u.org_id, u.role_id, r.name,
	u.org_access, u.mfa_enabled, u.last_login_at, u.created_at, u.updated_at`

const userFrom = ` FROM users u JOIN roles r ON r.id = u.role_id`

type scanner = store.Scanner

func scanUser(row scanner) (User, error) {
	var u User
	var partnerID, orgID sql.NullString
	var lastLogin sql.NullTime
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Status, &u.Scope, &partnerID, &orgID, &u.RoleID, &u.RoleName,
		&u.OrgAccess, &u.MFAEnabled, &lastLogin, &u.CreatedAt, &u.UpdatedAt)
	if err != nil {
		return u, err
	}
	u.PartnerID, u.OrgID = store.StringPtr(partnerID), store.StringPtr(orgID)
	if lastLogin.Valid {
		t := lastLogin.Time
		u.LastLoginAt = &t
	}
	return u, nil
}

// LoadUser reads one user by ID without a scope check: for callers that already proved who
// the user is (sign-in, the caller's own profile).
func LoadUser(ctx context.Context, q store.Querier, id string) (User, error) {
	u, err := store.ByID(ctx, q, "user", `SELECT `+userColumns+userFrom, "u.id", id, &store.Args{}, nil, scanUser)
	if err != nil {
		return u, fmt.Errorf("load user %s: %w", id, err)
	}
	return u, loadOrgIDs(ctx, q, []*User{&u})
}

// loadOrgIDs fills OrgIDs of users with selected organization access.
func loadOrgIDs(ctx context.Context, q store.Querier, users []*User) error {
	for _, u := range users {
		if u.OrgAccess != OrgAccessSelected {
			continue
		}
		ids, err := SelectedOrgIDs(ctx, q, u.ID)
		if err != nil {
			return err
		}
		u.OrgIDs = ids
	}
	return nil
}

// SelectedOrgIDs lists the organizations a partner user with selected access reaches.
func SelectedOrgIDs(ctx context.Context, q store.Querier, userID string) ([]string, error) {
	ids, err := store.QueryStrings(ctx, q, `SELECT org_id FROM user_org_access WHERE user_id = $1 ORDER BY org_id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list organizations of user %s: %w", userID, err)
	}
	if ids == nil {
		// Empty, not nil: a scope's nil OrgIDs means every organization.
		ids = []string{}
	}
	return ids, nil
}
