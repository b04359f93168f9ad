package partnerapi

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Scopes are the scope names of the §4 table: each partner-API route needs one. They are
// catalog permissions too, so a creator hands on only scopes it holds itself.
var Scopes = []string{
	"organizations:read", "organizations:write", "sites:read", "sites:write", "devices:read", "inventory:read",
	"configuration:read", "scripts:read", "backup-configuration:read", "custom-fields:read", "enrollment-keys:write",
}

// Principal statuses. expired is derived: an active principal past its expiresAt.
const (
	StatusActive   = "active"
	StatusDisabled = "disabled"
	StatusExpired  = "expired"
	StatusRevoked  = "revoked"
)

// Limits of principals and keys.
const (
	maxCIDRs     = 50
	maxRateLimit = 10000
	keyPrefixLen = 14
)

// KeyPrefix starts every service-principal key.
const KeyPrefix = "svc_sp_"

// ServicePrincipal is the API view of a service principal.
type ServicePrincipal struct {
	ID          string     `json:"id" format:"uuid"`
	PartnerID   string     `json:"partnerId" format:"uuid"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Scopes      []string   `json:"scopes"`
	Status      string     `json:"status" enum:"active,disabled,expired" doc:"expired: active, but past expiresAt."`
	ExpiresAt   *time.Time `json:"expiresAt" doc:"After this the principal's keys stop working; null: no expiry."`
	SourceCIDRs []string   `json:"sourceCidrs" doc:"Networks (IPv4 or IPv6) requests must come from; empty: any address."`
	RateLimit   *int       `json:"rateLimit" doc:"Own write budget per hour; the partner API's 120 per hour applies when lower or when null."`
	CreatedBy   *string    `json:"createdBy" doc:"The user who created the principal; null once that user is deleted."`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
}

// NewServicePrincipal is the body of a create.
type NewServicePrincipal struct {
	Name        string     `json:"name" minLength:"1" maxLength:"200" doc:"Unique within the partner."`
	Description string     `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Scopes      []string   `json:"scopes" minItems:"1" maxItems:"20" doc:"Scope names of the partner API; each must be held by the creator."`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty" doc:"In the future. Needed (with sourceCidrs) to mint enrollment keys."`
	SourceCIDRs []string   `json:"sourceCidrs,omitempty" maxItems:"50" doc:"CIDRs or single addresses, IPv4 or IPv6. Needed (with expiresAt) to mint enrollment keys."`
	RateLimit   *int       `json:"rateLimit,omitempty" minimum:"1" maximum:"10000" doc:"Own write budget per hour."`
}

// ServicePrincipalUpdate holds the writable fields; absent fields are left as they are.
type ServicePrincipalUpdate struct {
	Name        *string    `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Description *string    `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Scopes      []string   `json:"scopes,omitempty" minItems:"1" maxItems:"20" doc:"Replaces the scopes."`
	Status      *string    `json:"status,omitempty" enum:"active,disabled" doc:"disabled: every key of the principal stops working at once."`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty" doc:"A new expiry, in the future."`
	SourceCIDRs []string   `json:"sourceCidrs,omitempty" maxItems:"50" doc:"Replaces the allowlist; [] allows any address again."`
	RateLimit   *int       `json:"rateLimit,omitempty" minimum:"1" maximum:"10000"`
}

const principalColumns = `p.id, p.partner_id, p.name, p.description, p.scopes, p.status, p.expires_at, p.source_cidrs,
	p.rate_limit, p.created_by, p.created_at, p.updated_at`

func (s *Service) scanPrincipal(row store.Scanner) (ServicePrincipal, error) {
	var p ServicePrincipal
	var scopes, cidrs string
	var expires sql.NullTime
	var rate sql.NullInt64
	var createdBy sql.NullString
	err := row.Scan(&p.ID, &p.PartnerID, &p.Name, &p.Description, &scopes, &p.Status, &expires, &cidrs, &rate, &createdBy,
		&p.CreatedAt, &p.UpdatedAt)
	if err != nil {
		return p, err
	}
	if p.Scopes, err = store.DecodeStrings(scopes); err != nil {
		return p, err
	}
	if p.SourceCIDRs, err = store.DecodeStrings(cidrs); err != nil {
		return p, err
	}
	p.ExpiresAt, p.RateLimit, p.CreatedBy = store.TimePtr(expires), intPtr(rate), store.StringPtr(createdBy)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	if p.Status == StatusActive && p.ExpiresAt != nil && !p.ExpiresAt.After(s.now()) {
		p.Status = StatusExpired
	}
	return p, nil
}

func intPtr(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}

// manager is the caller of a principal or key change: a signed-in user of a partner who
// reaches all its organizations (a principal reaches them all), holding grants (the scopes it
// hands on).
func manager(ctx context.Context, grants []string) (*access.Principal, error) {
	p := access.PrincipalFrom(ctx)
	switch {
	case p == nil:
		return nil, apperr.Unauthorized("sign in first")
	case p.Kind != access.ActorUser:
		return nil, apperr.Forbidden("only a signed-in user manages service principals and their keys")
	case p.Scope.Level != access.LevelPartner:
		return nil, apperr.Forbidden("service principals belong to a partner: sign in as a partner administrator")
	case p.Scope.OrgLimited():
		return nil, apperr.Forbidden("a service principal reaches every organization of the partner; so must its manager")
	case !p.Permissions.Covers(grants):
		return nil, apperr.Forbidden("a service principal cannot hold scopes its manager does not hold")
	}
	return p, nil
}

// checkScopes refuses names outside Scopes and returns the set sorted.
func checkScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, apperr.Invalid("scopes", "name at least one scope")
	}
	out := []string{}
	for _, sc := range scopes {
		if !slices.Contains(Scopes, sc) {
			return nil, apperr.Invalid("scopes", fmt.Sprintf("%q is not a partner API scope; use %s", sc, strings.Join(Scopes, ", ")))
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkCIDRs parses CIDRs and single addresses (IPv4 or IPv6) into canonical CIDRs.
func checkCIDRs(in []string) ([]string, error) {
	if len(in) > maxCIDRs {
		return nil, apperr.Invalid("sourceCidrs", fmt.Sprintf("at most %d entries", maxCIDRs))
	}
	out := []string{}
	for _, c := range in {
		c = strings.TrimSpace(c)
		if !strings.Contains(c, "/") {
			ip := net.ParseIP(c)
			if ip == nil {
				return nil, apperr.Invalid("sourceCidrs", fmt.Sprintf("%q is not an address or CIDR", c))
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			c = fmt.Sprintf("%s/%d", ip, bits)
		}
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			return nil, apperr.Invalid("sourceCidrs", fmt.Sprintf("%q is not an address or CIDR", c))
		}
		if !slices.Contains(out, n.String()) {
			out = append(out, n.String())
		}
	}
	return out, nil
}

// allows reports whether ip is inside one of cidrs (an empty list allows every address).
func allows(cidrs []string, ip string) bool {
	if len(cidrs) == 0 {
		return true
	}
	addr := net.ParseIP(ip)
	if addr == nil {
		return false
	}
	for _, c := range cidrs {
		if _, n, err := net.ParseCIDR(c); err == nil && n.Contains(addr) {
			return true
		}
	}
	return false
}

func (s *Service) checkExpiry(field string, t *time.Time) (any, error) {
	if t == nil {
		return nil, nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	if !u.After(s.now()) {
		return nil, apperr.Invalid(field, "must be in the future")
	}
	return u, nil
}

func nameTaken(err error, name string) error {
	if store.IsUniqueViolation(err) {
		return apperr.Conflict("the partner already has a service principal named " + name)
	}
	return err
}

// ListPrincipals lists the service principals in scope (a partner's own; all for system
// callers), newest first.
func (s *Service) ListPrincipals(ctx context.Context, page store.Page) ([]ServicePrincipal, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).PartnerFilter(&a, "p.partner_id")}
	return store.List(ctx, s.db, store.ListQuery{Columns: principalColumns, From: " FROM service_principals p", Conds: conds,
		Args: &a, SortKey: "p.id", SortID: "p.id", Desc: true}, page, s.scanPrincipal,
		func(p ServicePrincipal) (string, string) { return p.ID, p.ID })
}

// GetPrincipal returns a service principal in scope.
func (s *Service) GetPrincipal(ctx context.Context, id string) (ServicePrincipal, error) {
	return s.getPrincipal(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) getPrincipal(ctx context.Context, q store.Querier, scope access.Scope, id string) (ServicePrincipal, error) {
	var a store.Args
	return store.ByID(ctx, q, "service principal", `SELECT `+principalColumns+` FROM service_principals p`, "p.id", id, &a,
		[]string{scope.PartnerFilter(&a, "p.partner_id")}, s.scanPrincipal)
}

// principalDetails is what the audit log keeps of a principal.
func principalDetails(p ServicePrincipal) map[string]any {
	return map[string]any{"name": p.Name, "scopes": p.Scopes, "status": p.Status, "expiresAt": p.ExpiresAt,
		"sourceCidrs": p.SourceCIDRs, "rateLimit": p.RateLimit}
}

// CreatePrincipal creates a service principal of the caller's partner.
func (s *Service) CreatePrincipal(ctx context.Context, in NewServicePrincipal) (ServicePrincipal, error) {
	scopes, err := checkScopes(in.Scopes)
	if err != nil {
		return ServicePrincipal{}, err
	}
	caller, err := manager(ctx, scopes)
	if err != nil {
		return ServicePrincipal{}, err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return ServicePrincipal{}, apperr.Invalid("name", "name is required")
	}
	cidrs, err := checkCIDRs(in.SourceCIDRs)
	if err != nil {
		return ServicePrincipal{}, err
	}
	expires, err := s.checkExpiry("expiresAt", in.ExpiresAt)
	if err != nil {
		return ServicePrincipal{}, err
	}
	var out ServicePrincipal
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		id, now := store.NewID(), s.now()
		_, err := tx.ExecContext(ctx, `INSERT INTO service_principals (id, partner_id, name, description, scopes, status,
			expires_at, source_cidrs, rate_limit, created_by, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
			id, caller.Scope.PartnerID, name, in.Description, store.EncodeStrings(scopes), StatusActive, expires, store.EncodeStrings(cidrs),
			in.RateLimit, caller.UserID, now)
		if err != nil {
			return nameTaken(err, name)
		}
		if out, err = s.getPrincipal(ctx, tx, caller.Scope, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "service_principal.create", ResourceType: "service_principal",
			ResourceID: id, ResourceName: name, PartnerID: out.PartnerID, Details: principalDetails(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create service principal: %w", err)
	}
	return out, nil
}

// UpdatePrincipal changes a service principal of the caller's partner; status disabled
// stops all its keys at once.
func (s *Service) UpdatePrincipal(ctx context.Context, id string, in ServicePrincipalUpdate) (ServicePrincipal, error) {
	var scopes []string
	if in.Scopes != nil {
		var err error
		if scopes, err = checkScopes(in.Scopes); err != nil {
			return ServicePrincipal{}, err
		}
	}
	caller, err := manager(ctx, scopes)
	if err != nil {
		return ServicePrincipal{}, err
	}
	expires, err := s.checkExpiry("expiresAt", in.ExpiresAt)
	if err != nil {
		return ServicePrincipal{}, err
	}
	var out ServicePrincipal
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getPrincipal(ctx, tx, caller.Scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.now())
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
		if scopes != nil {
			ch.Set("scopes", store.EncodeStrings(scopes))
		}
		if in.Status != nil {
			ch.Set("status", *in.Status)
		}
		if expires != nil {
			ch.Set("expires_at", expires)
		}
		if in.SourceCIDRs != nil {
			cidrs, err := checkCIDRs(in.SourceCIDRs)
			if err != nil {
				return err
			}
			ch.Set("source_cidrs", store.EncodeStrings(cidrs))
		}
		if in.RateLimit != nil {
			ch.Set("rate_limit", *in.RateLimit)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE service_principals SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id),
			ch.Args.Values()...); err != nil {
			return nameTaken(err, store.Deref(in.Name))
		}
		if out, err = s.getPrincipal(ctx, tx, caller.Scope, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "service_principal.update", ResourceType: "service_principal",
			ResourceID: id, ResourceName: out.Name, PartnerID: out.PartnerID, Details: audit.Diff(before, out)})
	})
	if err != nil {
		return out, fmt.Errorf("update service principal: %w", err)
	}
	return out, nil
}
