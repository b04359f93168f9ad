package alerts

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gale/internal/domains/maintenance"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// Source types of alerts that no device raises.
const (
	SourceDevice     = "device"
	SourceMonitor    = "monitor"
	SourceSNMPDevice = "snmp_device"
)

// Source is something other than a device's rules that raises alerts: a monitor, an SNMP
// device. Its alerts belong to its organization (and site), route and notify like every other
// alert, and name the source in sourceType and sourceId.
type Source struct {
	Type      string
	ID        string
	PartnerID string
	OrgID     string
	// SiteID and DeviceID are optional: the site the source watches, the device it runs on.
	SiteID   string
	DeviceID string
	// ProbeID is optional: the device whose agent made the observation (a monitor's check, an
	// SNMP poll). A maintenance window over it holds the alert back too; the alert is not
	// placed on it.
	ProbeID string
}

// subject is what of the source a maintenance window may cover.
func (src Source) subject() maintenance.Subject {
	sub := maintenance.Subject{OrgID: src.OrgID, SiteID: src.SiteID}
	for _, id := range []string{src.DeviceID, src.ProbeID} {
		if id != "" && !slices.Contains(sub.DeviceIDs, id) {
			sub.DeviceIDs = append(sub.DeviceIDs, id)
		}
	}
	return sub
}

// SourceAlert is an alert a source raises for one of its conditions (Key: a monitor's alert
// rule, an SNMP threshold). A source has at most one open alert per condition.
type SourceAlert struct {
	Key      string
	Severity string
	Title    string
	Message  string
	Context  map[string]any
	// Cooldown: no alert opens for the condition within this long after its last one was
	// resolved or dismissed.
	Cooldown time.Duration
}

func (src Source) key(condition string) string {
	return src.Type + ":" + src.ID + ":" + condition
}

// RaiseFrom opens an alert of a source's condition in tx, unless the condition has an open
// alert already, is cooling down, or a maintenance window that suppresses alerts covers the
// source's organization, its site, its device or its probe (false). A held condition opens no
// alert; the source raises it again at its next observation, so one that still holds once the
// window ends opens then. The source's caller has checked its tenancy.
func (s *Service) RaiseFrom(ctx context.Context, tx *sql.Tx, src Source, in SourceAlert) (Alert, bool, error) {
	key, now := src.key(in.Key), s.clock.Now()
	if in.Cooldown > 0 {
		var cooling int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM alerts WHERE source_key = $1 AND (resolved_at >= $2 OR dismissed_at >= $2)`,
			key, now.Add(-in.Cooldown)).Scan(&cooling); err != nil {
			return Alert{}, false, fmt.Errorf("check cooldown: %w", err)
		}
		if cooling > 0 {
			return Alert{}, false, nil
		}
	}
	if held, err := s.held(ctx, tx, src.subject()); err != nil || held {
		return Alert{}, false, err
	}
	id := store.NewID()
	res, err := tx.ExecContext(ctx, `INSERT INTO alerts (id, partner_id, org_id, site_id, device_id, source_type, source_id, severity,
		status, title, message, context, triggered_at, updated_at, source_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14)
		ON CONFLICT (source_key) WHERE source_key IS NOT NULL AND status IN ('active', 'acknowledged', 'suppressed') DO NOTHING`,
		id, src.PartnerID, src.OrgID, store.NullIfEmpty(src.SiteID), store.NullIfEmpty(src.DeviceID), src.Type, src.ID, in.Severity,
		StatusActive, truncate(in.Title, 500), truncate(in.Message, 4000), store.EncodeJSON(in.Context), now, key)
	if err != nil {
		return Alert{}, false, fmt.Errorf("raise alert of %s %s: %w", src.Type, src.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return Alert{}, false, err
	}
	x, err := getAlert(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return Alert{}, false, err
	}
	return x, true, record(ctx, tx, x, transition{event: "alert.triggered", audit: "alert.trigger"}, systemActor)
}

// ResolveFrom resolves, as the system and in tx, the open alert of a source's condition, or
// with condition "" every open alert of the source (it was deleted or disabled).
func (s *Service) ResolveFrom(ctx context.Context, tx *sql.Tx, src Source, condition, note string) error {
	var a store.Args
	var cond string
	if condition != "" {
		cond = "source_key = " + a.Add(src.key(condition))
	} else {
		cond = "source_type = " + a.Add(src.Type) + " AND source_id = " + a.Add(src.ID)
	}
	return resolveOpen(ctx, tx, s.clock.Now(), note, &a, cond)
}
