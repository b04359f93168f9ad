package identity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// EnsureBuiltInRoles writes the built-in roles as the code defines them, so a new release's
// permission changes reach existing databases at start.
func (s *Service) EnsureBuiltInRoles(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		for _, r := range access.BuiltInRoles() {
			perms, _ := json.Marshal(r.Permissions)
			_, err := tx.ExecContext(ctx, `INSERT INTO roles (id, tenant_key, scope, name, description, built_in, permissions,
				created_at, updated_at) VALUES ($1, 'builtin', $2, $3, $4, TRUE, $5, $6, $6)
				ON CONFLICT (id) DO UPDATE SET scope = excluded.scope, name = excluded.name,
				description = excluded.description, permissions = excluded.permissions, updated_at = excluded.updated_at`,
				r.ID, string(r.Scope), r.Name, r.Description, string(perms), now)
			if err != nil {
				return fmt.Errorf("write built-in role %s: %w", r.ID, err)
			}
		}
		return nil
	})
}

// NewUser describes a user created outside the invitation flow (bootstrap, command line).
type NewUser struct {
	Email        string
	Name         string
	PasswordHash string
	Level        access.Level
	PartnerID    string
	OrgID        string
	RoleID       string
}

// CreateUser inserts an active user with a password.
func (s *Service) CreateUser(ctx context.Context, u NewUser) (string, error) {
	return createUser(ctx, s.db, u, s.clock.Now())
}

// CreateUser inserts an active user with a password, for the command line and tests, which
// run without a service and so on the system's time.
func CreateUser(ctx context.Context, db *store.DB, u NewUser) (string, error) {
	return createUser(ctx, db, u, store.Now())
}

func createUser(ctx context.Context, db *store.DB, u NewUser, now time.Time) (string, error) {
	id := store.NewID()
	email := strings.ToLower(strings.TrimSpace(u.Email))
	if !strings.Contains(email, "@") {
		return "", apperr.Invalid("email", "not an email address")
	}
	if u.RoleID == "" {
		u.RoleID = defaultRole(u.Level)
	}
	err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO users (id, email, name, password_hash, status, scope, partner_id, org_id,
			role_id, org_access, created_at, updated_at) VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8, 'all', $9, $9)`,
			id, email, u.Name, u.PasswordHash, string(u.Level), store.NullIfEmpty(u.PartnerID), store.NullIfEmpty(u.OrgID), u.RoleID, now)
		if store.IsUniqueViolation(err) {
			return apperr.Conflict("a user with email " + email + " already exists")
		}
		if err != nil {
			return fmt.Errorf("insert user %s: %w", email, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "user.create", ResourceType: "user", ResourceID: id,
			ResourceName: email, PartnerID: u.PartnerID, OrgID: u.OrgID,
			Actor: &audit.Actor{Type: access.ActorSystem}, Details: map[string]any{"scope": u.Level, "roleId": u.RoleID}})
	})
	return id, err
}

func defaultRole(level access.Level) string {
	switch level {
	case access.LevelPartner:
		return access.RolePartnerAdmin
	case access.LevelOrganization:
		return access.RoleOrgAdmin
	}
	return access.RoleSystemAdmin
}

// HasUsers reports whether any user exists.
func (s *Service) HasUsers(ctx context.Context) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return false, fmt.Errorf("count users: %w", err)
	}
	return n > 0, nil
}

// UserIDByEmail finds a user's ID.
func UserIDByEmail(ctx context.Context, q store.Querier, email string) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT id FROM users WHERE email = $1`, strings.ToLower(strings.TrimSpace(email))).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", apperr.NotFound("user")
	}
	if err != nil {
		return "", fmt.Errorf("find user by email: %w", err)
	}
	return id, nil
}
