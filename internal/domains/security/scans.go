package security

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Scan statuses.
const (
	ScanQueued    = "queued"
	ScanRunning   = "running"
	ScanCompleted = "completed"
	ScanFailed    = "failed"
)

// scanTimeout is how long an agent may take over a scan.
const scanTimeout = 3600

// SecurityScanInput asks for a threat scan.
type SecurityScanInput struct {
	ScanType string   `json:"scanType" enum:"quick,full,custom" doc:"quick: home and temporary directories; full: the whole file system but /proc, /sys, /dev, /run; custom: paths."`
	Paths    []string `json:"paths,omitempty" maxItems:"100" doc:"custom only: 1 to 100 absolute paths."`
}

func (in SecurityScanInput) validate() error {
	switch in.ScanType {
	case agentproto.ScanQuick, agentproto.ScanFull:
		if len(in.Paths) > 0 {
			return apperr.Invalid("paths", "paths are for custom scans only")
		}
	case agentproto.ScanCustom:
		if len(in.Paths) == 0 || len(in.Paths) > 100 {
			return apperr.Invalid("paths", "a custom scan names 1 to 100 paths")
		}
		for _, p := range in.Paths {
			if !filepath.IsAbs(p) || len(p) > 4096 {
				return apperr.Invalid("paths", fmt.Sprintf("%q is not an absolute path", p))
			}
		}
	default:
		return apperr.Invalid("scanType", "quick, full or custom")
	}
	return nil
}

// SecurityScanRun is a scan asked for, with its outcome once the agent answered.
type SecurityScanRun struct {
	ID           string     `json:"id" format:"uuid"`
	OrgID        string     `json:"orgId" format:"uuid"`
	DeviceID     string     `json:"deviceId" format:"uuid"`
	CommandID    string     `json:"commandId" format:"uuid"`
	ScanType     string     `json:"scanType" enum:"quick,full,custom"`
	Paths        []string   `json:"paths"`
	Status       string     `json:"status" enum:"queued,running,completed,failed"`
	Engine       string     `json:"engine" doc:"clamav or builtin (EICAR signature), once known."`
	FilesScanned int        `json:"filesScanned" doc:"Grows while the scan runs, as the agent reports; the result's count once it ended (built-in engine)."`
	ThreatsFound int        `json:"threatsFound"`
	Truncated    bool       `json:"truncated"`
	Error        *string    `json:"error"`
	CreatedBy    *string    `json:"createdBy"`
	CreatedAt    time.Time  `json:"createdAt"`
	CompletedAt  *time.Time `json:"completedAt"`
}

const scanColumns = `x.id, x.org_id, x.device_id, x.command_id, x.scan_type, x.paths, x.status, x.engine, x.files_scanned,
	x.threats_found, x.truncated, x.error, x.created_by, x.created_at, x.completed_at, c.status`

func scanScan(sc store.Scanner) (SecurityScanRun, error) {
	var x SecurityScanRun
	var paths, cmdStatus string
	var errMsg, by sql.NullString
	var done sql.NullTime
	if err := sc.Scan(&x.ID, &x.OrgID, &x.DeviceID, &x.CommandID, &x.ScanType, &paths, &x.Status, &x.Engine, &x.FilesScanned,
		&x.ThreatsFound, &x.Truncated, &errMsg, &by, &x.CreatedAt, &done, &cmdStatus); err != nil {
		return x, err
	}
	x.Error, x.CreatedBy, x.CompletedAt = store.StringPtr(errMsg), store.StringPtr(by), utcPtr(done)
	x.CreatedAt = x.CreatedAt.UTC()
	_ = json.Unmarshal([]byte(paths), &x.Paths)
	if x.Paths == nil {
		x.Paths = []string{}
	}
	// A scan whose command ended without a result (timed out, cancelled) failed; one the
	// agent holds runs.
	if x.Status == ScanQueued {
		switch cmdStatus {
		case devices.CommandSent:
			x.Status = ScanRunning
		case devices.CommandTimedOut, devices.CommandCancelled, devices.CommandFailed:
			x.Status = ScanFailed
			msg := "the scan's command ended " + cmdStatus
			x.Error = &msg
		}
	}
	return x, nil
}

// StartScan queues a threat scan on a device (and a refresh of its status).
func (s *Service) StartScan(ctx context.Context, deviceID string, in SecurityScanInput) (SecurityScanRun, error) {
	if err := in.validate(); err != nil {
		return SecurityScanRun{}, err
	}
	d, err := s.deviceInScope(ctx, deviceID)
	if err != nil {
		return SecurityScanRun{}, err
	}
	var out SecurityScanRun
	var cmds []devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{deviceID}, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandSecurityScan, TimeoutSeconds: scanTimeout,
				Payload: json.RawMessage(store.EncodeJSON(agentproto.SecurityScan{ScanType: in.ScanType, Paths: in.Paths}))}})
		if err != nil {
			return err
		}
		if err := bulkRefusal(res); err != nil {
			return err
		}
		ids, more, err := s.recordScans(ctx, tx, []devices.Device{d}, res.Commands, in, access.ActorName(ctx))
		if err != nil {
			return err
		}
		cmds = append(res.Commands, more...)
		if out, err = getScan(ctx, tx, ids[0]); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "security.scan", ResourceType: "device", ResourceID: d.ID, ResourceName: d.Hostname,
			PartnerID: d.PartnerID, OrgID: d.OrgID, Details: map[string]any{"scanId": ids[0], "scanType": in.ScanType, "paths": out.Paths}})
	})
	if err != nil {
		return out, fmt.Errorf("start security scan: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return out, nil
}

func getScan(ctx context.Context, q store.Querier, id string) (SecurityScanRun, error) {
	var a store.Args
	return store.ByID(ctx, q, "scan", `SELECT `+scanColumns+` FROM security_scans x`+devices.CommandJoin("x.command_id"), "x.id", id, &a, nil,
		scanScan)
}

// ListScans lists a device's scans, newest first.
func (s *Service) ListScans(ctx context.Context, deviceID string, page store.Page) ([]SecurityScanRun, string, *int, error) {
	if _, err := s.deviceInScope(ctx, deviceID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"x.device_id = " + a.Add(deviceID), access.ScopeFrom(ctx).OrgFilter(&a, "x.org_id", "x.partner_id")}
	return store.List(ctx, s.db, store.ListQuery{Columns: scanColumns, From: " FROM security_scans x" + devices.CommandJoin("x.command_id"),
		Conds: conds, Args: &a, SortKey: "x.id", SortID: "x.id", Desc: true}, page, scanScan,
		func(x SecurityScanRun) (string, string) { return x.ID, x.ID })
}

// onScan records a security_scan result: the scan's outcome and the threats found.
func (s *Service) onScan(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var id, partnerID, orgID string
	err := tx.QueryRowContext(ctx, `SELECT id, partner_id, org_id FROM security_scans WHERE command_id = $1 AND device_id = $2 AND status = $3`,
		r.CommandID, deviceID, ScanQueued).Scan(&id, &partnerID, &orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find the scan of command %s: %w", r.CommandID, err)
	}
	now := s.now()
	var res agentproto.SecurityScanResult
	if r.Status != agentproto.ResultCompleted || json.Unmarshal(r.Result, &res) != nil {
		msg := r.Error
		if msg == "" {
			msg = "the agent answered " + r.Status
		}
		if _, err := tx.ExecContext(ctx, `UPDATE security_scans SET status = $1, error = $2, completed_at = $3 WHERE id = $4 AND status = $5`,
			ScanFailed, msg, now, id, ScanQueued); err != nil {
			return fmt.Errorf("record failed scan %s: %w", id, err)
		}
		return nil
	}
	if len(res.Threats) > maxThreatsPerScan {
		res.Threats, res.Truncated = res.Threats[:maxThreatsPerScan], true
	}
	if _, err := tx.ExecContext(ctx, `UPDATE security_scans SET status = $1, engine = $2, files_scanned = $3, threats_found = $4,
		truncated = $5, completed_at = $6 WHERE id = $7 AND status = $8`, ScanCompleted, res.Engine, res.FilesScanned, len(res.Threats),
		res.Truncated, now, id, ScanQueued); err != nil {
		return fmt.Errorf("record scan %s: %w", id, err)
	}
	if err := s.recordThreats(ctx, tx, id, partnerID, orgID, deviceID, res.Threats); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE security_device_status SET last_scan_at = $1 WHERE device_id = $2`, now, deviceID); err != nil {
		return fmt.Errorf("record the last scan of %s: %w", deviceID, err)
	}
	return s.restate(ctx, tx, deviceID)
}

// onScanProgress records how many files a running scan of the agent's device has looked at,
// as its agent reports over the live channel. Reports come about once a second and may pass
// each other, so the count only grows; a scan that ended keeps its result's count.
func (s *Service) onScanProgress(ctx context.Context, a devices.Agent, payload json.RawMessage) error {
	var p agentproto.SecurityScanProgress
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("scan progress of device %s: %w", a.DeviceID, err)
	}
	if !store.ValidID(p.CommandID) || p.FilesScanned <= 0 {
		return nil
	}
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE security_scans SET files_scanned = $1 WHERE command_id = $2 AND device_id = $3
			AND status = $4 AND files_scanned < $1`, p.FilesScanned, p.CommandID, a.DeviceID, ScanQueued)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the progress of scan command %s: %w", p.CommandID, err)
	}
	return nil
}

// maxThreatsPerScan bounds the threats one scan records (the agent's own bound).
const maxThreatsPerScan = 1000

// requestStatus queues a security_status for a device and notes when it was asked for.
// recordScans records the scans whose commands were queued (one per device, in the order of
// devs) and asks each device for a fresh status; it returns the scans' IDs and the status
// commands.
func (s *Service) recordScans(ctx context.Context, tx *sql.Tx, devs []devices.Device, queued []devices.DeviceCommand,
	in SecurityScanInput, createdBy any) ([]string, []devices.DeviceCommand, error) {
	byDevice := make(map[string]devices.Device, len(devs))
	for _, d := range devs {
		byDevice[d.ID] = d
	}
	paths := in.Paths
	if paths == nil {
		paths = []string{}
	}
	ids := make([]string, 0, len(queued))
	var status []devices.DeviceCommand
	for _, c := range queued {
		d := byDevice[c.DeviceID]
		id := store.NewID()
		if _, err := tx.ExecContext(ctx, `INSERT INTO security_scans (id, partner_id, org_id, device_id, command_id, scan_type, paths, status,
			created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, id, d.PartnerID, d.OrgID, d.ID, c.ID,
			in.ScanType, store.EncodeJSON(paths), ScanQueued, createdBy, s.now()); err != nil {
			return nil, nil, fmt.Errorf("record scan: %w", err)
		}
		more, err := s.requestStatus(ctx, tx, d)
		if err != nil {
			return nil, nil, err
		}
		ids, status = append(ids, id), append(status, more...)
	}
	return ids, status, nil
}

func (s *Service) requestStatus(ctx context.Context, tx *sql.Tx, d devices.Device) ([]devices.DeviceCommand, error) {
	if err := s.ensureRow(ctx, tx, d); err != nil {
		return nil, err
	}
	res, err := s.devices.SendBulkIn(systemCtx(ctx), tx, devices.BulkInput{DeviceIDs: []string{d.ID}, Audited: true,
		CommandInput: devices.CommandInput{Type: agentproto.CommandSecurityStatus}})
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE security_device_status SET requested_at = $1 WHERE device_id = $2`, s.now(), d.ID); err != nil {
		return nil, fmt.Errorf("note the status request of %s: %w", d.ID, err)
	}
	return res.Commands, nil
}

// statusBatch bounds the devices one round of the status job asks.
const statusBatch = 200

// RefreshStatuses asks online devices whose status is older than the interval (or never
// collected, or asked for longer ago than that without an answer) for a fresh one, up to
// statusBatch a round.
func (s *Service) RefreshStatuses(ctx context.Context) error {
	ctx = systemCtx(ctx)
	online, err := s.devices.ListAll(ctx, devices.ListFilter{Status: devices.StatusOnline}, 1_000_000)
	if err != nil {
		return err
	}
	if len(online) == 0 {
		return nil
	}
	cutoff := s.now().Add(-s.interval)
	freshIDs, err := store.QueryStrings(ctx, s.db, `SELECT device_id FROM security_device_status WHERE requested_at >= $1 OR collected_at >= $1`,
		cutoff)
	if err != nil {
		return fmt.Errorf("read status ages: %w", err)
	}
	fresh := make(map[string]bool, len(freshIDs))
	for _, id := range freshIDs {
		fresh[id] = true
	}
	var due []devices.Device
	for _, d := range online {
		if !fresh[d.ID] && (d.OSType == "" || d.OSType == agentproto.OSLinux) {
			due = append(due, d)
			if len(due) == statusBatch {
				break
			}
		}
	}
	if len(due) == 0 {
		return nil
	}
	var cmds []devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		cmds = nil
		for _, d := range due {
			c, err := s.requestStatus(ctx, tx, d)
			if err != nil {
				return err
			}
			cmds = append(cmds, c...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("request security statuses: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return nil
}
