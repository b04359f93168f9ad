package identity

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Me is the caller's own profile with what it may do.
type Me struct {
	User
	Permissions []string `json:"permissions" doc:"Every catalog permission the caller's role amounts to."`
}

// requireUserCaller refuses credentials that are not a signed-in user (API keys).
func requireUserCaller(ctx context.Context) (*access.Principal, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.Kind != access.ActorUser {
		return nil, apperr.Forbidden("only a signed-in user has a profile; API keys cannot use /users/me")
	}
	return p, nil
}

// GetMe returns the caller's profile and expanded permissions.
func (s *Service) GetMe(ctx context.Context) (Me, error) {
	p, err := requireUserCaller(ctx)
	if err != nil {
		return Me{}, err
	}
	u, err := LoadUser(ctx, s.db, p.UserID)
	if err != nil {
		return Me{}, err
	}
	perms := p.Permissions.Expand()
	if perms == nil {
		perms = []string{}
	}
	return Me{User: u, Permissions: perms}, nil
}

// UpdateMe changes the caller's own name.
func (s *Service) UpdateMe(ctx context.Context, name *string) (Me, error) {
	p, err := requireUserCaller(ctx)
	if err != nil {
		return Me{}, err
	}
	if name != nil {
		n := strings.TrimSpace(*name)
		if n == "" {
			return Me{}, apperr.Invalid("name", "name cannot be empty")
		}
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			before, err := LoadUser(ctx, tx, p.UserID)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE users SET name = $1, updated_at = $2 WHERE id = $3`, n, s.clock.Now(), p.UserID); err != nil {
				return fmt.Errorf("rename user %s: %w", p.UserID, err)
			}
			after, err := LoadUser(ctx, tx, p.UserID)
			if err != nil {
				return err
			}
			return audit.Record(ctx, tx, audit.Entry{Action: "user.update", ResourceType: "user", ResourceID: p.UserID,
				ResourceName: after.Email, PartnerID: store.Deref(after.PartnerID), OrgID: store.Deref(after.OrgID), Details: audit.Diff(before, after)})
		})
		if err != nil {
			return Me{}, fmt.Errorf("update own profile: %w", err)
		}
	}
	return s.GetMe(ctx)
}

// UserListFilter narrows a list of users.
type UserListFilter struct {
	Search string
	Status string
	RoleID string
	OrgID  string
}

// ListUsers lists the users in the caller's scope, by email.
func (s *Service) ListUsers(ctx context.Context, f UserListFilter, page store.Page) ([]User, string, *int, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{UserFilter(p.Scope, &a)}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "u.email", "u.name"))
	}
	if f.Status != "" {
		conds = append(conds, "u.status = "+a.Add(f.Status))
	}
	if f.RoleID != "" {
		conds = append(conds, "u.role_id = "+a.Add(f.RoleID))
	}
	if f.OrgID != "" {
		conds = append(conds, "u.org_id = "+a.Add(f.OrgID))
	}
	users, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: userColumns, From: userFrom, Conds: conds, Args: &a,
		SortKey: "u.email", SortID: "u.id"}, page, scanUser, func(u User) (string, string) { return u.Email, u.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list users: %w", err)
	}
	ptrs := make([]*User, len(users))
	for i := range users {
		ptrs[i] = &users[i]
	}
	return users, next, total, loadOrgIDs(ctx, s.db, ptrs)
}

// GetUser returns a user in the caller's scope.
func (s *Service) GetUser(ctx context.Context, id string) (User, error) {
	p, err := caller(ctx)
	if err != nil {
		return User{}, err
	}
	return getUser(ctx, s.db, p.Scope, id)
}

func getUser(ctx context.Context, q store.Querier, scope access.Scope, id string) (User, error) {
	var a store.Args
	u, err := store.ByID(ctx, q, "user", `SELECT `+userColumns+userFrom, "u.id", id, &a,
		[]string{UserFilter(scope, &a)}, scanUser)
	if err != nil {
		return u, err
	}
	return u, loadOrgIDs(ctx, q, []*User{&u})
}

// ManageableUser returns a user in the caller's scope that the caller may manage (404 when
// out of scope, 403 when the user's role holds permissions the caller lacks).
func (s *Service) ManageableUser(ctx context.Context, id string) (User, error) {
	p, err := caller(ctx)
	if err != nil {
		return User{}, err
	}
	return manageable(ctx, s.db, p, id)
}

// manageable loads a user in scope that the caller may change: the caller must hold every
// permission of the user's role, so nobody manages someone more powerful.
func manageable(ctx context.Context, q store.Querier, p *access.Principal, id string) (User, error) {
	u, err := getUser(ctx, q, p.Scope, id)
	if err != nil {
		return u, err
	}
	r, err := getRole(ctx, q, access.SystemScope(), u.RoleID)
	if err != nil {
		return u, err
	}
	if !p.Permissions.Covers(r.grants()) {
		return u, apperr.Forbidden("you cannot manage a user whose role has permissions you do not hold")
	}
	return u, nil
}

// UserUpdate holds the writable fields of a user; nil fields are left as they are.
type UserUpdate struct {
	Name      *string  `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Status    *string  `json:"status,omitempty" enum:"active,disabled" doc:"disabled ends every session of the user at once."`
	OrgAccess *string  `json:"orgAccess,omitempty" enum:"all,selected,none" doc:"Partner users only."`
	OrgIDs    []string `json:"orgIds,omitempty" maxItems:"1000" doc:"With orgAccess selected: the organizations the user reaches."`
}

// UpdateUser changes a user in scope. Disabling ends the user's sessions at once; a caller
// cannot disable itself (403).
func (s *Service) UpdateUser(ctx context.Context, id string, in UserUpdate) (User, error) {
	p, err := caller(ctx)
	if err != nil {
		return User{}, err
	}
	if in.Status != nil && *in.Status == StatusDisabled && id == p.UserID {
		return User{}, apperr.Forbidden("you cannot disable your own account")
	}
	var u User
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageable(ctx, tx, p, id)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		if in.Name != nil {
			n := strings.TrimSpace(*in.Name)
			if n == "" {
				return apperr.Invalid("name", "name cannot be empty")
			}
			if _, err := tx.ExecContext(ctx, `UPDATE users SET name = $1, updated_at = $2 WHERE id = $3`, n, now, id); err != nil {
				return fmt.Errorf("rename user %s: %w", id, err)
			}
		}
		if in.OrgAccess != nil || in.OrgIDs != nil {
			if before.Scope != access.LevelPartner {
				return apperr.Invalid("orgAccess", "only partner users have organization access settings")
			}
			mode := ""
			if in.OrgAccess != nil {
				mode = *in.OrgAccess
			}
			if err := s.setOrgAccess(ctx, tx, p, id, store.Deref(before.PartnerID), mode, in.OrgIDs); err != nil {
				return err
			}
		}
		if in.Status != nil && *in.Status != before.Status {
			switch *in.Status {
			case StatusDisabled:
				if err := s.disableUser(ctx, tx, id); err != nil {
					return err
				}
			case StatusActive:
				if before.Status == StatusInvited {
					return apperr.Conflict("the user has not accepted the invitation yet")
				}
				if err := s.enableUser(ctx, tx, id); err != nil {
					return err
				}
			}
		}
		if u, err = getUser(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		action := "user.update"
		if in.Status != nil && *in.Status != before.Status {
			action = "user." + map[string]string{StatusDisabled: "disable", StatusActive: "enable"}[*in.Status]
		}
		return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "user", ResourceID: id, ResourceName: u.Email,
			PartnerID: store.Deref(u.PartnerID), OrgID: store.Deref(u.OrgID), Details: audit.Diff(before, u)})
	})
	if err != nil {
		return u, fmt.Errorf("update user: %w", err)
	}
	return u, nil
}

// disableUser disables a user and ends its sessions at once: the token epoch moves (so
// access tokens already issued are refused), refresh tokens and pending invitations are
// revoked.
func (s *Service) disableUser(ctx context.Context, tx *sql.Tx, id string) error {
	now := s.clock.Now()
	if _, err := tx.ExecContext(ctx, `UPDATE users SET status = 'disabled', token_epoch = token_epoch + 1, updated_at = $1
		WHERE id = $2`, now, id); err != nil {
		return fmt.Errorf("disable user %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL`, now, id); err != nil {
		return fmt.Errorf("end sessions of user %s: %w", id, err)
	}
	_, err := tx.ExecContext(ctx, `UPDATE user_tokens SET revoked_at = $1 WHERE user_id = $2 AND used_at IS NULL AND revoked_at IS NULL`, now, id)
	if err != nil {
		return fmt.Errorf("revoke links of user %s: %w", id, err)
	}
	return nil
}

// enableUser re-activates a disabled user; one who never set a password goes back to
// invited (resend the invitation).
func (s *Service) enableUser(ctx context.Context, tx *sql.Tx, id string) error {
	_, err := tx.ExecContext(ctx, `UPDATE users SET status = CASE WHEN password_hash IS NULL THEN 'invited' ELSE 'active' END,
		updated_at = $1 WHERE id = $2 AND status = 'disabled'`, s.clock.Now(), id)
	if err != nil {
		return fmt.Errorf("enable user %s: %w", id, err)
	}
	return nil
}

// setOrgAccess sets which organizations a partner user reaches. mode empty with orgIDs means
// selected. Each organization must be the user's partner's and within the caller's reach;
// a caller limited to selected organizations cannot grant all of them.
func (s *Service) setOrgAccess(ctx context.Context, tx *sql.Tx, p *access.Principal, userID, partnerID, mode string, orgIDs []string) error {
	if mode == "" {
		mode = OrgAccessAll
		if orgIDs != nil {
			mode = OrgAccessSelected
		}
	}
	if mode != OrgAccessSelected && len(orgIDs) > 0 {
		return apperr.Invalid("orgIds", "orgIds go with orgAccess selected")
	}
	if mode == OrgAccessAll && p.Scope.OrgLimited() {
		return apperr.Forbidden("you reach selected organizations only, so you cannot grant access to all of them; use orgAccess selected or none")
	}
	if _, err := tx.ExecContext(ctx, `UPDATE users SET org_access = $1, updated_at = $2 WHERE id = $3`, mode, s.clock.Now(), userID); err != nil {
		return fmt.Errorf("set organization access of user %s: %w", userID, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_org_access WHERE user_id = $1`, userID); err != nil {
		return fmt.Errorf("clear organizations of user %s: %w", userID, err)
	}
	if mode != OrgAccessSelected {
		return nil
	}
	seen := map[string]bool{}
	for i, orgID := range orgIDs {
		if !store.ValidID(orgID) {
			return apperr.Invalid("orgIds["+itoa(i)+"]", "not an organization ID")
		}
		if seen[orgID] {
			continue
		}
		seen[orgID] = true
		owner, err := orgInScope(ctx, tx, p.Scope, orgID)
		if err != nil {
			return err
		}
		if owner != partnerID {
			return apperr.NotFound("organization")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_org_access (user_id, org_id) VALUES ($1, $2)`, userID, orgID); err != nil {
			return fmt.Errorf("give user %s organization %s: %w", userID, orgID, err)
		}
	}
	return nil
}

// DeleteUser deletes a user in scope and revokes the API keys it created. A caller cannot
// delete itself (403).
func (s *Service) DeleteUser(ctx context.Context, id string) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	if id == p.UserID {
		return apperr.Forbidden("you cannot delete your own account")
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		u, err := manageable(ctx, tx, p, id)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = $1, updated_at = $1 WHERE created_by = $2 AND revoked_at IS NULL`, now, id)
		if err != nil {
			return fmt.Errorf("revoke API keys of user %s: %w", id, err)
		}
		keys, _ := res.RowsAffected()
		if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete user %s: %w", id, err)
		}
		details := audit.Snapshot(u)
		details["apiKeysRevoked"] = keys
		return audit.Record(ctx, tx, audit.Entry{Action: "user.delete", ResourceType: "user", ResourceID: id, ResourceName: u.Email,
			PartnerID: store.Deref(u.PartnerID), OrgID: store.Deref(u.OrgID), Details: details})
	})
}

// AssignRole gives a user in scope another role of its level that the caller may assign.
func (s *Service) AssignRole(ctx context.Context, id, roleID string) (User, error) {
	p, err := caller(ctx)
	if err != nil {
		return User{}, err
	}
	var u User
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageable(ctx, tx, p, id)
		if err != nil {
			return err
		}
		r, err := getRole(ctx, tx, p.Scope, roleID)
		if err != nil {
			return err
		}
		if err := checkAssignable(p, r, before.Scope, store.Deref(before.PartnerID), store.Deref(before.OrgID)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET role_id = $1, updated_at = $2 WHERE id = $3`, roleID, s.clock.Now(), id); err != nil {
			return fmt.Errorf("assign role %s to user %s: %w", roleID, id, err)
		}
		if u, err = getUser(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "user.role_change", ResourceType: "user", ResourceID: id, ResourceName: u.Email,
			PartnerID: store.Deref(u.PartnerID), OrgID: store.Deref(u.OrgID), Details: map[string]any{
				"from": map[string]any{"roleId": before.RoleID, "roleName": before.RoleName},
				"to":   map[string]any{"roleId": u.RoleID, "roleName": u.RoleName}}})
	})
	if err != nil {
		return u, fmt.Errorf("assign role: %w", err)
	}
	return u, nil
}
