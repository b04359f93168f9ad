package identity

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/mail"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// TokenInvite is the user_tokens kind of invitation links (POST /auth/accept-invite redeems
// them).
const TokenInvite = "invite"

// InviteInput is an invitation request. The new user's level is the role's scope.
type InviteInput struct {
	Email     string   `json:"email" format:"email" maxLength:"320"`
	Name      string   `json:"name" minLength:"1" maxLength:"200"`
	RoleID    string   `json:"roleId" format:"uuid" doc:"A role GET /users/roles lists; its scope decides the user's level."`
	PartnerID string   `json:"partnerId,omitempty" format:"uuid" doc:"System callers inviting a partner user: the partner."`
	OrgID     string   `json:"orgId,omitempty" format:"uuid" doc:"Organization roles: the user's organization (organization callers: their own)."`
	OrgAccess string   `json:"orgAccess,omitempty" enum:"all,selected,none" doc:"Partner users: which organizations they reach; default all."`
	OrgIDs    []string `json:"orgIds,omitempty" maxItems:"1000" doc:"With orgAccess selected."`
}

// InviteResult is the answer to an invitation: the invited user and how the link travels.
type InviteResult struct {
	User User `json:"user"`
	// InviteURL is set only when mail is not configured, for the operator to pass on.
	InviteURL string `json:"inviteUrl,omitempty" doc:"Present only when SMTP is not configured: pass the link on to the user."`
	EmailSent bool   `json:"emailSent"`
}

// placeInvite decides where a user invited with role r belongs, from the caller and the
// request's partnerId and orgId.
func placeInvite(ctx context.Context, q store.Querier, p *access.Principal, r Role, in InviteInput) (partnerID, orgID string, err error) {
	switch r.Scope {
	case access.LevelSystem:
		if !p.Scope.IsSystem() {
			return "", "", apperr.NotFound("role")
		}
		if in.PartnerID != "" || in.OrgID != "" {
			return "", "", apperr.Invalid("roleId", "system users belong to no partner or organization")
		}
		return "", "", nil
	case access.LevelPartner:
		if in.OrgID != "" {
			return "", "", apperr.Invalid("orgId", "orgId goes with an organization role; this role makes a partner user")
		}
		switch p.Scope.Level {
		case access.LevelPartner:
			if in.PartnerID != "" && in.PartnerID != p.Scope.PartnerID {
				return "", "", apperr.NotFound("partner")
			}
			return p.Scope.PartnerID, "", nil
		case access.LevelSystem:
			if in.PartnerID == "" {
				return "", "", apperr.Invalid("partnerId", "name the partner of the new partner user")
			}
			return in.PartnerID, "", partnerExists(ctx, q, in.PartnerID)
		}
		return "", "", apperr.NotFound("role")
	case access.LevelOrganization:
		if p.Scope.Level == access.LevelOrganization {
			if in.OrgID != "" && in.OrgID != p.Scope.OrgID {
				return "", "", apperr.NotFound("organization")
			}
			return p.Scope.PartnerID, p.Scope.OrgID, nil
		}
		if in.OrgID == "" {
			return "", "", apperr.Invalid("orgId", "name the organization of the new organization user")
		}
		owner, err := orgInScope(ctx, q, p.Scope, in.OrgID)
		if err != nil {
			return "", "", err
		}
		if in.PartnerID != "" && in.PartnerID != owner {
			return "", "", apperr.NotFound("organization")
		}
		return owner, in.OrgID, nil
	}
	return "", "", apperr.Invalid("roleId", "the role has no valid scope")
}

// InviteUser creates a user in status invited and an invitation link: mailed when SMTP is
// configured, returned otherwise.
func (s *Service) InviteUser(ctx context.Context, in InviteInput) (InviteResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return InviteResult{}, err
	}
	email := strings.ToLower(strings.TrimSpace(in.Email))
	if !strings.Contains(email, "@") || utf8.RuneCountInString(email) > 320 {
		return InviteResult{}, apperr.Invalid("email", "not an email address")
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return InviteResult{}, apperr.Invalid("name", "name is required")
	}
	if utf8.RuneCountInString(name) > 200 {
		return InviteResult{}, apperr.Invalid("name", "a name has at most 200 characters")
	}
	var u User
	var token string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := getRole(ctx, tx, p.Scope, in.RoleID)
		if err != nil {
			return err
		}
		partnerID, orgID, err := placeInvite(ctx, tx, p, r, in)
		if err != nil {
			return err
		}
		if err := checkAssignable(p, r, r.Scope, partnerID, orgID); err != nil {
			return err
		}
		if r.Scope != access.LevelPartner && (in.OrgAccess != "" && in.OrgAccess != OrgAccessAll || len(in.OrgIDs) > 0) {
			return apperr.Invalid("orgAccess", "only partner users have organization access settings")
		}
		id, now := store.NewID(), s.clock.Now()
		_, err = tx.ExecContext(ctx, `INSERT INTO users (id, email, name, status, scope, partner_id, org_id, role_id, org_access,
			created_at, updated_at) VALUES ($1, $2, $3, 'invited', $4, $5, $6, $7, 'all', $8, $8)`,
			id, email, name, string(r.Scope), store.NullIfEmpty(partnerID), store.NullIfEmpty(orgID), r.ID, now)
		if store.IsUniqueViolation(err) {
			return apperr.Conflict("a user with email " + email + " already exists")
		}
		if err != nil {
			return fmt.Errorf("insert invited user %s: %w", email, err)
		}
		if r.Scope == access.LevelPartner {
			if err := s.setOrgAccess(ctx, tx, p, id, partnerID, in.OrgAccess, in.OrgIDs); err != nil {
				return err
			}
		}
		if token, err = s.issueInvite(ctx, tx, id); err != nil {
			return err
		}
		if u, err = getUser(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "user.invite", ResourceType: "user", ResourceID: id, ResourceName: email,
			PartnerID: partnerID, OrgID: orgID, Details: audit.Snapshot(u)})
	})
	if err != nil {
		return InviteResult{}, fmt.Errorf("invite user: %w", err)
	}
	return s.deliverInvite(ctx, p, u, token), nil
}

// ResendInvite revokes a pending invitation's earlier links and issues a new one.
func (s *Service) ResendInvite(ctx context.Context, userID string) (InviteResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return InviteResult{}, err
	}
	var u User
	var token string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		if u, err = manageable(ctx, tx, p, userID); err != nil {
			return err
		}
		if u.Status != StatusInvited {
			return apperr.Conflict("only a user who has not accepted the invitation yet can be invited again")
		}
		if token, err = s.issueInvite(ctx, tx, userID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "user.invite_resent", ResourceType: "user", ResourceID: userID,
			ResourceName: u.Email, PartnerID: store.Deref(u.PartnerID), OrgID: store.Deref(u.OrgID)})
	})
	if err != nil {
		return InviteResult{}, fmt.Errorf("resend invite: %w", err)
	}
	return s.deliverInvite(ctx, p, u, token), nil
}

// issueInvite revokes the user's unused invitation tokens and stores the hash of a new one.
func (s *Service) issueInvite(ctx context.Context, tx *sql.Tx, userID string) (string, error) {
	now := s.clock.Now()
	if _, err := tx.ExecContext(ctx, `UPDATE user_tokens SET revoked_at = $1 WHERE user_id = $2 AND kind = $3
		AND used_at IS NULL AND revoked_at IS NULL`, now, userID, TokenInvite); err != nil {
		return "", fmt.Errorf("revoke earlier invitations of user %s: %w", userID, err)
	}
	token := secrets.Token("", 32)
	_, err := tx.ExecContext(ctx, `INSERT INTO user_tokens (id, user_id, kind, token_hash, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, store.NewID(), userID, TokenInvite, secrets.Hash(token), now.Add(s.opts.InviteTTL), now)
	if err != nil {
		return "", fmt.Errorf("store invitation of user %s: %w", userID, err)
	}
	return token, nil
}

// deliverInvite mails the link when SMTP is configured and otherwise returns it. A failed
// send is logged and reported as emailSent false (resend the invitation to try again).
func (s *Service) deliverInvite(ctx context.Context, p *access.Principal, u User, token string) InviteResult {
	link := s.opts.PublicURL + "/accept-invite?token=" + token
	if s.mailer == nil {
		return InviteResult{User: u, InviteURL: link}
	}
	inviter := p.Name
	if inviter == "" {
		inviter = p.Email
	}
	if inviter == "" {
		inviter = "An administrator"
	}
	err := s.mailer.Send(ctx, mail.Message{To: []string{u.Email}, Subject: "You are invited to Gale",
		Body: inviter + " invited you to Gale.\n\nOpen this link within " + s.opts.InviteTTL.String() +
			" to choose a password and sign in:\n\n" + link + "\n\nIf you did not expect this, ignore this message.\n"})
	if err != nil {
		s.logger.WarnContext(ctx, "invitation email failed; resend the invitation once mail works", "userId", u.ID, "error", err)
		return InviteResult{User: u}
	}
	return InviteResult{User: u, EmailSent: true}
}
