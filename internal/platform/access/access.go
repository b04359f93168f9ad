// Package access says who is calling and what they may reach: the Principal of a request,
// the tenancy Scope it resolves to, the permission catalog and the built-in roles. It is a
// leaf package: the HTTP layer and every domain depend on it, and it depends on none of them.
package access

import (
	"context"
	"slices"

	"gale/internal/platform/store"
)

// Level is the tenancy level a caller belongs to.
type Level string

// The three levels of the tenancy tree a caller can belong to.
const (
	LevelSystem       Level = "system"
	LevelPartner      Level = "partner"
	LevelOrganization Level = "organization"
)

// Valid reports whether l is one of the three levels.
func (l Level) Valid() bool {
	return l == LevelSystem || l == LevelPartner || l == LevelOrganization
}

// Scope is the part of the tenancy tree a caller may see. The zero Scope sees nothing.
type Scope struct {
	Level     Level
	PartnerID string // set for partner and organization callers
	OrgID     string // set for organization callers
	// OrgIDs limits a partner caller to these organizations; nil means every organization
	// of the partner. An empty non-nil slice means none.
	OrgIDs []string
}

// SystemScope sees everything.
func SystemScope() Scope { return Scope{Level: LevelSystem} }

// IsSystem reports whether the scope is system-wide.
func (s Scope) IsSystem() bool { return s.Level == LevelSystem }

// OrgLimited reports whether a partner scope is restricted to selected organizations.
func (s Scope) OrgLimited() bool { return s.Level == LevelPartner && s.OrgIDs != nil }

// OrgFilter renders the condition that keeps rows of organizations in scope, given the
// row's organization and partner columns. Every query of tenant data goes through it (or
// TenantFilter, or PartnerFilter), so an unset scope fails closed.
func (s Scope) OrgFilter(a *store.Args, orgCol, partnerCol string) string {
	return s.filter(a, orgCol, partnerCol, false)
}

// TenantFilter renders the condition for rows that belong either to a partner itself (the
// organization column NULL) or to one of its organizations (users, API keys, audit entries):
// as OrgFilter, except that a partner caller limited to selected organizations still sees
// its partner's own rows.
func (s Scope) TenantFilter(a *store.Args, orgCol, partnerCol string) string {
	return s.filter(a, orgCol, partnerCol, true)
}

func (s Scope) filter(a *store.Args, orgCol, partnerCol string, partnerRows bool) string {
	switch s.Level {
	case LevelSystem:
		return "TRUE"
	case LevelPartner:
		if s.PartnerID == "" {
			return "FALSE"
		}
		cond := partnerCol + " = " + a.Add(s.PartnerID)
		if s.OrgIDs == nil {
			return cond
		}
		in := orgCol + " IN " + a.In(s.OrgIDs)
		if partnerRows {
			in = "(" + orgCol + " IS NULL OR " + in + ")"
		}
		return cond + " AND " + in
	case LevelOrganization:
		if s.OrgID == "" {
			return "FALSE"
		}
		return orgCol + " = " + a.Add(s.OrgID)
	}
	return "FALSE"
}

// PartnerFilter renders the condition for rows that belong to a partner as a whole (users,
// roles, keys of the partner level): a partner caller sees its partner's rows, an
// organization caller none, a system caller all.
func (s Scope) PartnerFilter(a *store.Args, partnerCol string) string {
	switch s.Level {
	case LevelSystem:
		return "TRUE"
	case LevelPartner:
		if s.PartnerID == "" {
			return "FALSE"
		}
		return partnerCol + " = " + a.Add(s.PartnerID)
	}
	return "FALSE"
}

// CanSeeOrg reports whether an organization of the given partner is in scope.
func (s Scope) CanSeeOrg(orgID, partnerID string) bool {
	switch s.Level {
	case LevelSystem:
		return true
	case LevelPartner:
		return s.PartnerID != "" && partnerID == s.PartnerID && (s.OrgIDs == nil || slices.Contains(s.OrgIDs, orgID))
	case LevelOrganization:
		return s.OrgID != "" && orgID == s.OrgID
	}
	return false
}

// CanSeePartner reports whether the partner itself is in scope (system, or its own partner).
func (s Scope) CanSeePartner(partnerID string) bool {
	return s.Level == LevelSystem || (s.Level == LevelPartner && s.PartnerID == partnerID)
}

// ActorKind names the kind of credential behind a request.
type ActorKind string

// The kinds of actor the audit log and permission checks distinguish.
const (
	ActorUser             ActorKind = "user"
	ActorAPIKey           ActorKind = "api_key"
	ActorServicePrincipal ActorKind = "service_principal"
	ActorSystem           ActorKind = "system"
	ActorAgent            ActorKind = "agent"
	ActorAnonymous        ActorKind = "anonymous"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	Kind ActorKind
	// ID is the user's ID, the API key's ID for a key, or the service principal's ID.
	ID string
	// UserID is the user acting, or the user who created the API key.
	UserID string
	Email  string
	Name   string
	Scope  Scope
	RoleID string
	// Permissions is what the caller may do (for a key: its own grants within its creator's).
	Permissions Permissions
	// MFA is true when the session completed an MFA challenge (the JWT claim mfa=true).
	MFA bool
	// SessionID is the refresh-token family of a JWT session; empty for keys.
	SessionID string
	// KeyID is the key a service principal (ID) authenticated with; empty for other callers.
	KeyID string
}

// Can reports whether the principal holds the permission.
func (p *Principal) Can(perm Perm) bool { return p != nil && p.Permissions.Has(string(perm)) }

type ctxKey int

const (
	principalKey ctxKey = iota
	requestKey
)

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// PrincipalFrom returns the principal of the request, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey).(*Principal)
	return p
}

// ScopeFrom returns the scope of the request's principal; the zero Scope (nothing) if none.
func ScopeFrom(ctx context.Context) Scope {
	if p := PrincipalFrom(ctx); p != nil {
		return p.Scope
	}
	return Scope{}
}

// Request is what the audit log needs to know about the HTTP request behind a change.
type Request struct {
	ID        string
	IP        string
	UserAgent string
}

// WithRequest returns ctx carrying r.
func WithRequest(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, requestKey, r)
}

// RequestFrom returns the request metadata, zero outside a request.
func RequestFrom(ctx context.Context) Request {
	r, _ := ctx.Value(requestKey).(Request)
	return r
}

// ActorName names the principal of ctx for a "created by" column: its email, else its ID;
// nil without a principal.
func ActorName(ctx context.Context) any {
	p := PrincipalFrom(ctx)
	switch {
	case p == nil:
		return nil
	case p.Email != "":
		return p.Email
	}
	return p.ID
}
