package groups

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/domains/customfields"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service manages device groups and keeps dynamic membership current.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
}

// Deps is what the groups service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time filters are matched at (lastSeen conditions) and membership changes
	// are logged at.
	Clock clock.Clock
}

// New returns the groups service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock)}
}

// groupFilter keeps the groups (alias g) of organizations in scope that are not deleted.
func groupFilter(scope access.Scope, a *store.Args) string {
	return "(" + scope.OrgFilter(a, "g.org_id", "g.partner_id") + " AND " + tenancy.LiveOrg("g.org_id") + ")"
}

// ListFilter narrows a list of groups.
type ListFilter struct {
	OrgID string
	// Type is static or dynamic; empty means both.
	Type string
	// Search matches the name, case-insensitively.
	Search string
}

// List lists the groups in scope by name.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Group, string, *int, error) {
	var a store.Args
	conds := []string{groupFilter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "g.org_id = "+a.Add(f.OrgID))
	}
	if f.Type != "" {
		conds = append(conds, "g.type = "+a.Add(f.Type))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "g.name"))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: groupColumns, From: " FROM device_groups g", Conds: conds, Args: &a,
		SortKey: "g.name", SortID: "g.id"}, page, scanGroup, func(g Group) (string, string) { return g.Name, g.ID })
}

// Get returns a group in scope.
func (s *Service) Get(ctx context.Context, id string) (Group, error) {
	return getGroup(ctx, s.db, access.ScopeFrom(ctx), id)
}

func getGroup(ctx context.Context, q store.Querier, scope access.Scope, id string) (Group, error) {
	var a store.Args
	return store.ByID(ctx, q, "group", `SELECT `+groupColumns+` FROM device_groups g`, "g.id", id, &a,
		[]string{groupFilter(scope, &a)}, scanGroup)
}

// writableGroup loads a group in scope for a change. On PostgreSQL it first locks the row, so
// that the membership changes of one group happen one transaction at a time and see its
// current filter (SQLite runs one write transaction at a time anyway).
func (s *Service) writableGroup(ctx context.Context, tx *sql.Tx, scope access.Scope, id string) (Group, error) {
	if err := s.db.LockRow(ctx, tx, "device_groups", id); err != nil {
		return Group{}, fmt.Errorf("lock group %s: %w", id, err)
	}
	return getGroup(ctx, tx, scope, id)
}

func validName(name string) (string, error) {
	n := strings.TrimSpace(name)
	if n == "" || utf8.RuneCountInString(n) > maxNameLen {
		return "", apperr.Invalid("name", "name needs 1 to 200 characters")
	}
	return n, nil
}

func validDescription(d string) (string, error) {
	d = strings.TrimSpace(d)
	if utf8.RuneCountInString(d) > maxDescriptionLen {
		return "", apperr.Invalid("description", "description takes at most 2000 characters")
	}
	return d, nil
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return raw == nil || strings.TrimSpace(string(raw)) == "null"
}

var (
	errNeedsFilter  = apperr.Invalid("filter", "a dynamic group needs a filter")
	errStaticFilter = apperr.Invalid("filter", "a static group has no filter: its members are added by hand")
)

// checkReferences refuses a filter that names a site outside the group's organization or a
// custom field that does not apply to it: such a condition could never match.
func checkReferences(ctx context.Context, q store.Querier, orgID string, f *Filter) error {
	var details []apperr.Detail
	var keys map[string]bool
	var err error
	f.leaves(func(c *Cond) {
		if err != nil {
			return
		}
		switch c.Field {
		case "siteId":
			ids := []string{c.Str}
			if c.Op == opIn {
				ids = ids[:0]
				for _, v := range c.List {
					ids = append(ids, v.(string))
				}
			}
			var n int
			n, err = tenancy.CountSitesOf(ctx, q, orgID, ids)
			if err == nil && n != len(uniq(ids)) {
				details = append(details, apperr.Detail{Field: c.at + ".value", Message: "not a site of the group's organization"})
			}
		case "customField":
			if keys == nil {
				if keys, err = customfields.ApplicableKeys(ctx, q, orgID); err != nil {
					return
				}
			}
			if !keys[c.Key] {
				details = append(details, apperr.Detail{Field: c.at + ".field",
					Message: fmt.Sprintf("no custom field with key %s applies to the group's organization", c.Key)})
			}
		}
	})
	if err != nil {
		return err
	}
	if len(details) > 0 {
		return &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeValidation, Message: "validation failed", Details: details}
	}
	return nil
}

func uniq(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// parseFor validates the filter of a write to a group of the given type and organization;
// it returns nil for a static group.
func parseFor(ctx context.Context, q store.Querier, typ, orgID string, raw json.RawMessage) (*Filter, string, error) {
	if typ == TypeStatic {
		if !isNull(raw) {
			return nil, "", errStaticFilter
		}
		return nil, "", nil
	}
	if isNull(raw) {
		return nil, "", errNeedsFilter
	}
	f, canonical, err := ParseFilter(raw)
	if err != nil {
		return nil, "", err
	}
	return f, canonical, checkReferences(ctx, q, orgID, f)
}

func conflictName(name string) error {
	return apperr.Conflict("the organization already has a group named " + name)
}

// Create adds a group to an organization in scope; a dynamic group's membership is computed
// in the same transaction.
func (s *Service) Create(ctx context.Context, in NewGroup) (Group, error) {
	scope := access.ScopeFrom(ctx)
	name, err := validName(in.Name)
	if err != nil {
		return Group{}, err
	}
	description, err := validDescription(in.Description)
	if err != nil {
		return Group{}, err
	}
	if in.Type != TypeStatic && in.Type != TypeDynamic {
		return Group{}, apperr.Invalid("type", "type is static or dynamic")
	}
	if in.Type == TypeStatic && !isNull(in.Filter) {
		return Group{}, errStaticFilter
	}
	var g Group
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "group"})
		if err != nil {
			return err
		}
		orgID, partnerID := at.OrgID, at.PartnerID
		f, canonical, err := parseFor(ctx, tx, in.Type, orgID, in.Filter)
		if err != nil {
			return err
		}
		var createdBy any
		if p := access.PrincipalFrom(ctx); p != nil {
			createdBy = p.ID
		}
		id, now := store.NewID(), s.clock.Now()
		_, err = tx.ExecContext(ctx, `INSERT INTO device_groups (id, partner_id, org_id, name, description, type, filter, created_by,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
			id, partnerID, orgID, name, description, in.Type, store.NullIfEmpty(canonical), createdBy, now)
		if store.IsUniqueViolation(err) {
			return conflictName(name)
		}
		if err != nil {
			return fmt.Errorf("insert group: %w", err)
		}
		if f != nil {
			err := s.recomputeOrg(ctx, tx, orgID, []dynamicGroup{{ID: id, Filter: f}}, ReasonMatches, ReasonNoLongerMatches, actorFrom(ctx))
			if err != nil {
				return err
			}
		}
		if g, err = getGroup(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.create", ResourceType: "device_group", ResourceID: id,
			ResourceName: g.Name, PartnerID: partnerID, OrgID: orgID, Details: audit.Snapshot(g)})
	})
	if err != nil {
		return g, fmt.Errorf("create group: %w", err)
	}
	return g, nil
}

// Update changes a group in scope. The type never changes; a changed filter recomputes the
// membership in the same transaction, each change logged as "group filter changed".
func (s *Service) Update(ctx context.Context, id string, in GroupUpdate) (Group, error) {
	scope := access.ScopeFrom(ctx)
	var g Group
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.writableGroup(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if in.Type != nil && *in.Type != before.Type {
			return apperr.Invalid("type", "the type cannot change after create; create a new group of the other type instead")
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
			d, err := validDescription(*in.Description)
			if err != nil {
				return err
			}
			ch.Set("description", d)
		}
		var changed *Filter
		if in.Filter != nil {
			f, canonical, err := parseFor(ctx, tx, before.Type, before.OrgID, in.Filter)
			if err != nil {
				return err
			}
			if f != nil && canonical != string(before.Filter) {
				ch.Set("filter", canonical)
				changed = f
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE device_groups SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...)
		if store.IsUniqueViolation(err) {
			return conflictName(strings.TrimSpace(*in.Name))
		}
		if err != nil {
			return fmt.Errorf("update group %s: %w", id, err)
		}
		if changed != nil {
			err := s.recomputeOrg(ctx, tx, before.OrgID, []dynamicGroup{{ID: id, Filter: changed}}, ReasonFilterChanged,
				ReasonFilterChanged, actorFrom(ctx))
			if err != nil {
				return err
			}
		}
		if g, err = getGroup(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		after := g
		after.DeviceCount = before.DeviceCount // membership is logged on its own; the diff is of the group's fields
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.update", ResourceType: "device_group", ResourceID: id,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: audit.Diff(before, after)})
	})
	if err != nil {
		return g, fmt.Errorf("update group: %w", err)
	}
	return g, nil
}

// Delete removes a group in scope with its memberships and membership log.
func (s *Service) Delete(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := s.writableGroup(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_groups WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete group %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.delete", ResourceType: "device_group", ResourceID: id,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: audit.Snapshot(g)})
	})
}
