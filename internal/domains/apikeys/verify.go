package apikeys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gale/internal/domains/auth"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// lastUsedEvery is how often, at most, a key's last_used_at is written.
const lastUsedEvery = time.Minute

func rawToken() string { return secrets.Token(rawPrefix, 32) }

func hashKey(raw string) string { return secrets.Hash(raw) }

func invalidKey() error { return apperr.Unauthorized("invalid API key") }

// Verify resolves a raw X-API-Key to the principal it acts as; it implements
// auth.APIKeyVerifier. An unknown, revoked or expired key, or one whose creator is gone or
// not active, is 401. The principal has the creator's current scope and the key's grants
// intersected with the creator's current permissions.
func (s *Service) Verify(ctx context.Context, rawKey string) (*access.Principal, error) {
	var id, name string
	var createdBy sql.NullString
	var expires, revoked, lastUsed sql.NullTime
	var perms string
	err := s.db.QueryRowContext(ctx, `SELECT id, name, created_by, permissions, expires_at, revoked_at, last_used_at
		FROM api_keys WHERE key_hash = $1`, hashKey(rawKey)).Scan(&id, &name, &createdBy, &perms, &expires, &revoked, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, invalidKey()
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	now := s.clock.Now()
	if status(store.TimePtr(revoked), store.TimePtr(expires), now) != StatusActive || !createdBy.Valid {
		return nil, invalidKey()
	}
	creator, err := s.auth.PrincipalForUser(ctx, createdBy.String)
	if err != nil {
		return nil, fmt.Errorf("load creator of API key %s: %w", id, err)
	}
	if creator == nil {
		return nil, invalidKey()
	}
	grants, err := store.DecodeStrings(perms)
	if err != nil {
		return nil, fmt.Errorf("decode permissions of API key %s: %w", id, err)
	}
	if !lastUsed.Valid || now.Sub(lastUsed.Time) >= lastUsedEvery {
		s.touch(ctx, id, now)
	}
	return &access.Principal{
		Kind:        access.ActorAPIKey,
		ID:          id,
		UserID:      creator.UserID,
		Email:       creator.Email,
		Name:        name,
		Scope:       creator.Scope,
		RoleID:      creator.RoleID,
		Permissions: access.Permissions(grants).Intersect(creator.Permissions),
	}, nil
}

// touch records the use of a key, at most once a minute per key across all nodes (the
// condition is in the UPDATE). A failure is logged, never the request's failure.
func (s *Service) touch(ctx context.Context, id string, now time.Time) {
	_, err := s.db.ExecContext(ctx, `UPDATE api_keys SET last_used_at = $1
		WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)`, now, id, now.Add(-lastUsedEvery))
	if err != nil {
		s.logger.WarnContext(ctx, "record API key use", "apiKeyId", id, "error", err)
	}
}

var _ auth.APIKeyVerifier = (*Service)(nil)
