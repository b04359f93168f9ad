package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"gale/internal/access"
	"gale/internal/agentproto"
	"gale/internal/store"
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
	out.RecentMetrics, err = s.metricsSince(ctx, id, store.Now().Add(-time.Hour))
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
	inv.OS, inv.LastLogons = stored.OSInfo, nonNil(stored.LastLogons)
	inv.Disks, inv.Network, inv.Users, inv.Errors = nonNil(inv.Disks), nonNil(inv.Network), nonNil(inv.Users), nonNil(inv.Errors)
	inv.CollectedAt, inv.ReceivedAt = inv.CollectedAt.UTC(), inv.ReceivedAt.UTC()
	return inv, nil
}

func (s *Service) metricsSince(ctx context.Context, id string, since time.Time) ([]MetricPoint, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT recorded_at, cpu_percent, ram_percent, disk_percent FROM device_metrics
		WHERE device_id = $1 AND recorded_at >= $2 ORDER BY recorded_at LIMIT 10000`, id, since)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []MetricPoint{}
	for rows.Next() {
		var p MetricPoint
		if err := rows.Scan(&p.RecordedAt, &p.CPUPercent, &p.RAMPercent, &p.DiskPercent); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Metrics returns a device's metrics history since a time (the history keeps
// MetricsRetention).
func (s *Service) Metrics(ctx context.Context, id string, since time.Time) ([]MetricPoint, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, err
	}
	return s.metricsSince(ctx, id, since)
}

// Software lists a device's installed software by name.
func (s *Service) Software(ctx context.Context, id, search string, page store.Page) ([]agentproto.Software, string, *int, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"device_id = " + a.Add(id)}
	if search != "" {
		conds = append(conds, "LOWER(name) LIKE LOWER("+a.Add("%"+search+"%")+")")
	}
	type row struct {
		sw agentproto.Software
		id string
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: `name, version, publisher, architecture, install_date,
		size_bytes, source, id`, From: " FROM device_software", Conds: conds, Args: &a, SortKey: "name", SortID: "id"}, page, func(sc store.Scanner) (row, error) {
		var r row
		err := sc.Scan(&r.sw.Name, &r.sw.Version, &r.sw.Publisher, &r.sw.Architecture, &r.sw.InstallDate, &r.sw.SizeBytes, &r.sw.Source, &r.id)
		return r, err
	}, func(r row) (string, string) { return r.sw.Name, r.id })
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]agentproto.Software, len(rows))
	for i, r := range rows {
		out[i] = r.sw
	}
	return out, next, total, nil
}
