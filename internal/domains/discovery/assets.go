package discovery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// ingestChunk is how many assets one statement reads or writes.
const ingestChunk = 200

var assetColumns = `x.id, x.partner_id, x.org_id, x.site_id, x.ip, x.mac, x.hostname, x.asset_type, x.open_ports, x.sys_name,
	x.sys_descr, x.sys_object_id, x.neighbors, x.status, x.link_source, x.linked_device_id, x.ignore_reason, x.monitoring_enabled, x.last_job_id,
	` + store.TimeColumns("x.first_seen_at", "x.last_seen_at", "x.updated_at") + `, x.ip_key`

func scanAsset(row store.Scanner) (DiscoveryAsset, error) {
	var x DiscoveryAsset
	var ports, neighbors, key string
	var source, linked, reason, job sql.NullString
	var first, last, updated store.NullTime
	if err := row.Scan(&x.ID, &x.PartnerID, &x.OrgID, &x.SiteID, &x.IP, &x.MAC, &x.Hostname, &x.Type, &ports, &x.SysName,
		&x.SysDescr, &x.SysObjectID, &neighbors, &x.Status, &source, &linked, &reason, &x.Monitoring, &job, &first, &last, &updated, &key); err != nil {
		return x, err
	}
	x.LinkSource, x.LinkedID, x.IgnoreNote, x.LastJobID = store.StringPtr(source), store.StringPtr(linked), store.StringPtr(reason),
		store.StringPtr(job)
	x.FirstSeenAt, x.LastSeenAt, x.UpdatedAt = first.Time, last.Time, updated.Time
	var err error
	if x.OpenPorts, err = parsePorts(ports); err != nil {
		return x, fmt.Errorf("read the ports of asset %s: %w", x.ID, err)
	}
	x.Neighbors = []DiscoveryNeighbor{}
	if neighbors != "[]" {
		if err := json.Unmarshal([]byte(neighbors), &x.Neighbors); err != nil {
			return x, fmt.Errorf("read the neighbours of asset %s: %w", x.ID, err)
		}
	}
	return x, nil
}

// parsePorts reads a JSON list of port numbers ("[22,80]" or, from JSONB, "[22, 80]") without
// the reflection of encoding/json: a list page reads one per row.
func parsePorts(raw string) ([]int, error) {
	body, ok := strings.CutPrefix(strings.TrimSpace(raw), "[")
	if body, ok = strings.CutSuffix(body, "]"); !ok {
		return nil, fmt.Errorf("not a list: %q", raw)
	}
	out := []int{}
	if strings.TrimSpace(body) == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(body, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("not a port: %q", part)
		}
		out = append(out, n)
	}
	return out, nil
}

// ipKey orders IPv4 addresses numerically as text: 8 hex digits.
func ipKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return "ffffffff"
	}
	b := a.As4()
	return fmt.Sprintf("%02x%02x%02x%02x", b[0], b[1], b[2], b[3])
}

// ingest writes the hosts of a completed job as assets of its organization, in batched
// statements, and returns how many assets are new. A host's asset is created, or refreshed
// (what it shows now, last seen); a new asset is linked to the managed device with its MAC
// address or, failing that, its IP address; a manual link and an ignore are kept.
func (s *Service) ingest(ctx context.Context, tx *sql.Tx, j DiscoveryJob, res agentproto.NetworkScanResult, now time.Time) (int, error) {
	if err := s.saveRoutes(ctx, tx, j, res.Routes, now); err != nil {
		return 0, err
	}
	gateways := map[string]bool{}
	for _, r := range res.Routes {
		if r.Gateway != "" {
			gateways[r.Gateway] = true
		}
	}
	hosts := make([]agentproto.ScannedHost, 0, len(res.Hosts))
	seen := make(map[netip.Addr]bool, len(res.Hosts))
	for _, h := range res.Hosts {
		if a, err := netip.ParseAddr(h.IP); err == nil && a.Is4() && !seen[a] {
			seen[a] = true
			h.IP, h.MAC = a.String(), strings.ToLower(h.MAC)
			hosts = append(hosts, h)
		}
	}
	created := 0
	for first := 0; first < len(hosts); first += ingestChunk {
		n, err := s.ingestChunk(ctx, tx, j, hosts[first:min(first+ingestChunk, len(hosts))], gateways, now)
		if err != nil {
			return 0, err
		}
		created += n
	}
	return created, nil
}

func (s *Service) ingestChunk(ctx context.Context, tx *sql.Tx, j DiscoveryJob, hosts []agentproto.ScannedHost, gateways map[string]bool,
	now time.Time) (int, error) {
	ips, macs := make([]string, len(hosts)), make([]string, 0, len(hosts))
	for i, h := range hosts {
		ips[i] = h.IP
		if h.MAC != "" {
			macs = append(macs, h.MAC)
		}
	}
	var a store.Args
	found, err := store.QueryAll(ctx, tx, `SELECT `+assetColumns+` FROM discovery_assets x WHERE x.org_id = `+a.Add(j.OrgID)+
		` AND x.ip IN `+a.In(ips), a.Values(), scanAsset)
	if err != nil {
		return 0, fmt.Errorf("read the assets of job %s: %w", j.ID, err)
	}
	known := make(map[string]DiscoveryAsset, len(found))
	for _, x := range found {
		known[x.IP] = x
	}
	managed, err := devices.FindByAddress(ctx, tx, j.OrgID, macs, ips)
	if err != nil {
		return 0, fmt.Errorf("find the managed devices of job %s: %w", j.ID, err)
	}
	var b store.Args
	values := make([]string, 0, len(hosts))
	at := b.Add(now)
	created := 0
	for _, h := range hosts {
		x, ok := known[h.IP]
		if !ok {
			created++
			x = DiscoveryAsset{ID: store.NewID(), Status: AssetNew}
		}
		merge(&x, h)
		x.Type = inferType(x.OpenPorts, x.SysDescr, x.SysObjectID, x.Hostname, gateways[h.IP])
		status, source, linked := AssetNew, any(nil), any(nil)
		if id, ok := managed.ByMAC[x.MAC]; ok && x.MAC != "" {
			status, source, linked = AssetLinked, linkAuto, id
		} else if id, ok := managed.ByIP[x.IP]; ok {
			status, source, linked = AssetLinked, linkAuto, id
		}
		values = append(values, "("+strings.Join([]string{b.Add(x.ID), b.Add(j.PartnerID), b.Add(j.OrgID), b.Add(j.SiteID), b.Add(x.IP),
			b.Add(ipKey(x.IP)), b.Add(x.MAC), b.Add(x.Hostname), b.Add(x.Type), b.Add(store.EncodeJSON(x.OpenPorts)), b.Add(x.SysName),
			b.Add(x.SysDescr), b.Add(x.SysObjectID), b.Add(store.EncodeJSON(x.Neighbors)), b.Add(status), b.Add(source), b.Add(linked), b.Add(j.ID), at, at, at}, ", ")+")")
	}
	// A row that exists keeps its first sighting, its manual link or ignore and its
	// monitoring; a new asset's automatic link applies to it, and an automatic link follows
	// the device now matching.
	_, err = tx.ExecContext(ctx, `INSERT INTO discovery_assets (id, partner_id, org_id, site_id, ip, ip_key, mac, hostname, asset_type,
		open_ports, sys_name, sys_descr, sys_object_id, neighbors, status, link_source, linked_device_id, last_job_id, first_seen_at, last_seen_at,
		updated_at) VALUES `+strings.Join(values, ", ")+`
		ON CONFLICT (org_id, ip) DO UPDATE SET site_id = excluded.site_id, mac = excluded.mac, hostname = excluded.hostname,
		asset_type = excluded.asset_type, open_ports = excluded.open_ports, sys_name = excluded.sys_name, sys_descr = excluded.sys_descr,
		sys_object_id = excluded.sys_object_id, neighbors = excluded.neighbors, last_job_id = excluded.last_job_id, last_seen_at = excluded.last_seen_at,
		updated_at = excluded.updated_at,
		status = CASE WHEN discovery_assets.status = 'new' OR discovery_assets.link_source = 'auto' THEN excluded.status
			ELSE discovery_assets.status END,
		link_source = CASE WHEN discovery_assets.status = 'new' OR discovery_assets.link_source = 'auto' THEN excluded.link_source
			ELSE discovery_assets.link_source END,
		linked_device_id = CASE WHEN discovery_assets.status = 'new' OR discovery_assets.link_source = 'auto'
			THEN excluded.linked_device_id ELSE discovery_assets.linked_device_id END`, b.Values()...)
	if err != nil {
		return 0, fmt.Errorf("write the assets of job %s: %w", j.ID, err)
	}
	return created, nil
}

// merge takes what a scan saw of a host into its asset: a value seen now replaces the
// stored one; what the scan did not learn (no reverse name, no SNMP answer) stays.
func merge(x *DiscoveryAsset, h agentproto.ScannedHost) {
	x.IP = h.IP
	keep := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	keep(&x.MAC, h.MAC)
	keep(&x.Hostname, h.Hostname)
	keep(&x.SysName, h.SysName)
	keep(&x.SysDescr, h.SysDescr)
	keep(&x.SysObjectID, h.SysObjectID)
	x.OpenPorts = h.OpenPorts
	if x.OpenPorts == nil {
		x.OpenPorts = []int{}
	}
	// A host that answered SNMP told its neighbours (none is an answer too); one that was not
	// asked keeps those it told before.
	if h.SysName != "" || h.SysDescr != "" || h.SysObjectID != "" {
		x.Neighbors = make([]DiscoveryNeighbor, len(h.Neighbors))
		for i, n := range h.Neighbors {
			x.Neighbors[i] = DiscoveryNeighbor(n)
		}
	}
	if x.Neighbors == nil {
		x.Neighbors = []DiscoveryNeighbor{}
	}
}

// saveRoutes records the networks and gateways the scanning agent reported, for the topology.
func (s *Service) saveRoutes(ctx context.Context, tx *sql.Tx, j DiscoveryJob, routes []agentproto.ScanRoute, now time.Time) error {
	for _, r := range routes {
		p, err := netip.ParsePrefix(r.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if r.Gateway != "" {
			if g, err := netip.ParseAddr(r.Gateway); err != nil || !g.Is4() {
				continue
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO discovery_routes (partner_id, org_id, site_id, subnet, gateway, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (site_id, subnet, gateway) DO UPDATE SET updated_at = excluded.updated_at`,
			j.PartnerID, j.OrgID, j.SiteID, p.Masked().String(), r.Gateway, now); err != nil {
			return fmt.Errorf("record a route of job %s: %w", j.ID, err)
		}
	}
	return nil
}

func assetFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "x.org_id", "x.partner_id"), tenancy.LiveOrg("x.org_id")}
}

func (s *Service) getAsset(ctx context.Context, q store.Querier, scope access.Scope, id string) (DiscoveryAsset, error) {
	var a store.Args
	return store.ByID(ctx, q, "discovery asset", `SELECT `+assetColumns+` FROM discovery_assets x`, "x.id", id, &a, assetFilter(scope, &a), scanAsset)
}

// AssetFilter narrows a list of assets.
type AssetFilter struct {
	OrgID  string
	SiteID string
	Type   string
	Status string
	// Search matches part of the IP address, hostname or MAC address.
	Search string
}

// ListAssets lists the assets in scope by IP address.
func (s *Service) ListAssets(ctx context.Context, f AssetFilter, page store.Page) ([]DiscoveryAsset, string, *int, error) {
	var a store.Args
	conds := assetFilter(access.ScopeFrom(ctx), &a)
	conds = equal(conds, &a, "x.org_id", f.OrgID, "x.site_id", f.SiteID, "x.asset_type", f.Type, "x.status", f.Status)
	if q := strings.TrimSpace(f.Search); q != "" {
		conds = append(conds, store.Contains(&a, q, "x.ip", "x.hostname", "x.mac"))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: assetColumns, From: " FROM discovery_assets x", Conds: conds, Args: &a,
		SortKey: "x.ip_key", SortID: "x.id"}, page, scanAsset, func(x DiscoveryAsset) (string, string) { return ipKey(x.IP), x.ID })
}

// GetAsset returns an asset in scope.
func (s *Service) GetAsset(ctx context.Context, id string) (DiscoveryAsset, error) {
	return s.getAsset(ctx, s.db, access.ScopeFrom(ctx), id)
}

// changeAsset runs fn on an asset in scope in one transaction, records the audit entry and
// returns the asset as it is then.
func (s *Service) changeAsset(ctx context.Context, id, action string, fn func(tx *sql.Tx, x DiscoveryAsset) error) (DiscoveryAsset, error) {
	var out DiscoveryAsset
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := s.getAsset(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if err := fn(tx, x); err != nil {
			return err
		}
		if out, err = s.getAsset(ctx, tx, access.SystemScope(), x.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "discovery_asset", ResourceID: x.ID, ResourceName: x.IP,
			PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"status": out.Status, "linkedDeviceId": out.LinkedID}})
	})
	return out, err
}

// LinkAsset links an asset to a managed device of its organization by hand; later scans keep
// the link.
func (s *Service) LinkAsset(ctx context.Context, id string, in DiscoveryLinkRequest) (DiscoveryAsset, error) {
	return s.changeAsset(ctx, id, "discovery_asset.link", func(tx *sql.Tx, x DiscoveryAsset) error {
		owners, err := devices.Owners(ctx, tx, validIDs(in.DeviceID))
		if err != nil {
			return fmt.Errorf("read the owner of device %s: %w", in.DeviceID, err)
		}
		if o, ok := owners[in.DeviceID]; !ok || o.OrgID != x.OrgID {
			return apperr.Invalid("deviceId", "no such device in the asset's organization")
		}
		if _, err = tx.ExecContext(ctx, `UPDATE discovery_assets SET status = $1, link_source = $2, linked_device_id = $3, ignore_reason = NULL,
			updated_at = $4 WHERE id = $5`, AssetLinked, linkManual, in.DeviceID, s.now(), x.ID); err != nil {
			return fmt.Errorf("link discovery asset %s: %w", x.ID, err)
		}
		return nil
	})
}

// IgnoreAsset marks an asset ignored, with a reason; later scans keep it ignored.
func (s *Service) IgnoreAsset(ctx context.Context, id string, in DiscoveryIgnoreRequest) (DiscoveryAsset, error) {
	if strings.TrimSpace(in.Reason) == "" {
		return DiscoveryAsset{}, apperr.Invalid("reason", "say why the asset is ignored")
	}
	return s.changeAsset(ctx, id, "discovery_asset.ignore", func(tx *sql.Tx, x DiscoveryAsset) error {
		if _, err := tx.ExecContext(ctx, `UPDATE discovery_assets SET status = $1, link_source = NULL, linked_device_id = NULL,
			ignore_reason = $2, updated_at = $3 WHERE id = $4`, AssetIgnored, in.Reason, s.now(), x.ID); err != nil {
			return fmt.Errorf("ignore discovery asset %s: %w", x.ID, err)
		}
		return nil
	})
}

// DeleteAsset deletes an asset; one whose monitoring is on is refused (409): turn it off first.
// A later scan that sees the address again creates it anew.
func (s *Service) DeleteAsset(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := s.getAsset(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM discovery_assets WHERE id = $1 AND NOT monitoring_enabled`, x.ID)
		if err != nil {
			return fmt.Errorf("delete discovery asset %s: %w", x.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, apperr.ConflictCode(CodeMonitoringEnabled, "the asset's monitoring is on: disable it first"))
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "discovery_asset.delete", ResourceType: "discovery_asset", ResourceID: x.ID,
			ResourceName: x.IP, PartnerID: x.PartnerID, OrgID: x.OrgID})
	})
}

// validIDs keeps the well-formed IDs (a malformed one matches nothing).
func validIDs(ids ...string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if store.ValidID(id) {
			out = append(out, id)
		}
	}
	return out
}

// equal adds "column = value" to conds for each pair of columnsValues whose value is set, in
// order (so the statement's text, and its cached plan, stay the same).
func equal(conds []string, a *store.Args, columnsValues ...string) []string {
	for i := 0; i+1 < len(columnsValues); i += 2 {
		if v := columnsValues[i+1]; v != "" {
			conds = append(conds, columnsValues[i]+" = "+a.Add(v))
		}
	}
	return conds
}
