package identity

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"gale/internal/access"
	"gale/internal/apperr"
	"gale/internal/httpapi"
	"gale/internal/mail"
	"gale/internal/store"
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
	// mailer sends invitations; nil means mail is not configured and the API answers with
	// the invitation link instead.
	mailer mail.Sender
	opts   Options
}

// New returns the identity service. mailer may be nil (no SMTP).
func New(db *store.DB, logger *slog.Logger, mailer mail.Sender, opts Options) *Service {
	if opts.InviteTTL <= 0 {
		opts.InviteTTL = 7 * 24 * time.Hour
	}
	return &Service{db: db, logger: logger, mailer: mailer, opts: opts}
}

// caller returns the request's principal; every service method starts with it.
func caller(ctx context.Context) (*access.Principal, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return nil, apperr.Unauthorized("sign in first")
	}
	return p, nil
}

// userFilter renders the condition keeping users (alias u) the scope may see: system sees
// every user; a partner its partner-level users and the users of organizations it reaches;
// an organization its own users. The zero Scope sees nothing.
func userFilter(scope access.Scope, a *store.Args) string {
	if scope.IsSystem() {
		return "TRUE"
	}
	return "((u.scope = 'partner' AND " + scope.PartnerFilter(a, "u.partner_id") + ") OR (u.scope = 'organization' AND " +
		scope.OrgFilter(a, "u.org_id", "u.partner_id") + "))"
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

// listSpec is one paged list query: columns and FROM clause, conditions, and the two sort
// columns (a unique key last) that the cursor encodes.
type listSpec struct {
	columns string
	from    string
	conds   []string
	args    *store.Args
	sortKey string
	sortID  string
	desc    bool
}

// listRows runs spec in cursor mode, or in legacy page mode (then with the total).
func listRows[T any](ctx context.Context, q store.Querier, spec listSpec, page store.Page,
	scan func(scanner) (T, error), key func(T) (string, string)) ([]T, string, *int, error) {
	a := spec.args
	conds := spec.conds
	var total *int
	cmp, dir := ">", "ASC"
	if spec.desc {
		cmp, dir = "<", "DESC"
	}
	if page.Number > 0 {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) `+spec.from+` WHERE `+store.Where(conds), a.Values()...).Scan(&n); err != nil {
			return nil, "", nil, err
		}
		total = &n
	} else if page.Cursor != "" {
		var k, id string
		if err := store.DecodeCursor(page.Cursor, &k, &id); err != nil {
			return nil, "", nil, err
		}
		if !store.ValidID(id) || (spec.sortKey == spec.sortID && !store.ValidID(k)) {
			return nil, "", nil, apperr.Invalid("cursor", "malformed cursor; pass back the cursor of a previous page")
		}
		conds = append(conds, fmt.Sprintf("(%s %s %s OR (%s = %s AND %s %s %s))", spec.sortKey, cmp, a.Add(k),
			spec.sortKey, a.Add(k), spec.sortID, cmp, a.Add(id)))
	}
	query := `SELECT ` + spec.columns + spec.from + ` WHERE ` + store.Where(conds) +
		fmt.Sprintf(` ORDER BY %s %s, %s %s LIMIT %s`, spec.sortKey, dir, spec.sortID, dir, a.Add(page.Limit+1))
	if page.Number > 0 {
		query += ` OFFSET ` + a.Add(page.Offset())
	}
	rows, err := q.QueryContext(ctx, query, a.Values()...)
	if err != nil {
		return nil, "", nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, "", nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, "", nil, err
	}
	next := ""
	if len(out) > page.Limit {
		out = out[:page.Limit]
		k, id := key(out[len(out)-1])
		next = store.EncodeCursor(k, id)
	}
	if page.Number > 0 {
		next = ""
	}
	return out, next, total, nil
}

// pagination builds the envelope's paging part for cursor or legacy page mode.
func pagination(next string, page store.Page, total *int) httpapi.Pagination {
	p := httpapi.Pagination{HasMore: next != "", Cursor: next}
	if page.Number > 0 {
		p.Page, p.Limit, p.Total = page.Number, page.Limit, total
		p.HasMore = total != nil && page.Number*page.Limit < *total
	}
	return p
}

func itoa(i int) string { return strconv.Itoa(i) }
