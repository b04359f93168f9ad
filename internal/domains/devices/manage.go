package devices

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Update holds a device's writable fields; nil fields are left as they are.
type Update struct {
	DisplayName *string   `json:"displayName,omitempty" maxLength:"200" doc:"Empty string clears it."`
	Tags        *[]string `json:"tags,omitempty" maxItems:"50" doc:"Replaces the device's tags; each 1 to 64 characters of letters, digits, space, and ._:/-"`
	SiteID      *string   `json:"siteId,omitempty" format:"uuid" doc:"Another site of the same organization."`
}

var tagPattern = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N} ._:/-]{0,63}$`)

func normalizeTags(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, t := range in {
		t = strings.TrimSpace(t)
		if !tagPattern.MatchString(t) {
			return nil, apperr.Invalid("tags", "tag "+quote(t)+" must be 1 to 64 letters, digits, spaces or ._:/- and start with a letter or digit")
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

func quote(s string) string { return `"` + s + `"` }

// UpdateDevice changes a device's display name, tags or site.
func (s *Service) UpdateDevice(ctx context.Context, id string, in Update) (Device, error) {
	scope := access.ScopeFrom(ctx)
	var tags []string
	if in.Tags != nil {
		var err error
		if tags, err = normalizeTags(*in.Tags); err != nil {
			return Device{}, err
		}
	}
	var d Device
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getActive(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.clock.Now())
		if in.DisplayName != nil {
			ch.Set("display_name", store.NullIfEmpty(strings.TrimSpace(*in.DisplayName)))
		}
		if in.SiteID != nil && *in.SiteID != before.SiteID {
			if err := siteOf(ctx, tx, *in.SiteID, before.OrgID); err != nil {
				return err
			}
			ch.Set("site_id", *in.SiteID)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE devices SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return err
		}
		if in.Tags != nil {
			if err := replaceTags(ctx, tx, id, before.PartnerID, tags); err != nil {
				return err
			}
		}
		if err := s.changed(ctx, tx, id); err != nil {
			return err
		}
		if d, err = s.get(ctx, tx, scope, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device.update", ResourceType: "device", ResourceID: id,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: audit.Diff(before, d)})
	})
	if err != nil {
		return d, fmt.Errorf("update device %s: %w", id, err)
	}
	return d, nil
}

func siteOf(ctx context.Context, q store.Querier, siteID, orgID string) error {
	if !store.ValidID(siteID) {
		return apperr.Invalid("siteId", "not a valid site ID")
	}
	n, err := tenancy.CountSitesOf(ctx, q, orgID, []string{siteID})
	if err != nil {
		return err
	}
	if n == 0 {
		return apperr.Invalid("siteId", "no such site in the device's organization")
	}
	return nil
}

func replaceTags(ctx context.Context, tx *sql.Tx, deviceID, partnerID string, tags []string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM device_tags WHERE device_id = $1`, deviceID); err != nil {
		return fmt.Errorf("clear the tags of device %s: %w", deviceID, err)
	}
	for _, t := range tags {
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_tags (device_id, partner_id, tag) VALUES ($1, $2, $3)`, deviceID, partnerID, t); err != nil {
			return fmt.Errorf("tag device %s: %w", deviceID, err)
		}
	}
	return nil
}

// MoveOrg relocates a device to another organization of the same partner, into the given
// site or that organization's first site.
func (s *Service) MoveOrg(ctx context.Context, id, orgID, siteID string) (Device, error) {
	scope := access.ScopeFrom(ctx)
	var d Device
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getActive(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if orgID == before.OrgID {
			return apperr.Invalid("orgId", "the device is already in that organization")
		}
		partnerID, ok, err := tenancy.OrgInScope(ctx, tx, scope, orgID)
		if err != nil {
			return err
		}
		if !ok || partnerID != before.PartnerID {
			return apperr.Invalid("orgId", "no such organization of the device's partner")
		}
		if siteID == "" {
			var found bool
			if siteID, found, err = tenancy.FirstSite(ctx, tx, orgID); err != nil {
				return err
			}
			if !found {
				return apperr.Invalid("siteId", "the organization has no site yet; create one or pass siteId")
			}
		} else if err := siteOf(ctx, tx, siteID, orgID); err != nil {
			return err
		}
		if err := s.leftOrg(ctx, tx, id, "device moved"); err != nil {
			return err
		}
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `UPDATE devices SET org_id = $1, site_id = $2, updated_at = $3 WHERE id = $4`, orgID, siteID, now, id); err != nil {
			return fmt.Errorf("move device %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE device_commands SET org_id = $1 WHERE device_id = $2`, orgID, id); err != nil {
			return fmt.Errorf("move the commands of device %s: %w", id, err)
		}
		if err := s.moved(ctx, tx, id, orgID); err != nil {
			return err
		}
		if err := s.changed(ctx, tx, id); err != nil {
			return err
		}
		if d, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		details := map[string]any{"fromOrgId": before.OrgID, "toOrgId": orgID, "fromSiteId": before.SiteID, "toSiteId": siteID}
		if err := audit.Record(ctx, tx, audit.Entry{Action: "device.move_org", ResourceType: "device", ResourceID: id,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: before.OrgID, Details: details}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device.move_org", ResourceType: "device", ResourceID: id,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: orgID, Details: details})
	})
	if err != nil {
		return d, fmt.Errorf("move device %s: %w", id, err)
	}
	return d, nil
}

// Decommission retires a device: its agent tokens stop working at once, waiting commands are
// cancelled, the agent is told to stop, and the device leaves lists and groups. The tokens'
// hashes stay, so that an agent that was offline meanwhile still learns, authenticated, that
// its device was decommissioned (AuthenticateAgent) instead of being merely refused.
func (s *Service) Decommission(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		d, err := s.getActive(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE devices SET status = $1, decommissioned_at = $2, updated_at = $2 WHERE id = $3 AND decommissioned_at IS NULL`, StatusDecommissioned, now, id)
		if err != nil {
			return fmt.Errorf("decommission device %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.NotFound("device")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE device_commands SET status = $1, error = $2, completed_at = $3
			WHERE device_id = $4 AND status IN ($5, $6)`, CommandCancelled, "device decommissioned", now, id, CommandQueued, CommandSent); err != nil {
			return fmt.Errorf("cancel the waiting commands of device %s: %w", id, err)
		}
		if err := s.keys.RevokeForDevice(ctx, tx, id, now); err != nil {
			return err
		}
		if err := s.leftOrg(ctx, tx, id, "device decommissioned"); err != nil {
			return err
		}
		if err := s.recordEvent(ctx, tx, EventDecommissioned, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device.decommission", ResourceType: "device", ResourceID: id,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID})
	})
	if err != nil {
		return fmt.Errorf("decommission device %s: %w", id, err)
	}
	s.notifier.Stop(ctx, id)
	return nil
}
