package identity

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// tenantBuiltIn is the tenant_key of the built-in roles.
const tenantBuiltIn = "builtin"

// Role is the API view of a role.
type Role struct {
	ID          string       `json:"id" format:"uuid"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Scope       access.Level `json:"scope" enum:"system,partner,organization" doc:"The level of the users who may hold the role."`
	BuiltIn     bool         `json:"builtIn" doc:"Built-in roles cannot be changed or deleted; clone one to adapt it."`
	Permissions []string     `json:"permissions"`
	PartnerID   *string      `json:"partnerId" doc:"The partner owning a custom role; null for built-in roles."`
	OrgID       *string      `json:"orgId" doc:"The organization owning a custom role made by an organization; null otherwise."`
	UserCount   *int         `json:"userCount,omitempty" doc:"Users in the caller's scope holding the role (lists only)."`
	CreatedAt   time.Time    `json:"createdAt"`
	UpdatedAt   time.Time    `json:"updatedAt"`

	tenantKey string
}

func (r Role) perms() access.Permissions { return access.Permissions(r.Permissions) }

// grants is what holding the role amounts to for escalation checks: an organization role
// never acts above its organization, so partner-only permissions its wildcards match (the
// built-in Organization Viewer's *:read) do not count.
func (r Role) grants() access.Permissions {
	if r.Scope != access.LevelOrganization {
		return r.perms()
	}
	var out access.Permissions
	for _, name := range r.perms().Expand() {
		if perm, ok := access.LookupPermission(name); ok && !perm.PartnerOnly {
			out = append(out, name)
		}
	}
	return out
}

// Effective lists the catalog permissions holding the role amounts to (as
// GET /roles/{id}/effective-permissions answers).
func (r Role) Effective() []string { return r.grants().Expand() }

const roleColumns = `r.id, r.tenant_key, r.partner_id, r.org_id, r.scope, r.name, r.description, r.built_in,
	r.permissions, r.created_at, r.updated_at`

func scanRole(row scanner, withCount bool) (Role, error) {
	var r Role
	var partnerID, orgID sql.NullString
	var perms string
	dest := []any{&r.ID, &r.tenantKey, &partnerID, &orgID, &r.Scope, &r.Name, &r.Description, &r.BuiltIn, &perms,
		&r.CreatedAt, &r.UpdatedAt}
	var n int
	if withCount {
		dest = append(dest, &n)
	}
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	r.PartnerID, r.OrgID = store.StringPtr(partnerID), store.StringPtr(orgID)
	r.Permissions = []string{}
	if err := json.Unmarshal([]byte(perms), &r.Permissions); err != nil {
		return r, err
	}
	if withCount {
		r.UserCount = &n
	}
	return r, nil
}

// RoleInput holds the writable fields of a role; nil fields are left as they are.
type RoleInput struct {
	Name        *string  `json:"name,omitempty" minLength:"1" maxLength:"100"`
	Description *string  `json:"description,omitempty" maxLength:"1000" multiline:"true"`
	Permissions []string `json:"permissions,omitempty" maxItems:"500" doc:"Catalog permissions or wildcards (devices:*, *:read); *:* is reserved to built-in roles."`
}

// NewRole is a create request.
type NewRole struct {
	Name        string       `json:"name" minLength:"1" maxLength:"100"`
	Description string       `json:"description,omitempty" maxLength:"1000" multiline:"true"`
	Scope       access.Level `json:"scope" enum:"partner,organization"`
	Permissions []string     `json:"permissions" maxItems:"500"`
	PartnerID   string       `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner owning the role (required)."`
	OrgID       string       `json:"orgId,omitempty" format:"uuid" doc:"System and partner callers: make the role belong to this organization (scope organization only)."`
}

// RoleListFilter narrows a list of roles.
type RoleListFilter struct {
	Scope  string
	Search string
}

// ListRoles lists the roles visible to the caller, by name, each with its user count.
func (s *Service) ListRoles(ctx context.Context, f RoleListFilter, page store.Page) ([]Role, string, *int, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{roleFilter(p.Scope, &a)}
	if f.Scope != "" {
		conds = append(conds, "r.scope = "+a.Add(f.Scope))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "r.name"))
	}
	count := `(SELECT COUNT(*) FROM users u WHERE u.role_id = r.id AND ` + UserFilter(p.Scope, &a) + `)`
	return store.List(ctx, s.db, store.ListQuery{Columns: roleColumns + ", " + count, From: ` FROM roles r`, Conds: conds, Args: &a,
		SortKey: "r.name", SortID: "r.id"}, page,
		func(row scanner) (Role, error) { return scanRole(row, true) },
		func(r Role) (string, string) { return r.Name, r.ID })
}

// GetRole returns a role visible to the caller.
func (s *Service) GetRole(ctx context.Context, id string) (Role, error) {
	p, err := caller(ctx)
	if err != nil {
		return Role{}, err
	}
	return getRole(ctx, s.db, p.Scope, id)
}

func getRole(ctx context.Context, q store.Querier, scope access.Scope, id string) (Role, error) {
	var a store.Args
	return store.ByID(ctx, q, "role", `SELECT `+roleColumns+` FROM roles r`, "r.id", id, &a, []string{roleFilter(scope, &a)},
		func(row store.Scanner) (Role, error) { return scanRole(row, false) })
}

// EffectivePermissions lists the catalog permissions a role amounts to.
func (s *Service) EffectivePermissions(ctx context.Context, id string) (Role, []string, error) {
	r, err := s.GetRole(ctx, id)
	if err != nil {
		return r, nil, err
	}
	perms := r.grants().Expand()
	if perms == nil {
		perms = []string{}
	}
	return r, perms, nil
}

// validateGrants checks a custom role's grants: known, no full admin, nothing partner-only
// in an organization role, and nothing the caller does not hold itself.
func validateGrants(p *access.Principal, scope access.Level, grants []string) ([]string, error) {
	out := []string{}
	for i, g := range grants {
		g = strings.TrimSpace(g)
		field := "permissions[" + itoa(i) + "]"
		if g == access.FullAdmin {
			return nil, apperr.Invalid(field, "*:* (full administrator) is reserved to built-in roles")
		}
		if !access.ValidGrant(g) {
			return nil, apperr.Invalid(field, "unknown permission "+g+"; GET /roles/permissions/available lists them")
		}
		if scope == access.LevelOrganization {
			for _, name := range (access.Permissions{g}).Expand() {
				if perm, ok := access.LookupPermission(name); ok && perm.PartnerOnly {
					return nil, apperr.Invalid(field, name+" acts above a single organization and cannot be part of an organization role")
				}
			}
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if !p.Permissions.Covers(access.Permissions(out)) {
		return nil, apperr.Forbidden("a role cannot grant permissions you do not hold yourself")
	}
	return out, nil
}

// roleTenant decides who owns a new custom role: its tenant key, partner and organization.
func (s *Service) roleTenant(ctx context.Context, q store.Querier, p *access.Principal, scope access.Level, partnerID, orgID string) (key, pid, oid string, err error) {
	switch p.Scope.Level {
	case access.LevelOrganization:
		if scope != access.LevelOrganization {
			return "", "", "", apperr.Invalid("scope", "organization users can only make organization roles")
		}
		if orgID != "" && orgID != p.Scope.OrgID {
			return "", "", "", apperr.NotFound("organization")
		}
		return "o:" + p.Scope.OrgID, p.Scope.PartnerID, p.Scope.OrgID, nil
	case access.LevelPartner:
		if partnerID != "" && partnerID != p.Scope.PartnerID {
			return "", "", "", apperr.NotFound("partner")
		}
		partnerID = p.Scope.PartnerID
	case access.LevelSystem:
		if partnerID == "" && orgID == "" {
			return "", "", "", apperr.Invalid("partnerId", "system administrators name the partner owning a custom role")
		}
	default:
		return "", "", "", apperr.Forbidden("no scope")
	}
	if orgID != "" {
		if scope != access.LevelOrganization {
			return "", "", "", apperr.Invalid("orgId", "only organization roles can belong to an organization")
		}
		orgPartner, err := orgInScope(ctx, q, p.Scope, orgID)
		if err != nil {
			return "", "", "", err
		}
		if partnerID != "" && partnerID != orgPartner {
			return "", "", "", apperr.NotFound("organization")
		}
		return "o:" + orgID, orgPartner, orgID, nil
	}
	if err := partnerExists(ctx, q, partnerID); err != nil {
		return "", "", "", err
	}
	return "p:" + partnerID, partnerID, "", nil
}

// orgInScope returns the partner of a live organization the scope reaches, else NOT_FOUND.
func orgInScope(ctx context.Context, q store.Querier, scope access.Scope, orgID string) (string, error) {
	partnerID, ok, err := tenancy.OrgInScope(ctx, q, scope, orgID)
	if err == nil && !ok {
		return "", apperr.NotFound("organization")
	}
	return partnerID, err
}

// partnerExists is NOT_FOUND unless the partner exists and is not deleted.
func partnerExists(ctx context.Context, q store.Querier, partnerID string) error {
	live, err := tenancy.IsLivePartner(ctx, q, partnerID)
	if err == nil && !live {
		return apperr.NotFound("partner")
	}
	return err
}

// checkRoleText applies the API's limits to a role's name (100 characters) and description
// (1000) for every caller; nil fields are not checked.
func checkRoleText(name, description *string) error {
	if name != nil && utf8.RuneCountInString(*name) > 100 {
		return apperr.Invalid("name", "a role's name has at most 100 characters")
	}
	if description != nil && utf8.RuneCountInString(*description) > 1000 {
		return apperr.Invalid("description", "a role's description has at most 1000 characters")
	}
	return nil
}

func nameConflict(err error, name string) error {
	if store.IsUniqueViolation(err) {
		return apperr.Conflict("a role named " + name + " already exists")
	}
	return err
}

// CreateRole makes a custom role in the caller's tenant.
func (s *Service) CreateRole(ctx context.Context, in NewRole) (Role, error) {
	p, err := caller(ctx)
	if err != nil {
		return Role{}, err
	}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" {
		return Role{}, apperr.Invalid("name", "name is required")
	}
	if err := checkRoleText(&in.Name, &in.Description); err != nil {
		return Role{}, err
	}
	if in.Scope != access.LevelPartner && in.Scope != access.LevelOrganization {
		return Role{}, apperr.Invalid("scope", "use partner or organization")
	}
	grants, err := validateGrants(p, in.Scope, in.Permissions)
	if err != nil {
		return Role{}, err
	}
	var r Role
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		key, pid, oid, err := s.roleTenant(ctx, tx, p, in.Scope, in.PartnerID, in.OrgID)
		if err != nil {
			return err
		}
		if r, err = s.insertRole(ctx, tx, key, pid, oid, in.Scope, in.Name, in.Description, grants); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "role.create", ResourceType: "role", ResourceID: r.ID,
			ResourceName: r.Name, PartnerID: pid, OrgID: oid, Details: audit.Snapshot(r)})
	})
	if err != nil {
		return r, fmt.Errorf("create role: %w", err)
	}
	return r, nil
}

func (s *Service) insertRole(ctx context.Context, tx *sql.Tx, key, pid, oid string, scope access.Level, name, desc string, grants []string) (Role, error) {
	id, now := store.NewID(), s.clock.Now()
	perms, _ := json.Marshal(grants)
	_, err := tx.ExecContext(ctx, `INSERT INTO roles (id, tenant_key, partner_id, org_id, scope, name, description, built_in,
		permissions, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, FALSE, $8, $9, $9)`,
		id, key, store.NullIfEmpty(pid), store.NullIfEmpty(oid), string(scope), name, desc, string(perms), now)
	if err != nil {
		return Role{}, nameConflict(err, name)
	}
	return getRole(ctx, tx, access.SystemScope(), id)
}

// ownedRole loads a role the caller may change: visible, custom, and owned by the caller's
// tenant (an organization cannot change its partner's roles).
func ownedRole(ctx context.Context, q store.Querier, p *access.Principal, id string) (Role, error) {
	r, err := getRole(ctx, q, p.Scope, id)
	if err != nil {
		return r, err
	}
	if r.BuiltIn {
		return r, apperr.Forbidden("built-in roles cannot be changed or deleted; clone the role and change the copy")
	}
	if p.Scope.Level == access.LevelOrganization && r.tenantKey != "o:"+p.Scope.OrgID {
		return r, apperr.Forbidden("this role belongs to the partner; only the partner can change it")
	}
	return r, nil
}

// UpdateRole changes a custom role. New permissions pass the same checks as on create.
func (s *Service) UpdateRole(ctx context.Context, id string, in RoleInput) (Role, error) {
	p, err := caller(ctx)
	if err != nil {
		return Role{}, err
	}
	var r Role
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := ownedRole(ctx, tx, p, id)
		if err != nil {
			return err
		}
		if err := checkRoleText(in.Name, in.Description); err != nil {
			return err
		}
		ch := store.NewChanges(s.clock.Now())
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			if name == "" {
				return apperr.Invalid("name", "name cannot be empty")
			}
			ch.Set("name", name)
		}
		if in.Description != nil {
			ch.Set("description", *in.Description)
		}
		if in.Permissions != nil {
			grants, err := validateGrants(p, before.Scope, in.Permissions)
			if err != nil {
				return err
			}
			raw, _ := json.Marshal(grants)
			ch.Set("permissions", string(raw))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE roles SET `+ch.SQL()+` WHERE built_in = FALSE AND id = `+ch.Args.Add(id),
			ch.Args.Values()...); err != nil {
			name := before.Name
			if in.Name != nil {
				name = *in.Name
			}
			return nameConflict(err, name)
		}
		if r, err = getRole(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "role.update", ResourceType: "role", ResourceID: id,
			ResourceName: r.Name, PartnerID: store.Deref(r.PartnerID), OrgID: store.Deref(r.OrgID), Details: audit.Diff(before, r)})
	})
	if err != nil {
		return r, fmt.Errorf("update role: %w", err)
	}
	return r, nil
}

// DeleteRole deletes a custom role no user holds (409 otherwise).
func (s *Service) DeleteRole(ctx context.Context, id string) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := ownedRole(ctx, tx, p, id)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE role_id = $1`, id).Scan(&n); err != nil {
			return fmt.Errorf("count users of role %s: %w", id, err)
		}
		if n > 0 {
			return apperr.Conflict("the role is held by " + itoa(n) + " user(s); assign them another role first")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM roles WHERE id = $1 AND built_in = FALSE`, id); err != nil {
			return fmt.Errorf("delete role %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "role.delete", ResourceType: "role", ResourceID: id,
			ResourceName: r.Name, PartnerID: store.Deref(r.PartnerID), OrgID: store.Deref(r.OrgID), Details: audit.Snapshot(r)})
	})
}

// CloneInput is a clone request.
type CloneInput struct {
	Name      string `json:"name,omitempty" maxLength:"100" doc:"Name of the copy; default \"Copy of <name>\"."`
	PartnerID string `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner owning the copy (required)."`
}

// CloneRole copies a visible role into the caller's tenant as a custom role. A full
// administrator grant (*:*) is copied as the catalog permissions it amounts to.
func (s *Service) CloneRole(ctx context.Context, id string, in CloneInput) (Role, error) {
	p, err := caller(ctx)
	if err != nil {
		return Role{}, err
	}
	var r Role
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		src, err := getRole(ctx, tx, p.Scope, id)
		if err != nil {
			return err
		}
		if src.Scope == access.LevelSystem {
			return apperr.Invalid("id", "system roles cannot be cloned")
		}
		grants, err := validateGrants(p, src.Scope, cloneGrants(src))
		if err != nil {
			return err
		}
		name := strings.TrimSpace(in.Name)
		if name == "" {
			name = "Copy of " + src.Name
		}
		key, pid, oid, err := s.roleTenant(ctx, tx, p, src.Scope, in.PartnerID, "")
		if err != nil {
			return err
		}
		if r, err = s.insertRole(ctx, tx, key, pid, oid, src.Scope, name, src.Description, grants); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "role.clone", ResourceType: "role", ResourceID: r.ID,
			ResourceName: r.Name, PartnerID: pid, OrgID: oid,
			Details: map[string]any{"sourceRoleId": src.ID, "sourceRoleName": src.Name, "resource": audit.Snapshot(r)["resource"]}})
	})
	if err != nil {
		return r, fmt.Errorf("clone role: %w", err)
	}
	return r, nil
}

// cloneGrants is what a copy of src grants: the same grants, except that *:* and, in an
// organization role, wildcards reaching partner-only permissions (*:read) are replaced by
// the catalog permissions they amount to there, since a custom role cannot hold them.
func cloneGrants(src Role) []string {
	var out []string
	for _, g := range src.Permissions {
		one := Role{Scope: src.Scope, Permissions: []string{g}}
		if g == access.FullAdmin || (src.Scope == access.LevelOrganization && len(one.grants()) != len(one.perms().Expand())) {
			out = append(out, one.grants().Expand()...)
			continue
		}
		out = append(out, g)
	}
	return out
}

// RoleUsers lists the users in the caller's scope holding a role, by email.
func (s *Service) RoleUsers(ctx context.Context, id string, page store.Page) ([]User, string, *int, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	if !p.Can(access.UsersRead) {
		return nil, "", nil, apperr.Forbidden("missing permission users:read")
	}
	if _, err := getRole(ctx, s.db, p.Scope, id); err != nil {
		return nil, "", nil, err
	}
	return s.ListUsers(ctx, UserListFilter{RoleID: id}, page)
}

// AssignableRoles lists the roles the caller may give: visible, of a level the caller can
// invite at, and within the caller's own permissions.
func (s *Service) AssignableRoles(ctx context.Context) ([]Role, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	var a store.Args
	roles, err := store.QueryAll(ctx, s.db, `SELECT `+roleColumns+` FROM roles r WHERE `+roleFilter(p.Scope, &a)+
		` ORDER BY r.name, r.id`, a.Values(), func(row store.Scanner) (Role, error) { return scanRole(row, false) })
	if err != nil {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	out := []Role{}
	for _, r := range roles {
		if p.Permissions.Covers(r.grants()) {
			out = append(out, r)
		}
	}
	return out, nil
}

// usableAt reports whether role r can be held by a user at the given place.
func (r Role) usableAt(level access.Level, partnerID, orgID string) bool {
	if r.Scope != level {
		return false
	}
	switch {
	case r.tenantKey == tenantBuiltIn:
		return true
	case strings.HasPrefix(r.tenantKey, "p:"):
		return level != access.LevelSystem && store.Deref(r.PartnerID) == partnerID
	case strings.HasPrefix(r.tenantKey, "o:"):
		return level == access.LevelOrganization && store.Deref(r.OrgID) == orgID
	}
	return false
}

// checkAssignable refuses a role the caller may not give to a user at the given place.
func checkAssignable(p *access.Principal, r Role, level access.Level, partnerID, orgID string) error {
	if !r.usableAt(level, partnerID, orgID) {
		return apperr.Invalid("roleId", "role "+r.Name+" cannot be held by a "+string(level)+" user here")
	}
	if !p.Permissions.Covers(r.grants()) {
		return apperr.Forbidden("you cannot assign a role with permissions you do not hold yourself")
	}
	return nil
}
