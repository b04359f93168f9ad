package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/mail"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// TokenPasswordReset is the user_tokens kind of password-reset links; invitation links are
// identity.TokenInvite.
const TokenPasswordReset = "password_reset"

// redeemToken marks an unused, unexpired token of kind as used and returns its user. The
// conditional update lets only one caller redeem a token.
func redeemToken(ctx context.Context, tx *sql.Tx, kind, raw string, now time.Time) (string, error) {
	var userID string
	err := tx.QueryRowContext(ctx, `UPDATE user_tokens SET used_at = $1 WHERE token_hash = $2 AND kind = $3
		AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $1 RETURNING user_id`,
		now, secrets.Hash(raw), kind).Scan(&userID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", apperr.BadRequest("INVALID_TOKEN", "this link is invalid, used or expired; ask for a new one")
	}
	if err != nil {
		return "", fmt.Errorf("redeem a %s token: %w", kind, err)
	}
	return userID, nil
}

// AcceptInvite activates an invited user with a password (and optionally a name) and signs
// them in.
func (s *Service) AcceptInvite(ctx context.Context, token, password, name string) (*Session, error) {
	if err := CheckPasswordPolicy("password", password); err != nil {
		return nil, err
	}
	hash := HashPassword(password, s.opts.Argon2)
	var c *credentialRow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		userID, err := redeemToken(ctx, tx, identity.TokenInvite, token, s.clock.Now())
		if err != nil {
			return err
		}
		q := `UPDATE users SET password_hash = $1, status = 'active', updated_at = $2`
		args := []any{hash, s.clock.Now(), userID}
		if n := strings.TrimSpace(name); n != "" {
			q += `, name = $4`
			args = append(args, n)
		}
		res, err := tx.ExecContext(ctx, q+` WHERE id = $3 AND status = 'invited'`, args...)
		if err != nil {
			return fmt.Errorf("activate invited user %s: %w", userID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.BadRequest("INVALID_TOKEN", "this invitation was already accepted")
		}
		if c, err = loadCredential(ctx, tx, "u.id = $1", userID); err != nil || c == nil {
			return errors.Join(err, apperr.BadRequest("INVALID_TOKEN", "the invited account no longer exists"))
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "user.invite_accepted", ResourceType: "user", ResourceID: c.ID,
			ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String,
			Actor: &audit.Actor{Type: access.ActorUser, ID: c.ID, Email: c.Email}})
	})
	if err != nil {
		return nil, fmt.Errorf("accept invite: %w", err)
	}
	return s.startSession(ctx, c, false, "auth.login")
}

// ForgotPassword mails a reset link when the address belongs to an active user. The answer
// is the same either way; without SMTP nothing can be sent and the log says so.
func (s *Service) ForgotPassword(ctx context.Context, email string) error {
	email = strings.ToLower(strings.TrimSpace(email))
	if _, err := s.limiter.Hit(ctx, "forgot:ip:"+access.RequestFrom(ctx).IP, loginPerIP); err != nil {
		return err
	}
	c, err := loadCredential(ctx, s.db, "u.email = $1", email)
	if err != nil || c == nil || c.Status != identity.StatusActive {
		return err
	}
	if s.mailer == nil {
		s.logger.WarnContext(ctx, "password reset requested but SMTP_URL is not set; an administrator can issue a reset link with POST /api/v1/users/{id}/password-reset or `gale user reset-password`", "email", email)
		return nil
	}
	_, err = s.IssuePasswordReset(ctx, c.ID)
	return err
}

// IssuePasswordReset creates a reset token for the user and mails the link when SMTP is
// configured; it returns the link when it is not (for an administrator to pass on).
func (s *Service) IssuePasswordReset(ctx context.Context, userID string) (link string, err error) {
	c, err := loadCredential(ctx, s.db, "u.id = $1", userID)
	if err != nil {
		return "", err
	}
	if c == nil || c.Status != identity.StatusActive {
		return "", apperr.Conflict("only an active user's password can be reset")
	}
	token := secrets.Token("", 32)
	link = s.opts.PublicURL + "/reset-password?token=" + token
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `UPDATE user_tokens SET revoked_at = $1 WHERE user_id = $2 AND kind = $3 AND used_at IS NULL
			AND revoked_at IS NULL`, now, c.ID, TokenPasswordReset); err != nil {
			return fmt.Errorf("revoke earlier password resets of user %s: %w", c.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_tokens (id, user_id, kind, token_hash, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, store.NewID(), c.ID, TokenPasswordReset, secrets.Hash(token),
			now.Add(s.opts.ResetTTL), now); err != nil {
			return fmt.Errorf("store password reset of user %s: %w", c.ID, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "user.password_reset_requested", Category: audit.CategorySecurity,
			ResourceType: "user", ResourceID: c.ID, ResourceName: c.Email, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String})
	})
	if err != nil {
		return "", fmt.Errorf("issue password reset: %w", err)
	}
	if s.mailer == nil {
		return link, nil
	}
	err = s.mailer.Send(ctx, mail.Message{To: []string{c.Email}, Subject: "Reset your Gale password",
		Body: "Someone asked to reset the password of your Gale account.\n\nOpen this link within " +
			s.opts.ResetTTL.String() + " to choose a new password:\n\n" + link +
			"\n\nIf it was not you, ignore this message; your password stays as it is.\n"})
	if err != nil {
		s.logger.WarnContext(ctx, "password reset email failed", "userId", c.ID, "error", err)
		return "", &apperr.Error{Kind: apperr.KindUpstream, Code: "MAIL_FAILED",
			Message: "the reset email could not be sent; check SMTP_URL and the mail server, then try again"}
	}
	return "", nil
}

// AdminPasswordReset issues a reset link for a user the caller may manage: mailed when SMTP
// is configured, returned (for the administrator to pass on) when it is not.
func (s *Service) AdminPasswordReset(ctx context.Context, userID string) (link string, err error) {
	if _, err := s.users.ManageableUser(ctx, userID); err != nil {
		return "", err
	}
	return s.IssuePasswordReset(ctx, userID)
}

// ResetPassword sets a new password with a reset token; every session of the user ends.
func (s *Service) ResetPassword(ctx context.Context, token, password string) error {
	if err := CheckPasswordPolicy("password", password); err != nil {
		return err
	}
	hash := HashPassword(password, s.opts.Argon2)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		userID, err := redeemToken(ctx, tx, TokenPasswordReset, token, s.clock.Now())
		if err != nil {
			return err
		}
		return setPassword(ctx, tx, userID, hash, "user.password_reset", s.clock.Now())
	})
}

// ChangePassword replaces the caller's password after checking the current one. Every
// session ends (the token epoch moves); the caller signs in again.
func (s *Service) ChangePassword(ctx context.Context, p *access.Principal, current, next string) error {
	if err := CheckPasswordPolicy("newPassword", next); err != nil {
		return err
	}
	if _, err := s.checkPassword(ctx, p, current); err != nil {
		return err
	}
	hash := HashPassword(next, s.opts.Argon2)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		return setPassword(ctx, tx, p.UserID, hash, "user.password_changed", s.clock.Now())
	})
}

// SetPassword sets a user's password from the command line (operator reset), which runs
// without the service and so on the system's time.
func SetPassword(ctx context.Context, db *store.DB, email, password string, p Argon2Params) error {
	if err := CheckPasswordPolicy("password", password); err != nil {
		return err
	}
	return db.Write(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE email = $1`, strings.ToLower(strings.TrimSpace(email))).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return apperr.NotFound("user " + email)
		}
		if err != nil {
			return fmt.Errorf("find user %s: %w", email, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET status = 'active' WHERE id = $1 AND status = 'invited'`, id); err != nil {
			return fmt.Errorf("activate user %s: %w", id, err)
		}
		return setPassword(ctx, tx, id, HashPassword(password, p), "user.password_reset", store.Now())
	})
}

func setPassword(ctx context.Context, tx *sql.Tx, userID, hash, action string, now time.Time) error {
	var email string
	var partnerID, orgID sql.NullString
	err := tx.QueryRowContext(ctx, `UPDATE users SET password_hash = $1, token_epoch = token_epoch + 1, updated_at = $2
		WHERE id = $3 RETURNING email, partner_id, org_id`, hash, now, userID).Scan(&email, &partnerID, &orgID)
	if err != nil {
		return fmt.Errorf("set password of user %s: %w", userID, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL`, now, userID); err != nil {
		return fmt.Errorf("end sessions of user %s: %w", userID, err)
	}
	return audit.Record(ctx, tx, audit.Entry{Action: action, Category: audit.CategorySecurity, ResourceType: "user",
		ResourceID: userID, ResourceName: email, PartnerID: partnerID.String, OrgID: orgID.String})
}
