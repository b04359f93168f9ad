package scripts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service keeps scripts and runs them.
type Service struct {
	db          *store.DB
	logger      *slog.Logger
	clock       clock.Clock
	devices     *devices.Service
	maintenance *maintenance.Service
}

// Deps is what the scripts service is built from.
type Deps struct {
	DB      *store.DB
	Logger  *slog.Logger
	Clock   clock.Clock
	Devices *devices.Service
	// Maintenance holds executions back from devices in a window that suppresses scripts;
	// nil holds none.
	Maintenance *maintenance.Service
}

// New returns the scripts service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), devices: d.Devices, maintenance: d.Maintenance}
}

var errPartnerWide = apperr.Forbidden("partner-wide scripts are managed by callers who reach every organization of the partner")

const scriptColumns = `s.id, s.partner_id, s.org_id, s.name, s.description, s.category_id, cat.name, s.os_types, s.language,
	s.content, s.parameters, s.timeout_seconds, s.run_as, s.exit_code_mapping, s.version, s.source, s.created_by, s.created_at,
	s.updated_at`

const scriptFrom = ` FROM scripts s LEFT JOIN script_categories cat ON cat.id = s.category_id`

func scanScript(row store.Scanner) (Script, error) {
	var sc Script
	var org, catID, catName, mapping, source, by sql.NullString
	var osJSON, params string
	err := row.Scan(&sc.ID, &sc.PartnerID, &org, &sc.Name, &sc.Description, &catID, &catName, &osJSON, &sc.Language,
		&sc.Content, &params, &sc.TimeoutSeconds, &sc.RunAs, &mapping, &sc.Version, &source, &by, &sc.CreatedAt, &sc.UpdatedAt)
	if err != nil {
		return sc, err
	}
	sc.OrgID, sc.CategoryID, sc.Category = store.StringPtr(org), store.StringPtr(catID), store.StringPtr(catName)
	sc.Source, sc.CreatedBy = store.StringPtr(source), store.StringPtr(by)
	if err := decodeDefinition(osJSON, params, mapping, &sc.OSTypes, &sc.Parameters, &sc.ExitCodeSeverityMapping); err != nil {
		return sc, err
	}
	sc.Tags = []string{}
	return sc, nil
}

func decodeDefinition(osJSON, params string, mapping sql.NullString, os *[]string, ps *[]ScriptParameter, m *map[string]*string) error {
	if err := json.Unmarshal([]byte(osJSON), os); err != nil {
		return fmt.Errorf("read os types: %w", err)
	}
	if err := json.Unmarshal([]byte(params), ps); err != nil {
		return fmt.Errorf("read parameters: %w", err)
	}
	if mapping.Valid && mapping.String != "" && mapping.String != "null" {
		if err := json.Unmarshal([]byte(mapping.String), m); err != nil {
			return fmt.Errorf("read exit-code mapping: %w", err)
		}
	}
	return nil
}

// scriptFilter keeps the live scripts (alias s) the scope may see.
func scriptFilter(scope access.Scope, a *store.Args) string {
	return "s.deleted_at IS NULL AND " + tenancy.SharedRowsFilter(scope, a, "s.org_id", "s.partner_id")
}

// withTags fills in the tags of scripts.
func withTags(ctx context.Context, q store.Querier, list []Script) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	at := map[string]int{}
	for i, sc := range list {
		ids[i], at[sc.ID] = sc.ID, i
	}
	var a store.Args
	links, err := store.QueryAll(ctx, q, `SELECT l.script_id, t.name FROM script_tag_links l JOIN script_tags t ON t.id = l.tag_id
		WHERE l.script_id IN `+a.In(ids)+` ORDER BY lower(t.name)`, a.Values(), func(row store.Scanner) ([2]string, error) {
		var l [2]string
		return l, row.Scan(&l[0], &l[1])
	})
	if err != nil {
		return fmt.Errorf("read script tags: %w", err)
	}
	for _, l := range links {
		list[at[l[0]]].Tags = append(list[at[l[0]]].Tags, l[1])
	}
	return nil
}

// ListFilter narrows a list of scripts.
type ListFilter struct {
	OrgID      string
	CategoryID string
	Tag        string
	OSType     string
	Language   string
	Search     string
}

// List lists the scripts in scope by name.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Script, string, *int, error) {
	var a store.Args
	conds := []string{scriptFilter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "(s.org_id = "+a.Add(f.OrgID)+" OR (s.org_id IS NULL AND s.partner_id = "+tenancy.PartnerOfOrg(a.Add(f.OrgID))+"))")
	}
	if f.CategoryID != "" {
		conds = append(conds, "s.category_id = "+a.Add(f.CategoryID))
	}
	if f.Tag != "" {
		conds = append(conds, "EXISTS (SELECT 1 FROM script_tag_links l JOIN script_tags t ON t.id = l.tag_id WHERE l.script_id = s.id AND lower(t.name) = "+
			a.Add(strings.ToLower(f.Tag))+")")
	}
	if f.OSType != "" {
		// The column is JSON text on SQLite and JSONB on PostgreSQL: as text on both.
		conds = append(conds, "CAST(s.os_types AS TEXT) LIKE "+a.Add(`%"`+f.OSType+`"%`))
	}
	if f.Language != "" {
		conds = append(conds, "s.language = "+a.Add(f.Language))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "s.name", "s.description"))
	}
	list, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: scriptColumns, From: scriptFrom, Conds: conds, Args: &a,
		SortKey: "s.name", SortID: "s.id"}, page, scanScript, func(sc Script) (string, string) { return sc.Name, sc.ID })
	if err == nil {
		err = withTags(ctx, s.db, list)
	}
	return list, next, total, err
}

// Get returns a script in scope.
func (s *Service) Get(ctx context.Context, id string) (Script, error) {
	return getScript(ctx, s.db, access.ScopeFrom(ctx), id)
}

func getScript(ctx context.Context, q store.Querier, scope access.Scope, id string) (Script, error) {
	var a store.Args
	sc, err := store.ByID(ctx, q, "script", `SELECT `+scriptColumns+scriptFrom, "s.id", id, &a, []string{scriptFilter(scope, &a)}, scanScript)
	if err != nil {
		return sc, err
	}
	list := []Script{sc}
	err = withTags(ctx, q, list)
	return list[0], err
}

// manageable loads a script in scope that the caller may change: a partner-wide one only
// when the caller reaches every organization of the partner.
func manageable(ctx context.Context, q store.Querier, scope access.Scope, id string) (Script, error) {
	sc, err := getScript(ctx, q, scope, id)
	if err == nil && sc.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
		return sc, errPartnerWide
	}
	return sc, err
}

func nameTaken(name string) error {
	return apperr.ConflictCode("SCRIPT_NAME_TAKEN", "a script named "+name+" already exists in this scope")
}

// Create adds a script.
func (s *Service) Create(ctx context.Context, in ScriptInput) (Script, error) {
	d, err := validateDefinition(in)
	if err != nil {
		return Script{}, err
	}
	return s.create(ctx, in.OrgID, in.PartnerID, d, in.CategoryID, in.Tags, "", in.VersionNote)
}

// create adds a script where the request places it (orgId, or partner-wide), in one
// transaction.
func (s *Service) create(ctx context.Context, orgID, partnerID string, d definition, categoryID string, tags []string,
	source, note string) (Script, error) {
	var sc Script
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), orgID, tenancy.PlaceOptions{Noun: "script", PartnerID: partnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		sc, err = s.insert(ctx, tx, at, d, categoryID, tags, source, note)
		return err
	})
	return sc, err
}

// insert adds a script and its first version at a placement, and audits it.
func (s *Service) insert(ctx context.Context, tx *sql.Tx, at tenancy.Placement, d definition, categoryID string, tags []string,
	source, note string) (Script, error) {
	if err := checkCategory(ctx, tx, at, categoryID); err != nil {
		return Script{}, err
	}
	id, now := store.NewID(), s.clock.Now()
	_, err := tx.ExecContext(ctx, `INSERT INTO scripts (id, partner_id, org_id, name, description, category_id, os_types, language,
		content, parameters, timeout_seconds, run_as, exit_code_mapping, version, source, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 1, $14, $15, $16, $16)`,
		id, at.PartnerID, store.NullIfEmpty(at.OrgID), d.Name, d.Description, store.NullIfEmpty(categoryID), store.EncodeJSON(d.OSTypes),
		d.Language, d.Content, store.EncodeJSON(d.Parameters), d.Timeout, d.RunAs, mappingValue(d.Mapping), store.NullIfEmpty(source), access.ActorName(ctx), now)
	if store.IsUniqueViolation(err) {
		return Script{}, nameTaken(d.Name)
	}
	if err != nil {
		return Script{}, fmt.Errorf("insert script: %w", err)
	}
	if err := setTags(ctx, tx, at, id, tags, now); err != nil {
		return Script{}, err
	}
	if err := insertVersion(ctx, tx, id, 1, d, note, now); err != nil {
		return Script{}, err
	}
	sc, err := getScript(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return Script{}, err
	}
	details := map[string]any{"version": 1, "language": sc.Language}
	if source != "" {
		details["source"] = source
	}
	return sc, audit.Record(ctx, tx, audit.Entry{Action: "script.create", ResourceType: "script", ResourceID: id,
		ResourceName: sc.Name, PartnerID: at.PartnerID, OrgID: at.OrgID, Details: details})
}

func mappingValue(m map[string]*string) any {
	if len(m) == 0 {
		return nil
	}
	return store.EncodeJSON(m)
}

func insertVersion(ctx context.Context, tx *sql.Tx, scriptID string, version int, d definition, note string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO script_versions (id, script_id, version, name, os_types, language, content, parameters,
		timeout_seconds, run_as, exit_code_mapping, note, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		store.NewID(), scriptID, version, d.Name, store.EncodeJSON(d.OSTypes), d.Language, d.Content, store.EncodeJSON(d.Parameters), d.Timeout, d.RunAs,
		mappingValue(d.Mapping), strings.TrimSpace(note), access.ActorName(ctx), now)
	if err != nil {
		return fmt.Errorf("insert script version: %w", err)
	}
	return nil
}

// Update replaces a script's definition (PUT): a new version when its content or how it runs
// changed. The scope (orgId) of a script never changes.
func (s *Service) Update(ctx context.Context, id string, in ScriptInput) (Script, error) {
	if in.OrgID != "" || in.PartnerID != "" {
		return Script{}, apperr.Invalid("orgId", "a script's organization cannot change; create a copy instead")
	}
	d, err := validateDefinition(in)
	if err != nil {
		return Script{}, err
	}
	var sc Script
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageable(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		sc, err = s.save(ctx, tx, before, d, in.CategoryID, in.Tags, in.VersionNote, true)
		return err
	})
	if err != nil {
		return sc, fmt.Errorf("update script: %w", err)
	}
	return sc, nil
}

// save writes a new definition of a script: a new version (always when forced, else only
// when the definition changed), its category and tags.
func (s *Service) save(ctx context.Context, tx *sql.Tx, before Script, d definition, categoryID string, tags []string, note string,
	setMeta bool) (Script, error) {
	at := tenancy.Placement{PartnerID: before.PartnerID, OrgID: store.Deref(before.OrgID)}
	if setMeta {
		if err := checkCategory(ctx, tx, at, categoryID); err != nil {
			return Script{}, err
		}
	} else {
		categoryID = store.Deref(before.CategoryID)
	}
	version, now := before.Version, s.clock.Now()
	if !sameDefinition(before, d) || (!setMeta && note != "") {
		version++
	}
	_, err := tx.ExecContext(ctx, `UPDATE scripts SET name = $1, description = $2, category_id = $3, os_types = $4, language = $5,
		content = $6, parameters = $7, timeout_seconds = $8, run_as = $9, exit_code_mapping = $10, version = $11, updated_at = $12
		WHERE id = $13`, d.Name, d.Description, store.NullIfEmpty(categoryID), store.EncodeJSON(d.OSTypes), d.Language, d.Content,
		store.EncodeJSON(d.Parameters), d.Timeout, d.RunAs, mappingValue(d.Mapping), version, now, before.ID)
	if store.IsUniqueViolation(err) {
		return Script{}, nameTaken(d.Name)
	}
	if err != nil {
		return Script{}, fmt.Errorf("update script %s: %w", before.ID, err)
	}
	if setMeta {
		if err := setTags(ctx, tx, at, before.ID, tags, now); err != nil {
			return Script{}, err
		}
	}
	if version != before.Version {
		if err := insertVersion(ctx, tx, before.ID, version, d, note, now); err != nil {
			return Script{}, err
		}
	}
	after, err := getScript(ctx, tx, access.SystemScope(), before.ID)
	if err != nil {
		return Script{}, err
	}
	return after, audit.Record(ctx, tx, audit.Entry{Action: "script.update", ResourceType: "script", ResourceID: before.ID,
		ResourceName: after.Name, PartnerID: after.PartnerID, OrgID: at.OrgID,
		Details: map[string]any{"version": after.Version, "previousVersion": before.Version}})
}

// sameDefinition tells whether d is what the script already holds (a save that changes only
// the name, description, category or tags makes no version).
func sameDefinition(sc Script, d definition) bool {
	return sc.Content == d.Content && sc.Language == d.Language && sc.RunAs == d.RunAs && sc.TimeoutSeconds == d.Timeout &&
		store.EncodeJSON(sc.OSTypes) == store.EncodeJSON(d.OSTypes) && store.EncodeJSON(sc.Parameters) == store.EncodeJSON(d.Parameters) &&
		store.EncodeJSON(sc.ExitCodeSeverityMapping) == store.EncodeJSON(d.Mapping) && sc.Name == d.Name
}

// Delete removes a script (softly: its executions stay readable). A script with executions
// that have not ended is refused (409).
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		sc, err := manageable(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		var running int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM script_executions e`+devices.CommandJoin("e.command_id")+
			` WHERE e.script_id = $1 AND c.status IN ($2, $3)`, id, devices.CommandQueued, devices.CommandSent).Scan(&running); err != nil {
			return fmt.Errorf("count running executions: %w", err)
		}
		if running > 0 {
			return apperr.ConflictCode("SCRIPT_RUNNING", fmt.Sprintf("%d executions of this script have not ended; cancel them or wait", running))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE scripts SET deleted_at = $1 WHERE id = $2`, s.clock.Now(), id); err != nil {
			return fmt.Errorf("delete script %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "script.delete", ResourceType: "script", ResourceID: id,
			ResourceName: sc.Name, PartnerID: sc.PartnerID, OrgID: store.Deref(sc.OrgID)})
	})
}

// definitionOf is a script's current definition.
func definitionOf(sc Script) definition {
	return definition{Name: sc.Name, Description: sc.Description, OSTypes: sc.OSTypes, Language: sc.Language, Content: sc.Content,
		Parameters: sc.Parameters, Timeout: sc.TimeoutSeconds, RunAs: sc.RunAs, Mapping: sc.ExitCodeSeverityMapping}
}
