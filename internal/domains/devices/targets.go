package devices

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Kinds of targets that work is aimed at (deployments, policies, automations): named
// devices, or every device of groups, sites or organizations.
const (
	TargetDevices      = "devices"
	TargetGroups       = "groups"
	TargetSites        = "sites"
	TargetOrganization = "organization"
)

// TargetKinds lists the kinds of targets.
var TargetKinds = []string{TargetDevices, TargetGroups, TargetSites, TargetOrganization}

// MaxTargetIDs bounds the IDs that targets name.
const MaxTargetIDs = 500

// Targets are the devices work is aimed at (a configuration or patch policy, a deployment,
// an automation): named devices, or every device of some groups, sites or organizations.
type Targets struct {
	Type string   `json:"type" enum:"devices,groups,sites,organization"`
	IDs  []string `json:"ids" required:"false" maxItems:"500" doc:"devices, groups, sites: 1 to 500 of them. organization: none for the organization the work belongs to (every organization of the partner for partner-wide work, which may name some of them instead)."`
}

// MarshalJSON writes ids as an array, empty rather than null, whatever the row the targets
// were read from held.
func (t Targets) MarshalJSON() ([]byte, error) {
	type plain Targets
	if t.IDs == nil {
		t.IDs = []string{}
	}
	return json.Marshal(plain(t))
}

// OwnerLookup returns the owner of each row among ids that it finds, as tenancy.Owners does.
type OwnerLookup func(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error)

// targetNouns names one row of each kind of targets, in messages.
var targetNouns = map[string]string{TargetDevices: "device", TargetGroups: "group", TargetSites: "site", TargetOrganization: "organization"}

func unknownTargetType() apperr.Detail {
	return apperr.Detail{Field: "targets.type", Message: "type is one of " + strings.Join(TargetKinds, ", ")}
}

// CheckShape checks what targets say, reading nothing: a known type; 1 to MaxTargetIDs valid
// IDs (organization: none to MaxTargetIDs), none listed twice; and that the work of an
// organization (orgID; empty for partner-wide work) names no organization but its own, which
// is kept as none. It returns the problems found, and leaves the IDs an empty list rather than
// nil. CheckTargets checks this and then what the IDs name; CheckShape alone serves checks
// that run before the owner is known, and domains whose targets may name rows that are not
// (or no longer) there, which then resolve to no device.
func (t *Targets) CheckShape(orgID string) []apperr.Detail {
	var out []apperr.Detail
	fail := func(field, msg string) { out = append(out, apperr.Detail{Field: field, Message: msg}) }
	if t.IDs == nil {
		t.IDs = []string{}
	}
	switch t.Type {
	case TargetOrganization:
		if orgID != "" {
			if len(t.IDs) > 1 || len(t.IDs) == 1 && t.IDs[0] != orgID {
				fail("targets.ids", "an organization's work targets that organization only: leave ids empty")
			} else {
				t.IDs = []string{}
			}
			return out
		}
		if len(t.IDs) > MaxTargetIDs {
			fail("targets.ids", fmt.Sprintf("name at most %d organizations", MaxTargetIDs))
		}
	case TargetDevices, TargetGroups, TargetSites:
		if len(t.IDs) == 0 || len(t.IDs) > MaxTargetIDs {
			fail("targets.ids", fmt.Sprintf("name 1 to %d %s", MaxTargetIDs, t.Type))
		}
	default:
		return append(out, unknownTargetType())
	}
	seen := make(map[string]bool, len(t.IDs))
	for i, id := range t.IDs {
		field := fmt.Sprintf("targets.ids[%d]", i)
		switch {
		case !store.ValidID(id):
			fail(field, "not a valid ID")
		case seen[id]:
			fail(field, "listed twice")
		}
		seen[id] = true
	}
	return out
}

// CheckTargets checks the targets of owner's work (a partner, and its organization unless
// owner.OrgID is empty): CheckShape, then that each organization, site, group or device they
// name is the owner's and within the scope of ctx's caller. A row of another tenant, and a
// decommissioned device, are reported exactly as a missing one: what is accepted is what
// ResolveTargets finds. q is the caller's transaction or the database. The problems come back
// as one validation error, field by field.
func (s *Service) CheckTargets(ctx context.Context, q store.Querier, t *Targets, owner tenancy.Owner) error {
	if details := t.CheckShape(owner.OrgID); len(details) > 0 {
		return apperr.InvalidFields(details)
	}
	if len(t.IDs) == 0 {
		return nil
	}
	lookup := map[string]OwnerLookup{TargetDevices: liveOwners, TargetGroups: s.groupOwners, TargetSites: tenancy.SiteOwners,
		TargetOrganization: tenancy.OrgOwners}[t.Type]
	owners, err := lookup(ctx, q, t.IDs)
	if err != nil {
		return fmt.Errorf("read the owners of the targets' %s: %w", t.Type, err)
	}
	scope := access.ScopeFrom(ctx)
	var details []apperr.Detail
	for i, id := range t.IDs {
		o, ok := owners[id]
		if !ok || o.PartnerID != owner.PartnerID || owner.OrgID != "" && o.OrgID != owner.OrgID || !scope.CanSeeOrg(o.OrgID, o.PartnerID) {
			details = append(details, apperr.Detail{Field: fmt.Sprintf("targets.ids[%d]", i), Message: "no such " + targetNouns[t.Type] + " within reach"})
		}
	}
	if len(details) > 0 {
		return apperr.InvalidFields(details)
	}
	return nil
}

// groupOwners returns the owner of each group among ids; without a groups module there are
// none.
func (s *Service) groupOwners(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	if s.groups.Owners == nil {
		return map[string]tenancy.Owner{}, nil
	}
	return s.groups.Owners(ctx, q, ids)
}

// liveOwners returns the owner of each device among ids that is not decommissioned.
func liveOwners(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	return tenancy.Owners(ctx, q, `SELECT id, partner_id, org_id FROM devices WHERE status <> '`+StatusDecommissioned+`' AND id`, ids)
}

// Resolved is what targets hold now: the live devices in the caller's scope, and the named
// devices that are not among them (unknown, out of scope or decommissioned). Exceeds says the
// targets hold more devices than the bound asked for (Devices then holds more than it).
type Resolved struct {
	Devices []Device
	Missing []string
	Exceeds bool
}

// TooManyTargets is the answer to targets that hold more than max devices.
func TooManyTargets(max int) error {
	return apperr.Invalid("targets", fmt.Sprintf("the targets hold more than %d devices; narrow them", max))
}

// IDs returns the IDs of the resolved devices.
func (r Resolved) IDs() []string {
	out := make([]string, len(r.Devices))
	for i, d := range r.Devices {
		out[i] = d.ID
	}
	return out
}

// ResolveTargets lists the live devices that targets of kind with ids hold now, in ctx's scope
// (the caller, or the actor a domain runs work as), each once, reading no more than needed to
// tell whether they exceed max.
func (s *Service) ResolveTargets(ctx context.Context, kind string, ids []string, max int) (Resolved, error) {
	var out Resolved
	if kind == TargetDevices {
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			d, err := s.Get(ctx, id)
			if err == nil && d.Status == StatusDecommissioned {
				err = apperr.NotFound("device")
			}
			if apperr.IsCode(err, apperr.CodeNotFound) {
				out.Missing = append(out.Missing, id)
				continue
			}
			if err != nil {
				return out, err
			}
			out.Devices = append(out.Devices, d)
		}
	} else {
		var f ListFilter
		switch kind {
		case TargetGroups:
			f.GroupIDs = ids
		case TargetSites:
			f.SiteIDs = ids
		case TargetOrganization:
			f.OrgIDs = ids
		default:
			return out, apperr.InvalidFields([]apperr.Detail{unknownTargetType()})
		}
		list, err := s.ListAll(ctx, f, max)
		if err != nil {
			return out, err
		}
		out.Devices = slices.DeleteFunc(list, func(d Device) bool { return d.Status == StatusDecommissioned })
	}
	out.Exceeds = len(out.Devices) > max
	return out, nil
}
