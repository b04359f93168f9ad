package alerts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Raised is an alert raised on a device outside any rule (an automation's create_alert
// action, a policy's non-compliance, a script's mapped exit code); Context is kept as the
// alert's context.
type Raised struct {
	DeviceID string
	Severity string
	Title    string
	Message  string
	Context  map[string]any
	// Requested marks an alert asked for in so many words (an automation's create_alert
	// action): a maintenance window that suppresses alerts does not hold it back, as
	// automations have a hold of their own (suppressAutomations). Any other alert waits out
	// the window (ErrHeld).
	Requested bool
}

// ErrHeld is the answer to a raise on a device whose alerts a maintenance window holds back:
// no alert opened. Its source raises it again when it next sees the condition.
var ErrHeld = errors.New("a maintenance window holds back the alerts of the device")

// Raise opens an alert on a device in the caller's scope, placed in the device's
// organization and site, and records alert.triggered as a rule's alert does.
func (s *Service) Raise(ctx context.Context, in Raised) (Alert, error) {
	var x Alert
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		x, _, err = s.raise(ctx, tx, access.ScopeFrom(ctx), in, "", nil)
		return err
	})
	if err != nil {
		return x, fmt.Errorf("raise alert on device %s: %w", in.DeviceID, err)
	}
	return x, nil
}

// raise opens an alert in tx on a device in scope, recorded as by actor (nil: the caller).
// With a sourceKey, it opens none while the source has an open alert already (false).
// Unless requested, it opens none while a maintenance window holds the device (ErrHeld).
func (s *Service) raise(ctx context.Context, tx *sql.Tx, scope access.Scope, in Raised, sourceKey string, actor *audit.Actor) (Alert, bool, error) {
	if !store.ValidID(in.DeviceID) {
		return Alert{}, false, apperr.NotFound("device")
	}
	var a store.Args
	d, err := scanDevice(tx.QueryRowContext(ctx, devices.SelectLive(evalDeviceColumns, "", "d.id = "+a.Add(in.DeviceID),
		scope.OrgFilter(&a, "d.org_id", "d.partner_id")), a.Values()...))
	if errors.Is(err, sql.ErrNoRows) {
		return Alert{}, false, apperr.NotFound("device")
	}
	if err != nil {
		return Alert{}, false, fmt.Errorf("load device %s: %w", in.DeviceID, err)
	}
	if !in.Requested {
		if held, err := s.held(ctx, tx, d.subject()); err != nil || held {
			if err == nil {
				err = ErrHeld
			}
			return Alert{}, false, err
		}
	}
	id, now := store.NewID(), s.clock.Now()
	res, err := tx.ExecContext(ctx, `INSERT INTO alerts (id, partner_id, org_id, site_id, device_id, source_id, severity, status,
		title, message, context, triggered_at, updated_at, source_key) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10, $11, $11, $12)
		ON CONFLICT (source_key) WHERE source_key IS NOT NULL AND status IN ('active', 'acknowledged', 'suppressed') DO NOTHING`,
		id, d.PartnerID, d.OrgID, store.NullIfEmpty(d.SiteID), d.ID, in.Severity, StatusActive, truncate(in.Title, 500),
		truncate(in.Message, 4000), store.EncodeJSON(in.Context), now, store.NullIfEmpty(sourceKey))
	if err != nil {
		return Alert{}, false, fmt.Errorf("raise alert: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return Alert{}, false, err
	}
	x, err := getAlert(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return Alert{}, false, err
	}
	return x, true, record(ctx, tx, x, transition{event: "alert.triggered", audit: "alert.trigger"}, actor)
}
