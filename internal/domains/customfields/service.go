package customfields

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Hook runs inside the transaction that changed a device's custom field values (a PATCH of its
// values, or a deleted field that had a value on it), so that derived state (dynamic group
// membership) commits or rolls back with the change. A domain declares its Hook on the module
// kernel.
type Hook func(ctx context.Context, tx *sql.Tx, deviceID string) error

// Service manages custom field definitions and device values.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
	// hooks are called after a device's values change.
	hooks []Hook
}

// Deps is what the custom fields service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
}

// New returns the custom fields service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock)}
}

// plug takes in the hooks modules declared, once every module is built.
func (s *Service) plug(hooks []Hook) { s.hooks = append(s.hooks, hooks...) }

func (s *Service) changed(ctx context.Context, tx *sql.Tx, deviceID string) error {
	for _, h := range s.hooks {
		if err := h(ctx, tx, deviceID); err != nil {
			return err
		}
	}
	return nil
}

// fieldFilter keeps the definitions (alias f) the scope may see: a partner caller its
// partner's partner-wide fields and those of organizations it reaches; an organization caller
// its partner's partner-wide fields and its own; nobody the fields of a deleted organization.
func fieldFilter(scope access.Scope, a *store.Args) string {
	return tenancy.SharedRowsFilter(scope, a, "f.org_id", "f.partner_id")
}

var errPartnerWide = apperr.Forbidden("partner-wide fields are managed by the partner")

// ListFilter narrows a list of definitions.
type ListFilter struct {
	// OrgID keeps the fields that apply to that organization: its own and partner-wide ones.
	OrgID string
	// Search matches name or key, case-insensitively.
	Search string
}

// List lists the definitions in scope, by name.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Field, string, *int, error) {
	scope := access.ScopeFrom(ctx)
	var a store.Args
	conds := []string{fieldFilter(scope, &a)}
	if f.OrgID != "" {
		conds = append(conds, "(f.org_id = "+a.Add(f.OrgID)+" OR (f.org_id IS NULL AND f.partner_id = "+
			tenancy.PartnerOfOrg(a.Add(f.OrgID))+"))")
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "f.name", "f.key"))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: fieldColumns, From: " FROM custom_fields f", Conds: conds,
		Args: &a, SortKey: "f.name", SortID: "f.id"}, page, scanField, func(f Field) (string, string) { return f.Name, f.ID })
}

// Get returns a definition in scope.
func (s *Service) Get(ctx context.Context, id string) (Field, error) {
	return getField(ctx, s.db, access.ScopeFrom(ctx), id)
}

func getField(ctx context.Context, q store.Querier, scope access.Scope, id string) (Field, error) {
	var a store.Args
	return store.ByID(ctx, q, "custom field", `SELECT `+fieldColumns+` FROM custom_fields f`, "f.id", id, &a,
		[]string{fieldFilter(scope, &a)}, scanField)
}

// manageableField loads a definition in scope that the caller may change.
func manageableField(ctx context.Context, q store.Querier, scope access.Scope, id string) (Field, error) {
	f, err := getField(ctx, q, scope, id)
	if err == nil && f.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
		return f, errPartnerWide
	}
	return f, err
}

// Create adds a definition to the caller's partner (system callers: to in.PartnerID).
func (s *Service) Create(ctx context.Context, in NewField) (Field, error) {
	scope := access.ScopeFrom(ctx)
	if err := validKey(in.Key); err != nil {
		return Field{}, err
	}
	name, err := validName(in.Name)
	if err != nil {
		return Field{}, err
	}
	if !slices.Contains(types, in.Type) {
		return Field{}, apperr.Invalid("type", "use one of "+strings.Join(types, ", "))
	}
	options, err := validOptions(in.Type, in.Options)
	if err != nil {
		return Field{}, err
	}
	def, err := validDefault(in.Type, options, in.DefaultValue)
	if err != nil {
		return Field{}, err
	}
	var f Field
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "field", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide, OnlySystemNamesPartner: true})
		if err != nil {
			return err
		}
		partnerID, orgID := at.PartnerID, at.OrgID
		id, now := store.NewID(), s.clock.Now()
		_, err = tx.ExecContext(ctx, `INSERT INTO custom_fields (id, partner_id, org_id, key, name, description, type, options,
			required, default_value, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
			id, partnerID, store.NullIfEmpty(orgID), in.Key, name, strings.TrimSpace(in.Description), in.Type, store.EncodeJSON(options),
			in.Required, store.EncodeJSONOrNull(def), now)
		if store.IsUniqueViolation(err) {
			return apperr.Conflict("the partner already has a custom field with key " + in.Key)
		}
		if err != nil {
			return fmt.Errorf("insert custom field: %w", err)
		}
		if f, err = getField(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "custom_field.create", ResourceType: "custom_field", ResourceID: id,
			ResourceName: f.Key, PartnerID: f.PartnerID, OrgID: orgID, Details: audit.Snapshot(f)})
	})
	if err != nil {
		return f, fmt.Errorf("create custom field: %w", err)
	}
	return f, nil
}

// Update changes a definition the caller may manage. key and type cannot change: device
// values were validated against them.
func (s *Service) Update(ctx context.Context, id string, in FieldUpdate) (Field, error) {
	scope := access.ScopeFrom(ctx)
	var f Field
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageableField(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if in.Key != nil && *in.Key != before.Key {
			return apperr.Invalid("key", "the key cannot change after create; devices, filters and integrations refer to it")
		}
		if in.Type != nil && *in.Type != before.Type {
			return apperr.Invalid("type", "the type cannot change after create; existing device values were validated against it. "+
				"Create a new field instead")
		}
		ch := store.NewChanges(s.clock.Now())
		if in.Name != nil {
			name, err := validName(*in.Name)
			if err != nil {
				return err
			}
			ch.Set("name", name)
		}
		if in.Description != nil {
			ch.Set("description", strings.TrimSpace(*in.Description))
		}
		if in.Required != nil {
			ch.Set("required", *in.Required)
		}
		options := before.Options
		if in.Options != nil {
			if options, err = validOptions(before.Type, in.Options); err != nil {
				return err
			}
			if err := checkOptionsUnused(ctx, tx, before, options); err != nil {
				return err
			}
			ch.Set("options", store.EncodeJSON(options))
		}
		// The default is checked against the options as they will be, even when only the
		// options change.
		switch {
		case in.DefaultValue != nil:
			def, err := validDefault(before.Type, options, in.DefaultValue)
			if err != nil {
				return err
			}
			ch.Set("default_value", store.EncodeJSONOrNull(def))
		case before.Default != nil && in.Options != nil:
			raw, _ := json.Marshal(before.Default)
			if _, msg := checkValue(before.Type, options, raw); msg != "" {
				return apperr.Invalid("options", "the default value would no longer be one of the options; change it too")
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE custom_fields SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return fmt.Errorf("update custom field %s: %w", id, err)
		}
		if f, err = getField(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "custom_field.update", ResourceType: "custom_field", ResourceID: id,
			ResourceName: f.Key, PartnerID: f.PartnerID, OrgID: store.Deref(f.OrgID), Details: audit.Diff(before, f)})
	})
	if err != nil {
		return f, fmt.Errorf("update custom field: %w", err)
	}
	return f, nil
}

// checkOptionsUnused refuses to drop an option that a device still has as its value: the
// value would stop validating against its own field.
func checkOptionsUnused(ctx context.Context, tx *sql.Tx, f Field, options []string) error {
	var removed []string
	for _, o := range f.Options {
		if !slices.Contains(options, o) {
			removed = append(removed, o)
		}
	}
	if len(removed) == 0 {
		return nil
	}
	values, err := store.QueryAll(ctx, tx, `SELECT value FROM device_custom_values WHERE field_id = $1`, []any{f.ID},
		func(row store.Scanner) (any, error) {
			var raw sql.NullString
			err := row.Scan(&raw)
			return decodeValue(raw), err
		})
	if err != nil {
		return fmt.Errorf("read values of custom field %s: %w", f.ID, err)
	}
	inUse := 0
	for _, value := range values {
		switch v := value.(type) {
		case string:
			if slices.Contains(removed, v) {
				inUse++
			}
		case []any:
			if slices.ContainsFunc(v, func(x any) bool { s, _ := x.(string); return slices.Contains(removed, s) }) {
				inUse++
			}
		}
	}
	if inUse > 0 {
		return apperr.Conflict(fmt.Sprintf("%d device(s) still have a removed option as their value; change those values first", inUse))
	}
	return nil
}

// Delete removes a definition the caller may manage, with every device's value of it.
func (s *Service) Delete(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		f, err := manageableField(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		devices, err := deviceIDsWithValue(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("read devices with a value of custom field %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_custom_values WHERE field_id = $1`, id); err != nil {
			return fmt.Errorf("delete values of custom field %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM custom_fields WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete custom field %s: %w", id, err)
		}
		for _, d := range devices {
			if err := s.changed(ctx, tx, d); err != nil {
				return err
			}
		}
		details := audit.Snapshot(f)
		details["valuesRemoved"] = len(devices)
		return audit.Record(ctx, tx, audit.Entry{Action: "custom_field.delete", ResourceType: "custom_field", ResourceID: id,
			ResourceName: f.Key, PartnerID: f.PartnerID, OrgID: store.Deref(f.OrgID), Details: details})
	})
}

func deviceIDsWithValue(ctx context.Context, tx *sql.Tx, fieldID string) ([]string, error) {
	return store.QueryStrings(ctx, tx, `SELECT device_id FROM device_custom_values WHERE field_id = $1 ORDER BY device_id`, fieldID)
}
