package devices

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// DeviceInventory is the last inventory an agent reported (software is listed separately).
type DeviceInventory struct {
	OS            agentproto.OSInfo             `json:"os"`
	Hardware      agentproto.Hardware           `json:"hardware"`
	Disks         []agentproto.Disk             `json:"disks"`
	Network       []agentproto.NetworkInterface `json:"network"`
	Users         []agentproto.LoggedInUser     `json:"users"`
	LastLogons    []agentproto.LoggedInUser     `json:"lastLogons" doc:"The most recent logons the device recorded, newest first."`
	Errors        []string                      `json:"errors" doc:"Collectors that failed on the device."`
	SoftwareCount int                           `json:"softwareCount"`
	CollectedAt   time.Time                     `json:"collectedAt"`
	ReceivedAt    time.Time                     `json:"receivedAt"`
}

// storedOS is the os column of device_inventory: the OS document with the logon history,
// which has no column of its own.
type storedOS struct {
	agentproto.OSInfo
	LastLogons []agentproto.LoggedInUser `json:"lastLogons,omitempty"`
}

// MetricPoint is one sample of the metrics history.
type MetricPoint struct {
	RecordedAt  time.Time `json:"recordedAt"`
	CPUPercent  float64   `json:"cpuPercent"`
	RAMPercent  float64   `json:"ramPercent"`
	DiskPercent float64   `json:"diskPercent"`
}

// Detail is a device with its inventory and recent metrics.
type Detail struct {
	Device
	Inventory     *DeviceInventory `json:"inventory"`
	RecentMetrics []MetricPoint    `json:"recentMetrics" doc:"The last hour, oldest first."`
}

// GetDetail returns a device in scope with its last inventory and the last hour of metrics.
func (s *Service) GetDetail(ctx context.Context, id string) (Detail, error) {
	d, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return Detail{}, err
	}
	out := Detail{Device: d}
	if out.Inventory, err = s.inventory(ctx, id); err != nil {
		return out, err
	}
	out.RecentMetrics, err = s.metricsSince(ctx, id, s.clock.Now().Add(-time.Hour))
	return out, err
}

const inventoryColumns = `os, hardware, disks, network, users, errors, software_count, collected_at, received_at`

func (s *Service) inventory(ctx context.Context, id string) (*DeviceInventory, error) {
	inv, err := scanInventory(s.db.QueryRowContext(ctx, `SELECT `+inventoryColumns+` FROM device_inventory WHERE device_id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &inv, nil
}

// scanInventory reads the inventoryColumns of a row, and first the columns before them
// (extra, in order) when given.
func scanInventory(row store.Scanner, extra ...any) (DeviceInventory, error) {
	var inv DeviceInventory
	var osJSON, hw, disks, network, users, errs string
	var stored storedOS
	dest := append(extra, &osJSON, &hw, &disks, &network, &users, &errs, &inv.SoftwareCount, &inv.CollectedAt, &inv.ReceivedAt)
	if err := row.Scan(dest...); err != nil {
		return inv, err
	}
	for _, p := range []struct {
		src string
		dst any
	}{{osJSON, &stored}, {hw, &inv.Hardware}, {disks, &inv.Disks}, {network, &inv.Network}, {users, &inv.Users}, {errs, &inv.Errors}} {
		if err := json.Unmarshal([]byte(p.src), p.dst); err != nil {
			return inv, err
		}
	}
	inv.OS, inv.LastLogons = stored.OSInfo, jsonenc.NonNil(stored.LastLogons)
	inv.Disks, inv.Network, inv.Users, inv.Errors = jsonenc.NonNil(inv.Disks), jsonenc.NonNil(inv.Network), jsonenc.NonNil(inv.Users), jsonenc.NonNil(inv.Errors)
	inv.CollectedAt, inv.ReceivedAt = inv.CollectedAt.UTC(), inv.ReceivedAt.UTC()
	return inv, nil
}

func (s *Service) metricsSince(ctx context.Context, id string, since time.Time) ([]MetricPoint, error) {
	out, err := store.QueryAll(ctx, s.db, `SELECT recorded_at, cpu_percent, ram_percent, disk_percent FROM device_metrics
		WHERE device_id = $1 AND recorded_at >= $2 ORDER BY recorded_at LIMIT 10000`, []any{id, since},
		func(row store.Scanner) (MetricPoint, error) {
			var p MetricPoint
			return p, row.Scan(&p.RecordedAt, &p.CPUPercent, &p.RAMPercent, &p.DiskPercent)
		})
	if err != nil {
		return nil, fmt.Errorf("read the metrics of device %s: %w", id, err)
	}
	return out, nil
}

// Metrics returns a device's metrics history since a time (the history keeps
// MetricsRetention).
func (s *Service) Metrics(ctx context.Context, id string, since time.Time) ([]MetricPoint, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, err
	}
	return s.metricsSince(ctx, id, since)
}

// InstalledSoftware is a package of a device's last inventory. Its ID stays the same from one
// inventory to the next while the package (its source, name and architecture) stays installed,
// through new versions.
type InstalledSoftware struct {
	ID string `json:"id" doc:"Stable across inventories while the package stays installed."`
	agentproto.Software
}

const softwareColumns = `id, name, version, publisher, architecture, install_date, size_bytes, source`

func scanSoftware(sc store.Scanner) (InstalledSoftware, error) {
	var r InstalledSoftware
	err := sc.Scan(&r.ID, &r.Name, &r.Version, &r.Publisher, &r.Architecture, &r.InstallDate, &r.SizeBytes, &r.Source)
	return r, err
}

// Software lists a device's installed software by name.
func (s *Service) Software(ctx context.Context, id, search string, page store.Page) ([]InstalledSoftware, string, *int, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"device_id = " + a.Add(id)}
	if search != "" {
		conds = append(conds, store.Contains(&a, search, "name"))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: softwareColumns, From: " FROM device_software", Conds: conds, Args: &a,
		SortKey: "name", SortID: "id"}, page, scanSoftware, func(r InstalledSoftware) (string, string) { return r.Name, r.ID })
}

// InstalledPackage returns one package of a device in scope by its ID (404 when the device's
// last inventory lacks it).
func (s *Service) InstalledPackage(ctx context.Context, deviceID, softwareID string) (InstalledSoftware, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), deviceID); err != nil {
		return InstalledSoftware{}, err
	}
	var a store.Args
	return store.ByID(ctx, s.db, "software", `SELECT `+softwareColumns+` FROM device_software`, "id", softwareID, &a,
		[]string{"device_id = " + a.Add(deviceID)}, scanSoftware)
}

// SoftwareCount is one name and version of installed software, and how many devices have it.
type SoftwareCount struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Publisher   string `json:"publisher"`
	DeviceCount int    `json:"deviceCount"`
}

// SoftwareSummaryFilter narrows SoftwareSummary: one organization, one exact name, a name
// containing a text.
type SoftwareSummaryFilter struct {
	OrgID, Name, Search string
}

// SoftwareSummary counts the devices in scope (not decommissioned) that have each name and
// version of software, by name then version, a page at a time: the cursor is the last row's
// name and version.
func (s *Service) SoftwareSummary(ctx context.Context, f SoftwareSummaryFilter, limit int, cursor string) ([]SoftwareCount, string, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id"), "d.decommissioned_at IS NULL"}
	if f.OrgID != "" {
		if !store.ValidID(f.OrgID) {
			return nil, "", apperr.Invalid("orgId", "not a valid ID")
		}
		conds = append(conds, "d.org_id = "+a.Add(f.OrgID))
	}
	if f.Name != "" {
		conds = append(conds, "w.name = "+a.Add(f.Name))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "w.name"))
	}
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		name, version, ok := strings.Cut(string(raw), "\x00")
		if err != nil || !ok {
			return nil, "", apperr.Invalid("cursor", "not a cursor of this list")
		}
		n := a.Add(name)
		conds = append(conds, "(w.name > "+n+" OR (w.name = "+n+" AND w.version > "+a.Add(version)+"))")
	}
	out, err := store.QueryAll(ctx, s.db, `SELECT w.name, w.version, MAX(w.publisher), COUNT(DISTINCT w.device_id)
		FROM device_software w JOIN devices d ON d.id = w.device_id WHERE `+store.Where(conds)+`
		GROUP BY w.name, w.version ORDER BY w.name, w.version LIMIT `+a.Add(limit+1), a.Values(),
		func(row store.Scanner) (SoftwareCount, error) {
			var c SoftwareCount
			return c, row.Scan(&c.Name, &c.Version, &c.Publisher, &c.DeviceCount)
		})
	if err != nil {
		return nil, "", fmt.Errorf("count installed software: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = base64.RawURLEncoding.EncodeToString([]byte(last.Name + "\x00" + last.Version))
	}
	return out, next, nil
}
