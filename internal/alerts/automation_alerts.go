package alerts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/access"
	"gale/internal/apperr"
	"gale/internal/store"
)

// Raised is an alert raised on a device outside any rule (an automation's create_alert
// action); Context is kept as the alert's context.
type Raised struct {
	DeviceID string
	Severity string
	Title    string
	Message  string
	Context  map[string]any
}

// Raise opens an alert on a device in the caller's scope, placed in the device's
// organization and site, and records alert.triggered as a rule's alert does.
func (s *Service) Raise(ctx context.Context, in Raised) (Alert, error) {
	var x Alert
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		if !store.ValidID(in.DeviceID) {
			return apperr.NotFound("device")
		}
		var a store.Args
		d, err := scanDevice(tx.QueryRowContext(ctx, `SELECT `+evalDeviceColumns+` FROM devices d WHERE d.id = `+a.Add(in.DeviceID)+
			` AND d.decommissioned_at IS NULL AND `+access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id"), a.Values()...))
		if errors.Is(err, sql.ErrNoRows) {
			return apperr.NotFound("device")
		}
		if err != nil {
			return fmt.Errorf("load device %s: %w", in.DeviceID, err)
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO alerts (id, partner_id, org_id, site_id, device_id, severity, status, title,
			message, context, triggered_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`, id, d.PartnerID,
			d.OrgID, store.NullIfEmpty(d.SiteID), d.ID, in.Severity, StatusActive, truncate(in.Title, 500), truncate(in.Message, 4000),
			encodeJSON(in.Context), now); err != nil {
			return fmt.Errorf("raise alert: %w", err)
		}
		if x, err = getAlert(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return record(ctx, tx, x, transition{event: "alert.triggered", audit: "alert.trigger"}, nil)
	})
	return x, err
}
