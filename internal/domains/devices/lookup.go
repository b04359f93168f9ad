package devices

import (
	"context"
	"fmt"
	"strings"

	"gale/internal/platform/store"
)

// lookupChunk bounds the addresses of one query of FindByAddress.
const lookupChunk = 500

// AddressMatches are the devices found by FindByAddress: a device ID by MAC address
// (lower-case, colon-separated) and by IP address.
type AddressMatches struct {
	ByMAC map[string]string
	ByIP  map[string]string
}

// FindByAddress returns the organization's devices that are not decommissioned whose primary
// MAC address (compared without case) is among macs, or whose primary IP address is among
// ips. When several devices carry one address, the one heard from most recently wins.
func FindByAddress(ctx context.Context, q store.Querier, orgID string, macs, ips []string) (AddressMatches, error) {
	out := AddressMatches{ByMAC: map[string]string{}, ByIP: map[string]string{}}
	lower := make([]string, 0, len(macs))
	for _, m := range macs {
		if m != "" {
			lower = append(lower, strings.ToLower(m))
		}
	}
	if err := findBy(ctx, q, orgID, "LOWER(d.mac_address)", lower, out.ByMAC); err != nil {
		return out, err
	}
	nonEmpty := make([]string, 0, len(ips))
	for _, ip := range ips {
		if ip != "" {
			nonEmpty = append(nonEmpty, ip)
		}
	}
	return out, findBy(ctx, q, orgID, "d.ip_address", nonEmpty, out.ByIP)
}

func findBy(ctx context.Context, q store.Querier, orgID, column string, values []string, into map[string]string) error {
	for first := 0; first < len(values); first += lookupChunk {
		var a store.Args
		// The most recently seen device of an address comes last and wins.
		err := putPairs(ctx, q, into, `SELECT `+column+`, d.id FROM devices d WHERE d.org_id = `+a.Add(orgID)+
			` AND d.decommissioned_at IS NULL AND `+column+` IN `+a.In(values[first:min(first+lookupChunk, len(values))])+
			` ORDER BY COALESCE(d.last_seen_at, d.created_at), d.id`, a.Values())
		if err != nil {
			return fmt.Errorf("find devices by %s: %w", column, err)
		}
	}
	return nil
}

// FindByAddress is FindByAddress on the service's database.
func (s *Service) FindByAddress(ctx context.Context, orgID string, macs, ips []string) (AddressMatches, error) {
	return FindByAddress(ctx, s.db, orgID, macs, ips)
}
