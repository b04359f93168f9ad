package identity

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/mail"
	"gale/internal/platform/store"
)

// Options configures the identity service.
type Options struct {
	// PublicURL is the address users reach the server at; invitation links start with it.
	PublicURL string
	// InviteTTL is how long an invitation link works; zero means seven days.
	InviteTTL time.Duration
}

// Service implements users, invitations, roles and access reviews over the HTTP API.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
	// mailer sends invitations; nil means mail is not configured and the API answers with
	// the invitation link instead.
	mailer mail.Sender
	opts   Options
}

// Deps is what the identity service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Mail sends invitations; nil when SMTP is not configured.
	Mail mail.Sender
}

// New returns the identity service.
func New(d Deps, opts Options) *Service {
	if opts.InviteTTL <= 0 {
		opts.InviteTTL = 7 * 24 * time.Hour
	}
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), mailer: d.Mail, opts: opts}
}

// caller returns the request's principal; every service method starts with it.
func caller(ctx context.Context) (*access.Principal, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return nil, apperr.Unauthorized("sign in first")
	}
	return p, nil
}

// UserFilter renders the condition keeping users (alias u) the scope may see: system sees
// every user; a partner its partner-level users and the users of organizations it reaches;
// an organization its own users; nobody the users of a deleted organization. The zero Scope
// sees nothing. Other packages that show users (global search) use it, through UsersInScope,
// so the rule stays one.
func UserFilter(scope access.Scope, a *store.Args) string {
	// Users of a soft-deleted organization are hidden with it (and come back on restore).
	live := tenancy.LiveOrg("u.org_id")
	if scope.IsSystem() {
		return live
	}
	return "(" + live + " AND ((u.scope = 'partner' AND " + scope.PartnerFilter(a, "u.partner_id") +
		") OR (u.scope = 'organization' AND " + scope.OrgFilter(a, "u.org_id", "u.partner_id") + ")))"
}

// UsersInScope renders the FROM and WHERE of a read of the users (alias u) the scope may see,
// for views of other domains (search) that add their columns and conditions.
func UsersInScope(scope access.Scope, a *store.Args) string {
	return " FROM users u WHERE " + UserFilter(scope, a)
}

// roleFilter renders the condition keeping roles (alias r) the scope may see: built-in roles
// of the caller's level and below, the partner's custom roles, and the custom roles of
// organizations in reach. An organization caller sees only organization-scope roles.
func roleFilter(scope access.Scope, a *store.Args) string {
	switch scope.Level {
	case access.LevelSystem:
		return "TRUE"
	case access.LevelPartner:
		if scope.PartnerID == "" {
			return "FALSE"
		}
		return "((r.tenant_key = 'builtin' AND r.scope IN ('partner', 'organization')) OR r.tenant_key = " +
			a.Add("p:"+scope.PartnerID) + " OR (r.org_id IS NOT NULL AND " + scope.OrgFilter(a, "r.org_id", "r.partner_id") + "))"
	case access.LevelOrganization:
		if scope.OrgID == "" || scope.PartnerID == "" {
			return "FALSE"
		}
		return "(r.scope = 'organization' AND (r.tenant_key = 'builtin' OR r.tenant_key = " + a.Add("p:"+scope.PartnerID) +
			" OR r.tenant_key = " + a.Add("o:"+scope.OrgID) + "))"
	}
	return "FALSE"
}

func itoa(i int) string { return strconv.Itoa(i) }
