// Package auth holds Gale's credentials: password sign-in, JWT sessions with rotating refresh
// tokens, TOTP MFA with recovery codes, invitation acceptance, password resets, and the
// authentication of every API request (JWT or API key).
package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/identity"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/mail"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Options configure the auth service.
type Options struct {
	JWTSecret        []byte
	AccessTTL        time.Duration
	RefreshTTL       time.Duration
	RefreshFamilyTTL time.Duration
	ResetTTL         time.Duration
	Argon2           Argon2Params
	// LoginFloor is the least time a sign-in answer takes, so that timing does not tell
	// whether an email exists.
	LoginFloor time.Duration
	PublicURL  string
	// PrincipalTTL is how long an access token's principal is cached (AUTH_CACHE_MS); 0
	// reads it from the database on every request.
	PrincipalTTL time.Duration
}

// Limits on sign-in and MFA attempts.
var (
	loginPerIP      = ratelimit.Rule{Limit: 10, Window: 5 * time.Minute}
	loginPerAccount = ratelimit.Rule{Limit: 5, Window: 5 * time.Minute}
	failureWindow   = ratelimit.Rule{Limit: 5, Window: 15 * time.Minute}
	lockoutPeriod   = ratelimit.Rule{Limit: 0, Window: 15 * time.Minute}
	// lockedRule reads the lockout key: one hit on it means locked.
	lockedRule    = ratelimit.Rule{Limit: 1, Window: 15 * time.Minute}
	mfaPerUser    = ratelimit.Rule{Limit: 5, Window: 5 * time.Minute}
	mfaPendingTTL = 5 * time.Minute
)

// Service implements sign-in, sessions and request authentication.
type Service struct {
	db            *store.DB
	clock         clock.Clock
	opts          Options
	box           *secrets.Box
	limiter       *ratelimit.Limiter
	audit         *audit.Log
	mailer        mail.Sender
	logger        *slog.Logger
	users         *identity.Service
	accessChanged func(ctx context.Context)
	// dummyHash is verified when an email is unknown, so both paths cost one argon2id run.
	dummyHash string
	// apiKeys is the verifier a module declared (package apikeys); nil: API keys are refused.
	apiKeys    APIKeyVerifier
	verified   verifiedTokens
	principals principalCache
}

// APIKeyVerifier resolves an X-API-Key to a principal. The API keys module declares one on the
// module kernel (it is built after this one: it loads principals through this service).
type APIKeyVerifier interface {
	Verify(ctx context.Context, rawKey string) (*access.Principal, error)
}

// Deps is what the auth service is built from.
type Deps struct {
	DB      *store.DB
	Logger  *slog.Logger
	Clock   clock.Clock
	Box     *secrets.Box
	Limiter *ratelimit.Limiter
	Audit   *audit.Log
	// Mail sends password resets; nil when SMTP is not configured.
	Mail mail.Sender
	// Users finds the users an administrator may reset the password of, and creates the
	// first administrator of an empty database.
	Users *identity.Service
	// AccessChanged, when set, tells every node to forget cached principals after a change
	// the service commits on a path that answers with an error (a reused refresh token).
	AccessChanged func(ctx context.Context)
}

// New returns the auth service.
func New(d Deps, opts Options) *Service {
	return &Service{db: d.DB, clock: clock.Or(d.Clock), opts: opts, box: d.Box, limiter: d.Limiter, audit: d.Audit, mailer: d.Mail, logger: d.Logger,
		users: d.Users, accessChanged: d.AccessChanged, dummyHash: HashPassword("not-a-real-password", opts.Argon2),
		principals: newPrincipalCache(opts.PrincipalTTL)}
}

// plug takes in the API key verifier a module declared, once every module is built.
func (s *Service) plug(verifiers []APIKeyVerifier) error {
	if len(verifiers) > 1 {
		return fmt.Errorf("%d API key verifiers declared; there is one", len(verifiers))
	}
	if len(verifiers) == 1 {
		s.apiKeys = verifiers[0]
	}
	return nil
}

// Session is the answer of a completed sign-in.
type Session struct {
	User             identity.User `json:"user"`
	AccessToken      string        `json:"accessToken"`
	RefreshToken     string        `json:"refreshToken,omitempty" doc:"Absent on step-up: the session keeps its refresh token."`
	ExpiresInSeconds int           `json:"expiresInSeconds"`
	MFARequired      bool          `json:"mfaRequired"`
}

// LoginResult is a Session, or an MFA challenge when the user has MFA on.
type LoginResult struct {
	*Session
	Challenge *MFAChallenge
}

// MFAChallenge is the answer of a sign-in that needs a second factor.
type MFAChallenge struct {
	MFARequired bool   `json:"mfaRequired"`
	TempToken   string `json:"tempToken"`
	MFAMethod   string `json:"mfaMethod"`
}

// credentialRow is what sign-in and request authentication read about a user.
type credentialRow struct {
	ID           string
	Email        string
	Name         string
	PasswordHash sql.NullString
	Status       string
	Scope        access.Level
	PartnerID    sql.NullString
	OrgID        sql.NullString
	RoleID       string
	OrgAccess    string
	MFAEnabled   bool
	MFASecret    sql.NullString
	TokenEpoch   int
	Permissions  string
}

// credentialQuery reads a user with its role's permissions, refusing users whose partner or
// organization was deleted.
var credentialQuery = `SELECT u.id, u.email, u.name, u.password_hash, u.status, u.scope, u.partner_id, u.org_id,
	u.role_id, u.org_access, u.mfa_enabled, u.mfa_secret, u.token_epoch, r.permissions
	FROM users u JOIN roles r ON r.id = u.role_id
	WHERE ` + tenancy.LivePartner("u.partner_id") + ` AND ` + tenancy.LiveOrg("u.org_id") + ` AND `

func loadCredential(ctx context.Context, q store.Querier, where string, args ...any) (*credentialRow, error) {
	var c credentialRow
	err := q.QueryRowContext(ctx, credentialQuery+where, args...).Scan(&c.ID, &c.Email, &c.Name, &c.PasswordHash,
		&c.Status, &c.Scope, &c.PartnerID, &c.OrgID, &c.RoleID, &c.OrgAccess, &c.MFAEnabled, &c.MFASecret,
		&c.TokenEpoch, &c.Permissions)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load user: %w", err)
	}
	return &c, nil
}

func invalidLogin() error { return apperr.Unauthorized("invalid email or password") }

// Login checks email and password. It answers in at least LoginFloor whatever happens, and
// counts failures per email (known or not) to lock the address for a while after five.
func (s *Service) Login(ctx context.Context, email, password string) (*LoginResult, error) {
	start := time.Now()
	defer func() {
		if wait := s.opts.LoginFloor - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
	}()
	email = strings.ToLower(strings.TrimSpace(email))
	ip := access.RequestFrom(ctx).IP
	if _, err := s.limiter.Hit(ctx, "login:ip:"+ip, loginPerIP); err != nil {
		return nil, err
	}
	if _, err := s.limiter.Hit(ctx, "login:account:"+email, loginPerAccount); err != nil {
		return nil, err
	}
	if locked, err := s.limiter.Blocked(ctx, "login:locked:"+email, lockedRule); err != nil {
		return nil, err
	} else if locked > 0 {
		s.audit.Security(ctx, audit.Entry{Action: "auth.login", ResourceType: "user", ResourceName: email,
			Result: audit.ResultDenied, Details: map[string]any{"reason": "account locked"},
			Actor: &audit.Actor{Type: access.ActorAnonymous, Email: email}})
		e := apperr.RateLimited(locked)
		e.Message = "too many failed sign-ins; this account is locked for a while"
		return nil, e
	}
	c, err := loadCredential(ctx, s.db, "u.email = $1", email)
	if err != nil {
		return nil, err
	}
	hash := s.dummyHash
	if c != nil && c.PasswordHash.Valid {
		hash = c.PasswordHash.String
	}
	ok := VerifyPassword(password, hash)
	if c == nil || !c.PasswordHash.Valid || c.Status != identity.StatusActive || !ok {
		return nil, s.loginFailed(ctx, email, c)
	}
	if err := s.limiter.Clear(ctx, s.db, "login:failures:"+email); err != nil {
		return nil, err
	}
	if c.MFAEnabled {
		token, err := s.sign(Claims{Type: tokenMFAPending, Epoch: c.TokenEpoch,
			RegisteredClaims: jwtSubject(c.ID)}, mfaPendingTTL)
		if err != nil {
			return nil, err
		}
		return &LoginResult{Challenge: &MFAChallenge{MFARequired: true, TempToken: token, MFAMethod: "totp"}}, nil
	}
	sess, err := s.startSession(ctx, c, false, "auth.login")
	if err != nil {
		return nil, err
	}
	return &LoginResult{Session: sess}, nil
}

func (s *Service) loginFailed(ctx context.Context, email string, c *credentialRow) error {
	entry := audit.Entry{Action: "auth.login", ResourceType: "user", ResourceName: email, Result: audit.ResultFailure,
		Actor: &audit.Actor{Type: access.ActorAnonymous, Email: email}, Details: map[string]any{"reason": "invalid credentials"}}
	if c != nil {
		entry.ResourceID, entry.PartnerID, entry.OrgID = c.ID, c.PartnerID.String, c.OrgID.String
	}
	res, err := s.limiter.Count(ctx, s.db, "login:failures:"+email, failureWindow)
	if err != nil {
		return err
	}
	if res.Count >= failureWindow.Limit {
		if _, err := s.limiter.Count(ctx, s.db, "login:locked:"+email, lockoutPeriod); err != nil {
			return err
		}
		if err := s.limiter.Clear(ctx, s.db, "login:failures:"+email); err != nil {
			return err
		}
		entry.Details["lockedMinutes"] = int(lockoutPeriod.Window.Minutes())
	}
	s.audit.Security(ctx, entry)
	return invalidLogin()
}

// startSession opens a refresh-token family and signs the first access token.
func (s *Service) startSession(ctx context.Context, c *credentialRow, mfa bool, action string) (*Session, error) {
	family := store.NewID()
	now := s.clock.Now()
	refresh := secrets.Token("grt_", 32)
	var sess *Session
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO refresh_tokens (id, user_id, family_id, token_hash, mfa, expires_at,
			family_expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, store.NewID(), c.ID, family,
			secrets.Hash(refresh), mfa, now.Add(s.opts.RefreshTTL), now.Add(s.opts.RefreshFamilyTTL), now); err != nil {
			return fmt.Errorf("store refresh token: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET last_login_at = $1 WHERE id = $2`, now, c.ID); err != nil {
			return fmt.Errorf("record sign-in of user %s: %w", c.ID, err)
		}
		var err error
		sess, err = s.session(ctx, tx, c, family, refresh, mfa)
		if err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: action, Category: audit.CategorySecurity,
			ResourceType: "user", ResourceID: c.ID, ResourceName: c.Email, PartnerID: c.PartnerID.String,
			OrgID: c.OrgID.String, Actor: &audit.Actor{Type: access.ActorUser, ID: c.ID, Email: c.Email},
			Details: map[string]any{"mfa": mfa}})
	})
	return sess, err
}

// session signs an access token for the family and reads the user view.
func (s *Service) session(ctx context.Context, q store.Querier, c *credentialRow, family, refresh string, mfa bool) (*Session, error) {
	access, err := s.sign(Claims{Email: c.Email, Scope: string(c.Scope), PartnerID: c.PartnerID.String,
		OrgID: c.OrgID.String, RoleID: c.RoleID, MFA: mfa, Type: tokenAccess, SessionID: family,
		Epoch: c.TokenEpoch, RegisteredClaims: jwtSubject(c.ID)}, s.opts.AccessTTL)
	if err != nil {
		return nil, err
	}
	u, err := identity.LoadUser(ctx, q, c.ID)
	if err != nil {
		return nil, err
	}
	return &Session{User: u, AccessToken: access, RefreshToken: refresh,
		ExpiresInSeconds: int(s.opts.AccessTTL.Seconds())}, nil
}

// Refresh rotates a refresh token. A token that was already rotated (or lost a race to be
// rotated) is a replay: the whole family is revoked and every session of it ends.
func (s *Service) Refresh(ctx context.Context, raw string) (*Session, error) {
	var (
		id, userID, family string
		mfa                bool
		expires, famExp    time.Time
		revoked, rotated   sql.NullTime
	)
	err := s.db.QueryRowContext(ctx, `SELECT id, user_id, family_id, mfa, expires_at, family_expires_at, revoked_at, rotated_at
		FROM refresh_tokens WHERE token_hash = $1`, secrets.Hash(raw)).
		Scan(&id, &userID, &family, &mfa, &expires, &famExp, &revoked, &rotated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apperr.Unauthorized("invalid refresh token")
	}
	if err != nil {
		return nil, fmt.Errorf("look up refresh token: %w", err)
	}
	if rotated.Valid {
		return nil, s.revokeFamily(ctx, family, userID, "refresh token reused")
	}
	if revoked.Valid {
		return nil, apperr.Unauthorized("session ended; sign in again")
	}
	now := s.clock.Now()
	if !expires.After(now) || !famExp.After(now) {
		return nil, apperr.Unauthorized("refresh token expired; sign in again")
	}
	var sess *Session
	var replay bool
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET revoked_at = $1, rotated_at = $1
			WHERE id = $2 AND revoked_at IS NULL`, now, id)
		if err != nil {
			return fmt.Errorf("rotate refresh token %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			replay = true
			return nil
		}
		c, err := loadCredential(ctx, tx, "u.id = $1", userID)
		if err != nil {
			return err
		}
		if c == nil || c.Status != identity.StatusActive {
			return apperr.Unauthorized("account is not active")
		}
		next := secrets.Token("grt_", 32)
		exp := now.Add(s.opts.RefreshTTL)
		if famExp.Before(exp) {
			exp = famExp
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO refresh_tokens (id, user_id, family_id, token_hash, mfa, expires_at,
			family_expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, store.NewID(), userID, family,
			secrets.Hash(next), mfa, exp, famExp, now); err != nil {
			return fmt.Errorf("store refresh token: %w", err)
		}
		sess, err = s.session(ctx, tx, c, family, next, mfa)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("refresh session: %w", err)
	}
	if replay {
		return nil, s.revokeFamily(ctx, family, userID, "refresh token reused concurrently")
	}
	return sess, nil
}

// endFamily revokes every refresh token of a session family: the session ends wherever it
// is used.
func (s *Service) endFamily(ctx context.Context, family string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE refresh_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL`,
		s.clock.Now(), family); err != nil {
		return fmt.Errorf("end session %s: %w", family, err)
	}
	return nil
}

func (s *Service) revokeFamily(ctx context.Context, family, userID, reason string) error {
	if err := s.endFamily(ctx, family); err != nil {
		return err
	}
	if s.accessChanged != nil {
		s.accessChanged(ctx)
	}
	s.audit.Security(ctx, audit.Entry{Action: "auth.session_revoked", ResourceType: "user", ResourceID: userID,
		Actor: &audit.Actor{Type: access.ActorUser, ID: userID}, Details: map[string]any{"reason": reason}})
	return apperr.Unauthorized("refresh token already used; the session was ended, sign in again")
}

// Logout ends the session of the refresh token, or else of the caller's access token.
func (s *Service) Logout(ctx context.Context, refreshToken string, bearer string) error {
	var family string
	if refreshToken != "" {
		err := s.db.QueryRowContext(ctx, `SELECT family_id FROM refresh_tokens WHERE token_hash = $1`,
			secrets.Hash(refreshToken)).Scan(&family)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("look up refresh token: %w", err)
		}
	} else if bearer != "" {
		if c, err := s.parse(bearer, tokenAccess); err == nil {
			family = c.SessionID
		}
	}
	if family == "" {
		return apperr.Unauthorized("send the refresh token, or the access token of the session to end")
	}
	return s.endFamily(ctx, family)
}

// Purge deletes refresh tokens past their family's lifetime and used or expired one-time
// tokens; the periodic cleanup job calls it.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	now := s.clock.Now()
	return s.db.Purge(ctx, "expired tokens",
		store.Deletion{SQL: `DELETE FROM refresh_tokens WHERE family_expires_at < $1 OR (revoked_at IS NOT NULL AND expires_at < $1)`,
			Args: []any{now}},
		store.Deletion{SQL: `DELETE FROM user_tokens WHERE expires_at < $1`, Args: []any{now}})
}
