package security

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// ScheduleEvery is how often the scheduled-scan job looks for policies whose time has come.
const ScheduleEvery = time.Minute

// maxScheduledScans bounds the devices one policy's daily scan reaches (a bulk command's
// bound); the rest are scanned on demand.
const maxScheduledScans = 500

// RunScheduledScans starts the daily scans of the policies whose time of day (UTC) has come
// and that have not run today. A conditional update on the policy's day claims it, in the
// transaction that queues the scans, so one node starts them once a day.
func (s *Service) RunScheduledScans(ctx context.Context) error {
	ctx = systemCtx(ctx)
	now := s.now().UTC()
	day := now.Format(time.DateOnly)
	scheduled, err := store.QueryAll(ctx, s.db, `SELECT `+policyColumns+` FROM security_policies p
		WHERE p.scan_schedule <> 'null' AND p.last_scheduled_day <> $1`, []any{day}, scanPolicy)
	if err != nil {
		return fmt.Errorf("read scheduled policies: %w", err)
	}
	for _, p := range scheduled {
		if p.ScanSchedule == nil {
			continue
		}
		at, err := time.Parse("15:04", p.ScanSchedule.DailyTime)
		if err != nil || now.Before(time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)) {
			continue
		}
		if err := s.scheduledScan(ctx, p, day); err != nil {
			s.logger.Error("scheduled security scan", "policy", p.ID, "error", err)
		}
	}
	return nil
}

// scheduledScan queues the policy's scan on the online Linux devices it applies to: its
// organization's, or for a partner's default those of its organizations without their own.
func (s *Service) scheduledScan(ctx context.Context, p SecurityPolicy, day string) error {
	var f devices.ListFilter
	if p.OrgID != nil {
		f.OrgIDs = []string{*p.OrgID}
	}
	f.Status = devices.StatusOnline
	online, err := s.devices.ListAll(ctx, f, 1_000_000)
	if err != nil {
		return err
	}
	ps, err := loadPolicies(ctx, s.db, []string{p.PartnerID})
	if err != nil {
		return err
	}
	var targets []devices.Device
	var ids []string
	for _, d := range online {
		if d.PartnerID != p.PartnerID || (d.OSType != "" && d.OSType != agentproto.OSLinux) || ps.forOrg(d.PartnerID, d.OrgID).ID != p.ID {
			continue
		}
		targets, ids = append(targets, d), append(ids, d.ID)
		if len(targets) == maxScheduledScans {
			break
		}
	}
	in := SecurityScanInput{ScanType: p.ScanSchedule.ScanType}
	var cmds []devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		claimed, err := tx.ExecContext(ctx, `UPDATE security_policies SET last_scheduled_day = $1 WHERE id = $2 AND last_scheduled_day <> $1`,
			day, p.ID)
		if err != nil {
			return fmt.Errorf("claim the day of policy %s: %w", p.ID, err)
		}
		if n, err := claimed.RowsAffected(); err != nil || n == 0 || len(ids) == 0 {
			return err
		}
		res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: ids, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandSecurityScan, TimeoutSeconds: scanTimeout,
				Payload: json.RawMessage(store.EncodeJSON(agentproto.SecurityScan{ScanType: in.ScanType}))}})
		if err != nil {
			return err
		}
		_, more, err := s.recordScans(ctx, tx, targets, res.Commands, in, "schedule")
		cmds = append(res.Commands, more...)
		return err
	})
	if err == nil {
		s.devices.Dispatch(ctx, cmds)
	}
	return err
}
