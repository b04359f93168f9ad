package customfields

import (
	"context"
	"database/sql"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// ExportFields returns a page of the field definitions in scope in ID order, or with
// sk.Since those changed since then in (updatedAt, ID) order.
func (s *Service) ExportFields(ctx context.Context, sk store.Seek) ([]Field, bool, error) {
	var a store.Args
	conds := []string{fieldFilter(access.ScopeFrom(ctx), &a)}
	keys := sk.Keys(&a, &conds, "f.updated_at", "f.id")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: fieldColumns, From: " FROM custom_fields f", Conds: conds,
		Args: &a, Keys: keys}, sk, scanField)
}

// ExportedValue is a device's own value of one custom field (defaults are not values: they
// are on the field definitions).
type ExportedValue struct {
	DeviceID  string    `json:"deviceId" format:"uuid"`
	FieldID   string    `json:"fieldId" format:"uuid"`
	FieldKey  string    `json:"fieldKey"`
	OrgID     string    `json:"orgId" format:"uuid"`
	Value     any       `json:"value"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// ExportValues returns a page of the values set on devices in scope in (device ID, field ID)
// order, or with sk.Since those set since then in (updatedAt, device ID, field ID) order.
// A cleared value is deleted, so it leaves the export rather than appearing as changed.
func (s *Service) ExportValues(ctx context.Context, sk store.Seek) ([]ExportedValue, bool, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id"), tenancy.LiveOrg("d.org_id")}
	keys := sk.Keys(&a, &conds, "v.updated_at", "v.device_id", "v.field_id")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: "v.device_id, v.field_id, f.key, d.org_id, v.value, v.updated_at",
		From:  " FROM device_custom_values v" + devices.Join("d", "v.device_id") + " JOIN custom_fields f ON f.id = v.field_id",
		Conds: conds, Args: &a, Keys: keys}, sk, func(sc store.Scanner) (ExportedValue, error) {
		var r ExportedValue
		var val sql.NullString
		err := sc.Scan(&r.DeviceID, &r.FieldID, &r.FieldKey, &r.OrgID, &val, &r.UpdatedAt)
		r.Value, r.UpdatedAt = decodeValue(val), r.UpdatedAt.UTC()
		return r, err
	})
}
