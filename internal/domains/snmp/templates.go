package snmp

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// SNMPTemplate is a set of OIDs to poll: built-in (read-only, of no organization) or custom.
type SNMPTemplate struct {
	ID          string            `json:"id"`
	PartnerID   *string           `json:"partnerId" doc:"null for a built-in template."`
	OrgID       *string           `json:"orgId" doc:"null for a built-in template."`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	BuiltIn     bool              `json:"builtIn"`
	OIDs        []SNMPTemplateOID `json:"oids"`
	CreatedBy   *string           `json:"createdBy"`
	CreatedAt   *time.Time        `json:"createdAt" doc:"null for a built-in template."`
	UpdatedAt   *time.Time        `json:"updatedAt" doc:"null for a built-in template."`
}

// SNMPTemplateOID is one OID of a template: its numeric OID, a short unique name, a label
// to show, a unit and its type (counter values are shown as rates per second).
type SNMPTemplateOID struct {
	OID   string `json:"oid" maxLength:"600"`
	Name  string `json:"name" maxLength:"100"`
	Label string `json:"label,omitempty" maxLength:"200"`
	Unit  string `json:"unit,omitempty" maxLength:"40"`
	Type  string `json:"type" enum:"gauge,counter,integer,string,timeticks,oid,ip"`
}

// SNMPTemplateInput creates a custom template.
type SNMPTemplateInput struct {
	OrgID       string            `json:"orgId,omitempty" format:"uuid" doc:"The organization; an organization caller's own when omitted."`
	Name        string            `json:"name" minLength:"1" maxLength:"200"`
	Description string            `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	OIDs        []SNMPTemplateOID `json:"oids" minItems:"1" maxItems:"200"`
}

// SNMPTemplateUpdate changes a custom template: absent fields stay; oids replaces the list.
type SNMPTemplateUpdate struct {
	Name        *string           `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Description *string           `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	OIDs        []SNMPTemplateOID `json:"oids,omitempty" maxItems:"200"`
}

// checkTemplateOIDs validates and normalizes a template's OIDs.
func checkTemplateOIDs(c *checker, oids []SNMPTemplateOID) {
	if len(oids) == 0 || len(oids) > MaxTemplateOIDs {
		c.fail("oids", "1 to %d OIDs", MaxTemplateOIDs)
	}
	seenOID, seenName := map[string]int{}, map[string]int{}
	for i := range oids {
		o := &oids[i]
		field := fmt.Sprintf("oids[%d]", i)
		oid, why := validOID(o.OID)
		if why != "" {
			c.fail(field+".oid", "%s", why)
		}
		o.OID = oid
		if j, dup := seenOID[oid]; dup && why == "" {
			c.fail(field+".oid", "the same OID as oids[%d]", j)
		}
		seenOID[oid] = i
		o.Name, o.Label, o.Unit = strings.TrimSpace(o.Name), strings.TrimSpace(o.Label), strings.TrimSpace(o.Unit)
		if o.Name == "" || len(o.Name) > 100 {
			c.fail(field+".name", "1 to 100 characters")
		}
		if j, dup := seenName[o.Name]; dup {
			c.fail(field+".name", "the same name as oids[%d]", j)
		}
		seenName[o.Name] = i
		if o.Label == "" {
			o.Label = o.Name
		}
		if !oneOf(o.Type, oidTypes) {
			c.fail(field+".type", "one of %s", strings.Join(oidTypes, ", "))
		}
	}
}

const templateColumns = `t.id, t.partner_id, t.org_id, t.name, t.description, t.created_by, t.created_at, t.updated_at`

func scanTemplate(row store.Scanner) (SNMPTemplate, error) {
	var t SNMPTemplate
	var partner, org string
	var by sql.NullString
	var created, updated time.Time
	if err := row.Scan(&t.ID, &partner, &org, &t.Name, &t.Description, &by, &created, &updated); err != nil {
		return t, err
	}
	created, updated = created.UTC(), updated.UTC()
	t.PartnerID, t.OrgID, t.CreatedBy, t.CreatedAt, t.UpdatedAt = &partner, &org, store.StringPtr(by), &created, &updated
	return t, nil
}

func templateFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "t.org_id", "t.partner_id"), tenancy.LiveOrg("t.org_id")}
}

// loadOIDs fills the OIDs of custom templates.
func loadOIDs(ctx context.Context, q store.Querier, ts []SNMPTemplate) error {
	if len(ts) == 0 {
		return nil
	}
	ids := make([]string, len(ts))
	at := map[string]int{}
	for i, t := range ts {
		ids[i], at[t.ID] = t.ID, i
		ts[i].OIDs = []SNMPTemplateOID{}
	}
	var a store.Args
	type templateOID struct {
		template string
		SNMPTemplateOID
	}
	oids, err := store.QueryAll(ctx, q, `SELECT template_id, oid, name, label, unit, type FROM snmp_template_oids WHERE template_id IN `+
		a.In(ids)+` ORDER BY template_id, position`, a.Values(), func(row store.Scanner) (templateOID, error) {
		var o templateOID
		return o, row.Scan(&o.template, &o.OID, &o.Name, &o.Label, &o.Unit, &o.Type)
	})
	if err != nil {
		return fmt.Errorf("load template OIDs: %w", err)
	}
	for _, o := range oids {
		ts[at[o.template]].OIDs = append(ts[at[o.template]].OIDs, o.SNMPTemplateOID)
	}
	return nil
}

func (s *Service) getTemplate(ctx context.Context, q store.Querier, scope access.Scope, id string) (SNMPTemplate, error) {
	if t, ok := builtIn(id); ok {
		return t, nil
	}
	var a store.Args
	t, err := store.ByID(ctx, q, "SNMP template", `SELECT `+templateColumns+` FROM snmp_templates t`, "t.id", id, &a,
		templateFilter(scope, &a), scanTemplate)
	if err != nil {
		return t, err
	}
	ts := []SNMPTemplate{t}
	err = loadOIDs(ctx, q, ts)
	return ts[0], err
}

// GetTemplate returns a built-in template or a custom one in scope.
func (s *Service) GetTemplate(ctx context.Context, id string) (SNMPTemplate, error) {
	return s.getTemplate(ctx, s.db, access.ScopeFrom(ctx), id)
}

// TemplateFilter narrows a list of templates.
type TemplateFilter struct {
	OrgID   string
	BuiltIn *bool
}

// ListTemplates lists the built-in templates (on the first page) and the custom templates in
// scope, newest first.
func (s *Service) ListTemplates(ctx context.Context, f TemplateFilter, page store.Page) ([]SNMPTemplate, string, *int, error) {
	var out []SNMPTemplate
	if page.Cursor == "" && page.Offset() == 0 && (f.BuiltIn == nil || *f.BuiltIn) {
		out = append(out, builtIns...)
	}
	if f.BuiltIn != nil && *f.BuiltIn {
		return out, "", nil, nil
	}
	var a store.Args
	conds := templateFilter(access.ScopeFrom(ctx), &a)
	if f.OrgID != "" {
		conds = append(conds, "t.org_id = "+a.Add(f.OrgID))
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: templateColumns, From: " FROM snmp_templates t", Conds: conds,
		Args: &a, SortKey: "t.id", SortID: "t.id", Desc: true}, page, scanTemplate, func(t SNMPTemplate) (string, string) { return t.ID, t.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list SNMP templates: %w", err)
	}
	if err := loadOIDs(ctx, s.db, rows); err != nil {
		return nil, "", nil, err
	}
	return append(out, rows...), next, total, nil
}

func insertOIDs(ctx context.Context, tx *sql.Tx, t SNMPTemplate, oids []SNMPTemplateOID) error {
	for i, o := range oids {
		if _, err := tx.ExecContext(ctx, `INSERT INTO snmp_template_oids (template_id, position, partner_id, org_id, oid, name, label, unit,
			type) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, t.ID, i, *t.PartnerID, *t.OrgID, o.OID, o.Name, o.Label, o.Unit, o.Type); err != nil {
			return fmt.Errorf("insert template OID: %w", err)
		}
	}
	return nil
}

func templateNameTaken(err error) error {
	if store.IsUniqueViolation(err) {
		return apperr.Conflict("the organization has a template of this name already")
	}
	return fmt.Errorf("write SNMP template: %w", err)
}

// CreateTemplate adds a custom template.
func (s *Service) CreateTemplate(ctx context.Context, in SNMPTemplateInput) (SNMPTemplate, error) {
	var c checker
	name := strings.TrimSpace(in.Name)
	if name == "" || len(name) > 200 {
		c.fail("name", "1 to 200 characters")
	}
	checkTemplateOIDs(&c, in.OIDs)
	if err := c.err(); err != nil {
		return SNMPTemplate{}, err
	}
	var t SNMPTemplate
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "SNMP template"})
		if err != nil {
			return fmt.Errorf("place SNMP template: %w", err)
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO snmp_templates (id, partner_id, org_id, name, description, created_by, created_at,
			updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`, id, at.PartnerID, at.OrgID, name, in.Description, access.ActorName(ctx), now); err != nil {
			return templateNameTaken(err)
		}
		t = SNMPTemplate{ID: id, PartnerID: &at.PartnerID, OrgID: &at.OrgID}
		if err := insertOIDs(ctx, tx, t, in.OIDs); err != nil {
			return err
		}
		if t, err = s.getTemplate(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_template.create", ResourceType: "snmp_template", ResourceID: id,
			ResourceName: name, PartnerID: at.PartnerID, OrgID: at.OrgID, Details: map[string]any{"oids": len(in.OIDs)}})
	})
	if err != nil {
		return t, fmt.Errorf("create SNMP template: %w", err)
	}
	return t, nil
}

func builtInRefusal() error {
	return apperr.ForbiddenCode(CodeBuiltInTemplate, "built-in templates are read-only: create a custom template from its OIDs instead")
}

// UpdateTemplate changes a custom template; built-ins answer 403 BUILT_IN_TEMPLATE.
func (s *Service) UpdateTemplate(ctx context.Context, id string, in SNMPTemplateUpdate) (SNMPTemplate, error) {
	if _, ok := builtIn(id); ok {
		return SNMPTemplate{}, builtInRefusal()
	}
	var t SNMPTemplate
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getTemplate(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		var c checker
		ch := store.NewChanges(s.now())
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			if name == "" || len(name) > 200 {
				c.fail("name", "1 to 200 characters")
			}
			ch.Set("name", name)
		}
		if in.Description != nil {
			ch.Set("description", *in.Description)
		}
		if in.OIDs != nil {
			checkTemplateOIDs(&c, in.OIDs)
		}
		if err := c.err(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE snmp_templates SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return templateNameTaken(err)
		}
		if in.OIDs != nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM snmp_template_oids WHERE template_id = $1`, id); err != nil {
				return fmt.Errorf("replace template OIDs: %w", err)
			}
			if err := insertOIDs(ctx, tx, before, in.OIDs); err != nil {
				return err
			}
		}
		if t, err = s.getTemplate(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_template.update", ResourceType: "snmp_template", ResourceID: id,
			ResourceName: t.Name, PartnerID: *t.PartnerID, OrgID: *t.OrgID, Details: map[string]any{"oids": len(t.OIDs)}})
	})
	if err != nil {
		return t, fmt.Errorf("update SNMP template: %w", err)
	}
	return t, nil
}

// DeleteTemplate removes a custom template no device uses (409 TEMPLATE_IN_USE otherwise);
// built-ins answer 403 BUILT_IN_TEMPLATE.
func (s *Service) DeleteTemplate(ctx context.Context, id string) error {
	if _, ok := builtIn(id); ok {
		return builtInRefusal()
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		t, err := s.getTemplate(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM snmp_templates WHERE id = $1 AND device_count = 0`, id)
		if err != nil {
			return fmt.Errorf("delete SNMP template: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("delete SNMP template: %w", err)
		} else if n == 0 {
			return apperr.ConflictCode(CodeTemplateInUse, "SNMP devices use this template: move them to another template first")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM snmp_template_oids WHERE template_id = $1`, id); err != nil {
			return fmt.Errorf("delete template OIDs: %w", err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_template.delete", ResourceType: "snmp_template", ResourceID: id,
			ResourceName: t.Name, PartnerID: *t.PartnerID, OrgID: *t.OrgID})
	})
}

// useTemplate checks that id is a built-in template or a custom one of the organization and
// counts a device more (delta 1) or less (-1) on a custom one. The count's row update meets
// a concurrent delete on the row, so a template in use is never deleted.
func (s *Service) useTemplate(ctx context.Context, tx *sql.Tx, orgID, id string, delta int) error {
	if _, ok := builtIn(id); ok {
		return nil
	}
	var res sql.Result
	var err error
	if store.ValidID(id) {
		res, err = tx.ExecContext(ctx, `UPDATE snmp_templates SET device_count = device_count + $1 WHERE id = $2 AND org_id = $3`, delta, id, orgID)
		if err != nil {
			return fmt.Errorf("count template use: %w", err)
		}
	}
	if res == nil {
		return apperr.Invalid("templateId", "no such template: name a built-in template or one of the organization")
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("count template use: %w", err)
	} else if n == 0 && delta > 0 {
		return apperr.Invalid("templateId", "no such template: name a built-in template or one of the organization")
	}
	return nil
}

// templateOIDs returns the OIDs a device polls.
func (s *Service) templateOIDs(ctx context.Context, q store.Querier, id string) ([]SNMPTemplateOID, error) {
	t, err := s.getTemplate(ctx, q, access.SystemScope(), id)
	return t.OIDs, err
}

// SNMPBrowseOID is an OID the browser found: from the catalog or a custom template.
type SNMPBrowseOID struct {
	SNMPCatalogOID
	Source     string  `json:"source" enum:"catalog,template"`
	TemplateID *string `json:"templateId" doc:"The custom template that names the OID."`
}

// MaxBrowse bounds the OIDs one browse returns.
const MaxBrowse = 500

// Browse searches the catalog and the custom templates in scope: query matches the OID, name,
// label or MIB (case-insensitive), prefix keeps OIDs under a numeric prefix. Catalog first,
// in OID order; at most limit.
func (s *Service) Browse(ctx context.Context, query, prefix string, limit int) ([]SNMPBrowseOID, error) {
	query = strings.ToLower(strings.TrimSpace(query))
	if prefix != "" {
		p, why := validOID(prefix)
		if why != "" && strings.Count(p, ".") > 0 {
			return nil, apperr.Invalid("prefix", why)
		}
		prefix = p
	}
	under := func(oid string) bool { return prefix == "" || oid == prefix || strings.HasPrefix(oid, prefix+".") }
	matches := func(fields ...string) bool {
		if query == "" {
			return true
		}
		for _, f := range fields {
			if strings.Contains(strings.ToLower(f), query) {
				return true
			}
		}
		return false
	}
	out := []SNMPBrowseOID{}
	for _, c := range catalog {
		if under(c.OID) && matches(c.OID, c.Name, c.Label, c.MIB) {
			out = append(out, SNMPBrowseOID{SNMPCatalogOID: c, Source: "catalog"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return oidLess(out[i].OID, out[j].OID) })
	if len(out) >= limit {
		return out[:limit], nil
	}
	var a store.Args
	conds := templateFilter(access.ScopeFrom(ctx), &a)
	if prefix != "" {
		conds = append(conds, "(o.oid = "+a.Add(prefix)+" OR o.oid LIKE "+a.Add(prefix+".%")+")")
	}
	if query != "" {
		conds = append(conds, store.Contains(&a, query, "o.oid", "o.name", "o.label"))
	}
	found, err := store.QueryAll(ctx, s.db, `SELECT o.oid, o.name, o.label, o.unit, o.type, t.id FROM snmp_template_oids o
		JOIN snmp_templates t ON t.id = o.template_id WHERE `+store.Where(conds)+` ORDER BY o.oid, t.id LIMIT `+
		a.Add(limit-len(out)), a.Values(), func(row store.Scanner) (SNMPBrowseOID, error) {
		b := SNMPBrowseOID{Source: "template"}
		var tid string
		if err := row.Scan(&b.OID, &b.Name, &b.Label, &b.Unit, &b.Type, &tid); err != nil {
			return b, err
		}
		b.TemplateID = &tid
		return b, nil
	})
	if err != nil {
		return nil, fmt.Errorf("browse template OIDs: %w", err)
	}
	return append(out, found...), nil
}

// oidLess orders OIDs arc by arc.
func oidLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] != bs[i] {
			if len(as[i]) != len(bs[i]) {
				return len(as[i]) < len(bs[i])
			}
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

// SNMPOIDCheck is the verdict on one OID of a validation.
type SNMPOIDCheck struct {
	OID        string   `json:"oid" doc:"As sent."`
	Normalized string   `json:"normalized" doc:"Without a leading dot."`
	Valid      bool     `json:"valid"`
	Errors     []string `json:"errors"`
	Warnings   []string `json:"warnings"`
	Name       *string  `json:"name" doc:"The catalog's or a custom template's name of the OID, when known."`
}

// SNMPValidation is the answer of oids/validate.
type SNMPValidation struct {
	Results    []SNMPOIDCheck `json:"results"`
	Duplicates []string       `json:"duplicates" doc:"Normalized OIDs sent more than once."`
	Valid      bool           `json:"valid" doc:"Every OID is valid and none is repeated."`
}

// ValidateOIDs checks OIDs: numeric dotted form (errors), repetition (an error on the second
// and later), and whether the catalog or a custom template in scope knows it (a warning
// when not).
func (s *Service) ValidateOIDs(ctx context.Context, oids []string) (SNMPValidation, error) {
	if len(oids) == 0 || len(oids) > MaxValidateOIDs {
		return SNMPValidation{}, apperr.Invalid("oids", fmt.Sprintf("1 to %d OIDs", MaxValidateOIDs))
	}
	out := SNMPValidation{Results: make([]SNMPOIDCheck, len(oids)), Duplicates: []string{}, Valid: true}
	seen, reported := map[string]int{}, map[string]bool{}
	var custom []string
	for i, raw := range oids {
		r := SNMPOIDCheck{OID: raw, Errors: []string{}, Warnings: []string{}}
		oid, why := validOID(raw)
		r.Normalized = oid
		if why != "" {
			r.Errors = append(r.Errors, why)
		}
		if n := seen[oid]; n > 0 {
			r.Errors = append(r.Errors, fmt.Sprintf("a duplicate of oids[%d]", n-1))
			if !reported[oid] {
				reported[oid] = true
				out.Duplicates = append(out.Duplicates, oid)
			}
		} else {
			seen[oid] = i + 1
		}
		if why == "" {
			if c, ok := lookupCatalog(oid); ok {
				r.Name = &c.Name
			} else if c, ok := catalogByOID[oid]; ok && c.Column {
				r.Name = &c.Name
				r.Warnings = append(r.Warnings, "a table column: poll one of its instances, such as "+oid+".1")
			} else {
				custom = append(custom, oid)
			}
		}
		r.Valid = len(r.Errors) == 0
		out.Valid = out.Valid && r.Valid
		out.Results[i] = r
	}
	known, err := s.customNames(ctx, custom)
	if err != nil {
		return out, err
	}
	for i := range out.Results {
		r := &out.Results[i]
		if r.Name != nil || len(r.Errors) > 0 {
			continue
		}
		if name, ok := known[r.Normalized]; ok {
			r.Name = &name
		} else {
			r.Warnings = append(r.Warnings, "unknown: neither the built-in catalog nor a template names it")
		}
	}
	return out, nil
}

// customNames returns the names custom templates in scope give the OIDs.
func (s *Service) customNames(ctx context.Context, oids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(oids) == 0 {
		return out, nil
	}
	var a store.Args
	conds := append(templateFilter(access.ScopeFrom(ctx), &a), "o.oid IN "+a.In(oids))
	type named struct{ oid, name string }
	names, err := store.QueryAll(ctx, s.db, `SELECT o.oid, o.name FROM snmp_template_oids o JOIN snmp_templates t ON t.id = o.template_id
		WHERE `+store.Where(conds), a.Values(), func(row store.Scanner) (named, error) {
		var n named
		return n, row.Scan(&n.oid, &n.name)
	})
	if err != nil {
		return nil, fmt.Errorf("look up template OIDs: %w", err)
	}
	for _, n := range names {
		out[n.oid] = n.name
	}
	return out, nil
}
