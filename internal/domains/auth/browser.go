package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/secrets"
)

// usedEvery is how stale a browser session's last-use time may get before a request writes
// it again: one write a minute at most, whatever a page asks for.
const usedEvery = time.Minute

// BrowserSession resolves the refresh token a browser's session cookie holds to its user's
// principal. A browser sends its cookie with every request, so the token is not rotated;
// the session is the same refresh-token family as the API's (signing out anywhere ends it)
// and also ends after idle without a request. A request of the user's (active) counts as
// use; a check in the background (a page's live stream) does not.
func (s *Service) BrowserSession(ctx context.Context, raw string, idle time.Duration, active bool) (*access.Principal, error) {
	var (
		id, userID, family       string
		mfa                      bool
		expires, famExp, created time.Time
		revoked, used            sql.NullTime
	)
	err := s.db.QueryRowContext(ctx, `SELECT id, user_id, family_id, mfa, expires_at, family_expires_at, revoked_at, used_at, created_at
		FROM refresh_tokens WHERE token_hash = $1`, secrets.Hash(raw)).
		Scan(&id, &userID, &family, &mfa, &expires, &famExp, &revoked, &used, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apperr.Unauthorized("no session: sign in")
	}
	if err != nil {
		return nil, fmt.Errorf("look up browser session: %w", err)
	}
	now := s.clock.Now()
	if revoked.Valid {
		return nil, apperr.Unauthorized("the session ended: sign in again")
	}
	if !expires.After(now) || !famExp.After(now) {
		return nil, apperr.Unauthorized("the session expired: sign in again")
	}
	last := created
	if used.Valid {
		last = used.Time
	}
	if now.Sub(last) > idle {
		if err := s.endFamily(ctx, family); err != nil {
			return nil, err
		}
		// The family's access tokens, if any were given out, end with it on every node.
		if s.accessChanged != nil {
			s.accessChanged(ctx)
		}
		return nil, apperr.Unauthorized(fmt.Sprintf("signed out after %s without activity: sign in again", idle))
	}
	if active && now.Sub(last) > usedEvery {
		if _, err := s.db.ExecContext(ctx, `UPDATE refresh_tokens SET used_at = $1 WHERE id = $2`, now, id); err != nil {
			return nil, fmt.Errorf("record use of browser session %s: %w", family, err)
		}
	}
	c, err := loadCredential(ctx, s.db, "u.id = $1", userID)
	if err != nil {
		return nil, err
	}
	if c == nil || c.Status != identity.StatusActive {
		return nil, apperr.Unauthorized("the account is not active")
	}
	p, err := UserPrincipal(ctx, s.db, c)
	if err != nil {
		return nil, fmt.Errorf("load principal of user %s: %w", userID, err)
	}
	p.MFA, p.SessionID = mfa, family
	return p, nil
}
