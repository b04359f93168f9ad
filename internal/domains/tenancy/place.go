package tenancy

import (
	"context"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// PlaceOptions are the ways domains legitimately differ in placing a new tenant row. The zero
// value places a row of one organization: the one named, or an organization caller's own.
type PlaceOptions struct {
	// Noun names the row in error messages ("subscription", "custom field").
	Noun string
	// PartnerID is the partnerId the request names; empty when absent or not accepted.
	PartnerID string
	// PartnerWide allows a row of the partner as a whole (no organization) when no orgId is
	// named. Without it orgId is required of every caller but an organization's.
	PartnerWide bool
	// PartnerWideRefused answers a caller that does not reach every organization of its
	// partner and asks for a partner-wide row; nil gives a generic refusal (403).
	PartnerWideRefused error
	// OnlySystemNamesPartner makes partnerId the system caller's alone (custom fields, alert
	// rules): other callers may not name it. A system caller names partnerId or orgId either way;
	// without the option other callers may name their own partner.
	OnlySystemNamesPartner bool
}

// Placement is where a new tenant row belongs.
type Placement struct {
	PartnerID string
	// OrgID is empty for a row of the partner as a whole.
	OrgID string
}

// errNoSuchOrg is the answer to an orgId that does not exist, is deleted or is out of the caller's
// reach alike, so the answer tells nothing of other tenants.
func errNoSuchOrg() *apperr.Error { return apperr.Invalid("orgId", "no such organization") }

// Place decides the partner and organization of a new tenant row from the caller's scope,
// the orgId of the request (empty when absent) and the domain's options. Every domain that
// creates tenant rows places them here, so the rules stay one.
func Place(ctx context.Context, q store.Querier, scope access.Scope, orgID string, opts PlaceOptions) (Placement, error) {
	if orgID == "" && scope.Level == access.LevelOrganization {
		orgID = scope.OrgID
	}
	if orgID == "" && !opts.PartnerWide {
		return Placement{}, apperr.Invalid("orgId", "orgId is required")
	}
	partnerID, err := opts.partner(ctx, q, scope, orgID)
	if err != nil {
		return Placement{}, err
	}
	if orgID == "" {
		if !ReachesWholePartner(scope) {
			return Placement{}, opts.partnerWideRefusal()
		}
		return Placement{PartnerID: partnerID}, nil
	}
	orgPartner, ok, err := OrgInScope(ctx, q, scope, orgID)
	if err != nil {
		return Placement{}, err
	}
	if !ok || (partnerID != "" && partnerID != orgPartner) {
		return Placement{}, errNoSuchOrg()
	}
	return Placement{PartnerID: orgPartner, OrgID: orgID}, nil
}

// partner returns the partner the request names or implies; empty when the organization
// decides (a partnerId named beside it must then be the organization's).
func (o PlaceOptions) partner(ctx context.Context, q store.Querier, scope access.Scope, orgID string) (string, error) {
	if orgID != "" && !o.OnlySystemNamesPartner {
		return o.PartnerID, nil
	}
	switch {
	case scope.IsSystem():
		if o.PartnerID == "" {
			if orgID != "" {
				return "", nil
			}
			return "", apperr.Invalid("partnerId", "system callers name the partner (or orgId) of a new "+o.Noun)
		}
		live, err := IsLivePartner(ctx, q, o.PartnerID)
		if err != nil {
			return "", err
		}
		if !live {
			return "", apperr.Invalid("partnerId", "no such partner")
		}
		return o.PartnerID, nil
	case o.PartnerID == "":
	case o.OnlySystemNamesPartner:
		return "", apperr.Invalid("partnerId", "only system callers name the partner; a new "+o.Noun+" belongs to the caller's partner")
	case o.PartnerID != scope.PartnerID:
		return "", apperr.Invalid("partnerId", "a new "+o.Noun+" belongs to the caller's partner")
	}
	return scope.PartnerID, nil
}

func (o PlaceOptions) partnerWideRefusal() error {
	if o.PartnerWideRefused != nil {
		return o.PartnerWideRefused
	}
	return apperr.Forbidden("a partner-wide " + o.Noun + " concerns every organization of the partner; " +
		"callers limited to some organizations name one (orgId)")
}

// ReachesWholePartner reports whether the scope reaches every organization of its partner
// (system callers reach all): only such callers manage the rows of a partner as a whole,
// which apply to every organization.
func ReachesWholePartner(scope access.Scope) bool {
	return scope.IsSystem() || (scope.Level == access.LevelPartner && scope.PartnerID != "" && !scope.OrgLimited())
}
