package devices

import (
	"context"
	"fmt"
	"slices"

	"gale/internal/platform/apperr"
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
			return out, apperr.Invalid("targets.type", "type is one of devices, groups, sites, organization")
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
