package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// TOTP settings: SHA-1, 6 digits, 30-second steps, one step of clock skew either way.
const (
	totpPeriod    = 30
	totpSkew      = 1
	recoveryCount = 10
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// MFASetup is the answer of setup: the secret to enter in an authenticator app.
type MFASetup struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpAuthUrl"`
}

// checkPassword makes the caller, who must be a signed-in user (not an API key), prove its
// password again, and returns its credential row. Five wrong passwords in five minutes block
// further checks until the window ends.
func (s *Service) checkPassword(ctx context.Context, p *access.Principal, password string) (*credentialRow, error) {
	if err := requireUser(p); err != nil {
		return nil, err
	}
	userID := p.UserID
	key := "password-check:" + userID
	if wait, err := s.limiter.Blocked(ctx, key, mfaPerUser); err != nil {
		return nil, err
	} else if wait > 0 {
		return nil, apperr.RateLimited(wait)
	}
	c, err := loadCredential(ctx, s.db, "u.id = $1", userID)
	if err != nil {
		return nil, err
	}
	if c == nil || !c.PasswordHash.Valid || !VerifyPassword(password, c.PasswordHash.String) {
		s.audit.Security(ctx, audit.Entry{Action: "auth.password_check", ResourceType: "user", ResourceID: userID,
			Result: audit.ResultFailure})
		if _, err := s.limiter.Count(ctx, s.db, key, mfaPerUser); err != nil {
			return nil, err
		}
		return nil, apperr.Unauthorized("current password is wrong")
	}
	return c, nil
}

func requireUser(p *access.Principal) error {
	if p == nil || p.Kind != access.ActorUser {
		return apperr.Forbidden("only a signed-in user can manage their own MFA")
	}
	return nil
}

// SetupMFA starts enrolment: a new secret is kept pending until EnableMFA confirms a code.
func (s *Service) SetupMFA(ctx context.Context, p *access.Principal, password string) (*MFASetup, error) {
	c, err := s.checkPassword(ctx, p, password)
	if err != nil {
		return nil, err
	}
	if c.MFAEnabled {
		return nil, apperr.Conflict("MFA is already enabled; disable it first to enrol a new authenticator")
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "Gale", AccountName: c.Email, SecretSize: 20,
		Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE users SET mfa_pending_secret = $1, updated_at = $2 WHERE id = $3`,
		s.box.Seal(key.Secret()), s.clock.Now(), c.ID); err != nil {
		return nil, fmt.Errorf("store pending MFA secret of user %s: %w", c.ID, err)
	}
	return &MFASetup{Secret: key.Secret(), OTPAuthURL: key.URL()}, nil
}

// EnableMFA confirms the pending secret with a code and returns one-time recovery codes.
func (s *Service) EnableMFA(ctx context.Context, p *access.Principal, code, password string) ([]string, error) {
	c, err := s.checkPassword(ctx, p, password)
	if err != nil {
		return nil, err
	}
	if c.MFAEnabled {
		return nil, apperr.Conflict("MFA is already enabled")
	}
	var pending sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT mfa_pending_secret FROM users WHERE id = $1`, c.ID).Scan(&pending); err != nil {
		return nil, fmt.Errorf("load pending MFA secret of user %s: %w", c.ID, err)
	}
	if !pending.Valid {
		return nil, apperr.Conflict("call /auth/mfa/setup first")
	}
	secret, err := s.box.Open(pending.String)
	if err != nil {
		return nil, err
	}
	var codes []string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := s.useTOTP(ctx, tx, c.ID, secret, code); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET mfa_enabled = TRUE, mfa_secret = mfa_pending_secret,
			mfa_pending_secret = NULL, updated_at = $1 WHERE id = $2`, s.clock.Now(), c.ID); err != nil {
			return fmt.Errorf("enable MFA of user %s: %w", c.ID, err)
		}
		if codes, err = s.replaceRecoveryCodes(ctx, tx, c.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "auth.mfa_enabled", Category: audit.CategorySecurity,
			ResourceType: "user", ResourceID: c.ID, ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String})
	})
	if err != nil {
		return codes, fmt.Errorf("enable MFA: %w", err)
	}
	return codes, nil
}

// DisableMFA turns MFA off after a valid code (TOTP or recovery) and the password.
func (s *Service) DisableMFA(ctx context.Context, p *access.Principal, code, password string) error {
	c, err := s.checkPassword(ctx, p, password)
	if err != nil {
		return err
	}
	if !c.MFAEnabled {
		return apperr.Conflict("MFA is not enabled")
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := s.useCode(ctx, tx, c, code); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET mfa_enabled = FALSE, mfa_secret = NULL, mfa_pending_secret = NULL,
			updated_at = $1 WHERE id = $2`, s.clock.Now(), c.ID); err != nil {
			return fmt.Errorf("disable MFA of user %s: %w", c.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM mfa_recovery_codes WHERE user_id = $1`, c.ID); err != nil {
			return fmt.Errorf("delete recovery codes of user %s: %w", c.ID, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "auth.mfa_disabled", Category: audit.CategorySecurity,
			ResourceType: "user", ResourceID: c.ID, ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String})
	})
}

// RegenerateRecoveryCodes replaces every recovery code.
func (s *Service) RegenerateRecoveryCodes(ctx context.Context, p *access.Principal, password string) ([]string, error) {
	c, err := s.checkPassword(ctx, p, password)
	if err != nil {
		return nil, err
	}
	if !c.MFAEnabled {
		return nil, apperr.Conflict("MFA is not enabled")
	}
	var codes []string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		if codes, err = s.replaceRecoveryCodes(ctx, tx, c.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "auth.mfa_recovery_codes_regenerated", Category: audit.CategorySecurity,
			ResourceType: "user", ResourceID: c.ID, ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String})
	})
	if err != nil {
		return codes, fmt.Errorf("regenerate recovery codes: %w", err)
	}
	return codes, nil
}

// VerifyMFA completes a sign-in that answered with an MFA challenge.
func (s *Service) VerifyMFA(ctx context.Context, tempToken, code string) (*Session, error) {
	claims, err := s.parse(tempToken, tokenMFAPending)
	if err != nil {
		return nil, apperr.Unauthorized("invalid or expired tempToken; sign in again")
	}
	if _, err := s.limiter.Hit(ctx, "mfa:"+claims.Subject, mfaPerUser); err != nil {
		return nil, err
	}
	c, err := loadCredential(ctx, s.db, "u.id = $1", claims.Subject)
	if err != nil {
		return nil, err
	}
	if c == nil || c.Status != "active" || !c.MFAEnabled || c.TokenEpoch != claims.Epoch {
		return nil, apperr.Unauthorized("invalid or expired tempToken; sign in again")
	}
	if err := s.db.Write(ctx, func(tx *sql.Tx) error { return s.useCode(ctx, tx, c, code) }); err != nil {
		s.audit.Security(ctx, audit.Entry{Action: "auth.mfa_verify", ResourceType: "user", ResourceID: c.ID,
			ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String, Result: audit.ResultFailure,
			Actor: &audit.Actor{Type: access.ActorUser, ID: c.ID, Email: c.Email}})
		return nil, fmt.Errorf("verify MFA code: %w", err)
	}
	return s.startSession(ctx, c, true, "auth.login")
}

// StepUp turns the caller's session into an MFA-completed one: the session's refresh tokens
// carry mfa from now on, and a new access token with mfa=true is returned.
func (s *Service) StepUp(ctx context.Context, p *access.Principal, code string) (*Session, error) {
	if err := requireUser(p); err != nil || p.SessionID == "" {
		return nil, apperr.Forbidden("step-up needs a signed-in session")
	}
	if _, err := s.limiter.Hit(ctx, "mfa:"+p.UserID, mfaPerUser); err != nil {
		return nil, err
	}
	c, err := loadCredential(ctx, s.db, "u.id = $1", p.UserID)
	if err != nil {
		return nil, err
	}
	if c == nil || !c.MFAEnabled {
		return nil, apperr.Conflict("MFA is not enabled for this user; set it up with /auth/mfa/setup")
	}
	var sess *Session
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := s.useCode(ctx, tx, c, code); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET mfa = TRUE WHERE family_id = $1`, p.SessionID); err != nil {
			return fmt.Errorf("mark session %s as MFA-verified: %w", p.SessionID, err)
		}
		sess, err = s.session(ctx, tx, c, p.SessionID, "", true)
		if err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "auth.mfa_step_up", Category: audit.CategorySecurity,
			ResourceType: "user", ResourceID: c.ID, ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String})
	})
	if err != nil {
		return sess, fmt.Errorf("step up session: %w", err)
	}
	return sess, nil
}

// useCode accepts a TOTP code or, failing that, an unused recovery code.
func (s *Service) useCode(ctx context.Context, tx *sql.Tx, c *credentialRow, code string) error {
	code = strings.TrimSpace(code)
	if len(code) == 6 {
		secret, err := s.box.Open(c.MFASecret.String)
		if err != nil {
			return fmt.Errorf("open MFA secret: %w", err)
		}
		return s.useTOTP(ctx, tx, c.ID, secret, code)
	}
	res, err := tx.ExecContext(ctx, `UPDATE mfa_recovery_codes SET used_at = $1 WHERE user_id = $2 AND code_hash = $3
		AND used_at IS NULL`, s.clock.Now(), c.ID, s.recoveryHash(code))
	if err != nil {
		return fmt.Errorf("use a recovery code of user %s: %w", c.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return apperr.Unauthorized("invalid MFA code")
	}
	return nil
}

// useTOTP checks code against the steps around now and records the matching step, so the
// same code (or an older one) can never be used again: the conditional update has one winner.
func (s *Service) useTOTP(ctx context.Context, tx *sql.Tx, userID, secret, code string) error {
	// The wall clock: the authenticator app makes its codes on it.
	now := time.Now()
	for skew := -totpSkew; skew <= totpSkew; skew++ {
		at := now.Add(time.Duration(skew*totpPeriod) * time.Second)
		want, err := totp.GenerateCodeCustom(secret, at, totpOpts)
		if err != nil {
			return err
		}
		if !hmac.Equal([]byte(want), []byte(code)) {
			continue
		}
		step := at.Unix() / totpPeriod
		res, err := tx.ExecContext(ctx, `UPDATE users SET mfa_last_step = $1 WHERE id = $2 AND mfa_last_step < $1`, step, userID)
		if err != nil {
			return fmt.Errorf("record the TOTP step of user %s: %w", userID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Unauthorized("this MFA code was already used; wait for the next one")
		}
		return nil
	}
	return apperr.Unauthorized("invalid MFA code")
}

const recoveryAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func (s *Service) replaceRecoveryCodes(ctx context.Context, tx *sql.Tx, userID string) ([]string, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM mfa_recovery_codes WHERE user_id = $1`, userID); err != nil {
		return nil, fmt.Errorf("delete recovery codes of user %s: %w", userID, err)
	}
	codes := make([]string, recoveryCount)
	now := s.clock.Now()
	for i := range codes {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		for j := range b {
			b[j] = recoveryAlphabet[int(b[j])%len(recoveryAlphabet)]
		}
		codes[i] = string(b[:4]) + "-" + string(b[4:])
		if _, err := tx.ExecContext(ctx, `INSERT INTO mfa_recovery_codes (id, user_id, code_hash, created_at) VALUES ($1, $2, $3, $4)`,
			store.NewID(), userID, s.recoveryHash(codes[i]), now); err != nil {
			return nil, fmt.Errorf("store recovery codes of user %s: %w", userID, err)
		}
	}
	return codes, nil
}

// recoveryHash is an HMAC keyed with the server's secret (a pepper): a stolen table alone
// does not allow guessing the short codes offline.
func (s *Service) recoveryHash(code string) string {
	norm := strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(code), "-", ""))
	m := hmac.New(sha256.New, s.opts.JWTSecret)
	m.Write([]byte("recovery:" + norm))
	return hex.EncodeToString(m.Sum(nil))
}
