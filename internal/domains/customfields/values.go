package customfields

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Value is one field applicable to a device with the device's value.
type Value struct {
	FieldID   string     `json:"fieldId" format:"uuid"`
	Key       string     `json:"key"`
	Name      string     `json:"name"`
	Type      string     `json:"type"`
	Options   []string   `json:"options,omitempty"`
	Required  bool       `json:"required"`
	Value     any        `json:"value" doc:"The device's value, else the field's default, else null."`
	IsDefault bool       `json:"isDefault" doc:"true when value is the field's default (the device has no value of its own)."`
	UpdatedAt *time.Time `json:"updatedAt,omitempty" doc:"When the device's own value was last set."`
}

// DeviceValues is every custom field applicable to a device, by name.
type DeviceValues struct {
	DeviceID string  `json:"deviceId" format:"uuid"`
	Data     []Value `json:"data"`
}

// device is what the values routes need of a device.
type device struct {
	ID, PartnerID, OrgID, Hostname string
}

// deviceColumns are what the values routes read of a device.
const deviceColumns = "d.id, d.partner_id, d.org_id, d.hostname"

// getDevice loads a device in scope that is not decommissioned (404 otherwise). The live
// devices are selected as the devices package selects them, then read by ID.
func getDevice(ctx context.Context, q store.Querier, scope access.Scope, id string) (device, error) {
	var a store.Args
	return store.ByID(ctx, q, "device", `SELECT `+deviceColumns+` FROM (`+devices.SelectLive(deviceColumns, "")+`) d`, "d.id", id, &a,
		[]string{scope.OrgFilter(&a, "d.org_id", "d.partner_id"), tenancy.LiveOrg("d.org_id")},
		func(row store.Scanner) (device, error) {
			var d device
			return d, row.Scan(&d.ID, &d.PartnerID, &d.OrgID, &d.Hostname)
		})
}

// loadValues lists the fields applicable to d (partner-wide ones and its organization's) with
// its values.
func loadValues(ctx context.Context, q store.Querier, d device) ([]Value, error) {
	out, err := store.QueryAll(ctx, q, `SELECT f.id, f.key, f.name, f.type, f.options, f.required, f.default_value, v.value, v.updated_at
		FROM custom_fields f LEFT JOIN device_custom_values v ON v.field_id = f.id AND v.device_id = $1
		WHERE f.partner_id = $2 AND (f.org_id IS NULL OR f.org_id = $3) ORDER BY f.name, f.id`, []any{d.ID, d.PartnerID, d.OrgID}, scanValue)
	if err != nil {
		return nil, fmt.Errorf("read custom field values of device %s: %w", d.ID, err)
	}
	return out, nil
}

func scanValue(row store.Scanner) (Value, error) {
	var v Value
	var options, def, val sql.NullString
	var updated sql.NullTime
	if err := row.Scan(&v.FieldID, &v.Key, &v.Name, &v.Type, &options, &v.Required, &def, &val, &updated); err != nil {
		return v, err
	}
	v.Options = decodeOptions(options)
	if val.Valid {
		v.Value, v.UpdatedAt = decodeValue(val), store.TimePtr(updated)
	} else if v.Value = decodeValue(def); v.Value != nil {
		v.IsDefault = true
	}
	return v, nil
}

// EffectiveValues returns a device's custom field values by key, defaults included, without a
// scope check: for rules that evaluate devices (dynamic groups) inside their own transaction.
// Fields without a value or default are absent; a missing device has none.
func EffectiveValues(ctx context.Context, q store.Querier, deviceID string) (map[string]any, error) {
	d, err := getDevice(ctx, q, access.SystemScope(), deviceID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	vals, err := loadValues(ctx, q, d)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(vals))
	for _, v := range vals {
		if v.Value != nil {
			out[v.Key] = v.Value
		}
	}
	return out, nil
}

// DeviceValues returns the custom fields of a device in scope.
func (s *Service) DeviceValues(ctx context.Context, deviceID string) (DeviceValues, error) {
	d, err := getDevice(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if err != nil {
		return DeviceValues{}, err
	}
	vals, err := loadValues(ctx, s.db, d)
	return DeviceValues{DeviceID: d.ID, Data: vals}, err
}

// SetDeviceValues sets (or, with JSON null, clears) values of a device in scope by field key.
// Every key is checked before anything is written; all problems come back in one 400 with a
// detail per key. The change is audited with a diff and the hook runs in the transaction.
func (s *Service) SetDeviceValues(ctx context.Context, deviceID string, values map[string]json.RawMessage) (DeviceValues, error) {
	if len(values) == 0 {
		return DeviceValues{}, apperr.Invalid("values", "give at least one field key")
	}
	scope := access.ScopeFrom(ctx)
	var out DeviceValues
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		d, err := getDevice(ctx, tx, scope, deviceID)
		if err != nil {
			return err
		}
		before, err := loadValues(ctx, tx, d)
		if err != nil {
			return err
		}
		byKey := make(map[string]Value, len(before))
		for _, v := range before {
			byKey[v.Key] = v
		}
		keys := make([]string, 0, len(values))
		for k := range values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var details []apperr.Detail
		set := map[string]any{}
		for _, k := range keys {
			f, ok := byKey[k]
			switch {
			case !ok:
				details = append(details, apperr.Detail{Field: "values." + k, Message: "no custom field with this key applies to the device"})
			case isNull(values[k]):
				if f.Required {
					details = append(details, apperr.Detail{Field: "values." + k, Message: "the field is required and cannot be cleared"})
				}
				set[k] = nil
			default:
				v, msg := checkValue(f.Type, f.Options, values[k])
				if msg != "" {
					details = append(details, apperr.Detail{Field: "values." + k, Message: msg})
				}
				set[k] = v
			}
		}
		if len(details) > 0 {
			return &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeValidation, Message: "validation failed", Details: details}
		}
		now := s.clock.Now()
		changes := map[string]any{}
		for _, k := range keys {
			f := byKey[k]
			var old any
			if !f.IsDefault {
				old = f.Value
			}
			if reflect.DeepEqual(old, set[k]) {
				continue
			}
			changes[k] = map[string]any{"from": old, "to": set[k]}
			if set[k] == nil {
				_, err = tx.ExecContext(ctx, `DELETE FROM device_custom_values WHERE device_id = $1 AND field_id = $2`, d.ID, f.FieldID)
			} else {
				_, err = tx.ExecContext(ctx, `INSERT INTO device_custom_values (device_id, field_id, value, updated_at) VALUES ($1, $2, $3, $4)
					ON CONFLICT (device_id, field_id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
					d.ID, f.FieldID, store.EncodeJSON(set[k]), now)
			}
			if err != nil {
				return fmt.Errorf("set custom field %s of device %s: %w", k, d.ID, err)
			}
		}
		if out.Data, err = loadValues(ctx, tx, d); err != nil {
			return err
		}
		out.DeviceID = d.ID
		if len(changes) == 0 {
			return nil
		}
		if err := s.changed(ctx, tx, d.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device.custom_fields.update", ResourceType: "device", ResourceID: d.ID,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: map[string]any{"changes": changes}})
	})
	if err != nil {
		return out, fmt.Errorf("set device custom field values: %w", err)
	}
	return out, nil
}

// OrgEffectiveValues is EffectiveValues for every device of an organization that is not
// decommissioned, by device ID, in two queries whatever the number of devices: for rules that
// evaluate a whole organization (dynamic group recomputation). Devices without any value or
// default are absent.
func OrgEffectiveValues(ctx context.Context, q store.Querier, orgID string) (map[string]map[string]any, error) {
	type field struct {
		id, key string
		def     any
	}
	list, err := store.QueryAll(ctx, q, `SELECT f.id, f.key, f.default_value FROM custom_fields f
		WHERE f.partner_id = `+tenancy.PartnerOfOrg("$1")+` AND (f.org_id IS NULL OR f.org_id = $1)`, []any{orgID},
		func(row store.Scanner) (field, error) {
			var f field
			var def sql.NullString
			err := row.Scan(&f.id, &f.key, &def)
			f.def = decodeValue(def)
			return f, err
		})
	if err != nil {
		return nil, fmt.Errorf("read custom fields of organization %s: %w", orgID, err)
	}
	out := map[string]map[string]any{}
	if len(list) == 0 {
		return out, nil
	}
	fields := make(map[string]field, len(list))
	for _, f := range list {
		fields[f.id] = f
	}
	type deviceValue struct {
		deviceID       string
		fieldID, value sql.NullString
	}
	set, err := store.QueryAll(ctx, q, devices.SelectLive("d.id, v.field_id, v.value",
		" LEFT JOIN device_custom_values v ON v.device_id = d.id", "d.org_id = $1"), []any{orgID},
		func(row store.Scanner) (deviceValue, error) {
			var r deviceValue
			return r, row.Scan(&r.deviceID, &r.fieldID, &r.value)
		})
	if err != nil {
		return nil, fmt.Errorf("read custom field values of organization %s: %w", orgID, err)
	}
	for _, r := range set {
		vals, ok := out[r.deviceID]
		if !ok {
			vals = map[string]any{}
			for _, f := range fields {
				if f.def != nil {
					vals[f.key] = f.def
				}
			}
			out[r.deviceID] = vals
		}
		if f, ok := fields[r.fieldID.String]; ok && r.fieldID.Valid {
			if v := decodeValue(r.value); v != nil {
				vals[f.key] = v
			}
		}
	}
	for id, vals := range out {
		if len(vals) == 0 {
			delete(out, id)
		}
	}
	return out, nil
}

// DeviceMoved deletes, in the move's transaction, the device's values of fields that belong
// to an organization other than orgID, where it moved (the devices hook Moved): they mean
// nothing there.
func (s *Service) DeviceMoved(ctx context.Context, tx *sql.Tx, deviceID, orgID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM device_custom_values WHERE device_id = $1 AND field_id IN
		(SELECT id FROM custom_fields WHERE org_id IS NOT NULL AND org_id <> $2)`, deviceID, orgID); err != nil {
		return fmt.Errorf("delete custom field values of moved device %s: %w", deviceID, err)
	}
	return nil
}

// ApplicableKeys returns the keys of the custom fields that apply to an organization: its
// partner's partner-wide fields and its own.
func ApplicableKeys(ctx context.Context, q store.Querier, orgID string) (map[string]bool, error) {
	keys, err := store.QueryStrings(ctx, q, `SELECT f.key FROM custom_fields f
		WHERE f.partner_id = `+tenancy.PartnerOfOrg("$1")+` AND (f.org_id IS NULL OR f.org_id = $1)`, orgID)
	if err != nil {
		return nil, fmt.Errorf("read custom field keys of organization %s: %w", orgID, err)
	}
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out, nil
}
