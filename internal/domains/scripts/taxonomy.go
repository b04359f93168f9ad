package scripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// ScriptCategory groups scripts; categories nest.
type ScriptCategory struct {
	ID          string    `json:"id" format:"uuid"`
	PartnerID   string    `json:"partnerId" format:"uuid"`
	OrgID       *string   `json:"orgId" doc:"null: a category of the partner as a whole."`
	ParentID    *string   `json:"parentId"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Color       *string   `json:"color" doc:"#RRGGBB."`
	ScriptCount int       `json:"scriptCount" doc:"Live scripts in the category (not counting subcategories)."`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// ScriptCategoryInput creates a category.
type ScriptCategoryInput struct {
	OrgID       string `json:"orgId,omitempty" format:"uuid"`
	PartnerID   string `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of a partner-wide category."`
	ParentID    string `json:"parentId,omitempty" format:"uuid"`
	Name        string `json:"name" minLength:"1" maxLength:"100"`
	Description string `json:"description,omitempty" maxLength:"1000" multiline:"true"`
	Color       string `json:"color,omitempty" doc:"#RRGGBB."`
}

// ScriptCategoryPatch changes a category; absent fields stay.
type ScriptCategoryPatch struct {
	Name        *string `json:"name,omitempty" minLength:"1" maxLength:"100"`
	Description *string `json:"description,omitempty" maxLength:"1000" multiline:"true"`
	Color       *string `json:"color,omitempty" doc:"#RRGGBB; empty clears it."`
	ParentID    *string `json:"parentId,omitempty" doc:"A category of the same scope (or partner-wide); empty makes it top-level."`
}

// ScriptTag labels scripts.
type ScriptTag struct {
	ID          string    `json:"id" format:"uuid"`
	PartnerID   string    `json:"partnerId" format:"uuid"`
	OrgID       *string   `json:"orgId"`
	Name        string    `json:"name"`
	ScriptCount int       `json:"scriptCount"`
	CreatedAt   time.Time `json:"createdAt"`
}

// ScriptTagInput creates a tag.
type ScriptTagInput struct {
	OrgID     string `json:"orgId,omitempty" format:"uuid"`
	PartnerID string `json:"partnerId,omitempty" format:"uuid"`
	Name      string `json:"name" minLength:"1" maxLength:"50"`
}

var colorPattern = regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)

const categoryColumns = `g.id, g.partner_id, g.org_id, g.parent_id, g.name, g.description, g.color,
	(SELECT COUNT(*) FROM scripts s WHERE s.category_id = g.id AND s.deleted_at IS NULL), g.created_at, g.updated_at`

func scanCategory(row store.Scanner) (ScriptCategory, error) {
	var c ScriptCategory
	var org, parent, color sql.NullString
	err := row.Scan(&c.ID, &c.PartnerID, &org, &parent, &c.Name, &c.Description, &color, &c.ScriptCount, &c.CreatedAt, &c.UpdatedAt)
	c.OrgID, c.ParentID, c.Color = store.StringPtr(org), store.StringPtr(parent), store.StringPtr(color)
	return c, err
}

func getCategory(ctx context.Context, q store.Querier, scope access.Scope, id string) (ScriptCategory, error) {
	var a store.Args
	return store.ByID(ctx, q, "category", `SELECT `+categoryColumns+` FROM script_categories g`, "g.id", id, &a,
		[]string{tenancy.SharedRowsFilter(scope, &a, "g.org_id", "g.partner_id")}, scanCategory)
}

// fitsPlacement tells whether a category or tag of (partnerID, orgID) may be used by a row
// placed at at: the same partner, and partner-wide or of the row's own organization.
func fitsPlacement(at tenancy.Placement, partnerID string, orgID *string) bool {
	return partnerID == at.PartnerID && (orgID == nil || *orgID == at.OrgID)
}

// checkCategory checks that a script placed at at may be filed in the category.
func checkCategory(ctx context.Context, tx *sql.Tx, at tenancy.Placement, categoryID string) error {
	if categoryID == "" {
		return nil
	}
	c, err := getCategory(ctx, tx, access.SystemScope(), categoryID)
	if apperr.IsCode(err, apperr.CodeNotFound) || (err == nil && !fitsPlacement(at, c.PartnerID, c.OrgID)) {
		return apperr.Invalid("categoryId", "no such category in the script's scope")
	}
	return err
}

// ListCategories lists a page of the categories in scope by name, case aside.
func (s *Service) ListCategories(ctx context.Context, orgID string, page store.Page) ([]ScriptCategory, string, *int, error) {
	var a store.Args
	conds := []string{tenancy.SharedRowsFilter(access.ScopeFrom(ctx), &a, "g.org_id", "g.partner_id")}
	if orgID != "" {
		conds = append(conds, "(g.org_id = "+a.Add(orgID)+" OR (g.org_id IS NULL AND g.partner_id = "+tenancy.PartnerOfOrg(a.Add(orgID))+"))")
	}
	return listByName(ctx, s.db, store.ListQuery{Columns: categoryColumns, From: " FROM script_categories g", Conds: conds, Args: &a,
		SortKey: "lower(g.name)", SortID: "g.id"}, page, scanCategory, func(c ScriptCategory) string { return c.ID })
}

// named is a row of a list by lower(name), with that key as the database computed it.
type named[T any] struct {
	row T
	key string
}

// listByName pages q, whose SortKey is lower(name), and reads each row's key back from the
// database for the cursor: SQLite's lower() folds ASCII letters only, so a key computed here
// could differ from the one the rows are ordered by.
func listByName[T any](ctx context.Context, db store.Querier, q store.ListQuery, page store.Page, scan func(store.Scanner) (T, error),
	id func(T) string) ([]T, string, *int, error) {
	q.Columns += ", " + q.SortKey
	rows, next, total, err := store.List(ctx, db, q, page, func(row store.Scanner) (named[T], error) {
		var n named[T]
		var err error
		n.row, err = scan(store.ScanAlso{Row: row, Dest: []any{&n.key}})
		return n, err
	}, func(n named[T]) (string, string) { return n.key, id(n.row) })
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]T, len(rows))
	for i, n := range rows {
		out[i] = n.row
	}
	return out, next, total, nil
}

// GetCategory returns a category in scope.
func (s *Service) GetCategory(ctx context.Context, id string) (ScriptCategory, error) {
	return getCategory(ctx, s.db, access.ScopeFrom(ctx), id)
}

func validCategory(name, description, color string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "" || utf8.RuneCountInString(name) > maxCategoryNameLen:
		return "", apperr.Invalid("name", "a category name is 1 to 100 characters")
	case utf8.RuneCountInString(description) > 1000:
		return "", apperr.Invalid("description", "description is longer than 1000 characters")
	case color != "" && !colorPattern.MatchString(color):
		return "", apperr.Invalid("color", "color is #RRGGBB")
	}
	return name, nil
}

// checkParent checks that a category at at may sit under parentID (not itself nor below
// itself, and not deeper than the nesting limit).
func checkParent(ctx context.Context, tx *sql.Tx, at tenancy.Placement, selfID, parentID string) error {
	depth := 1
	for id := parentID; id != ""; depth++ {
		if id == selfID {
			return apperr.Invalid("parentId", "a category cannot sit inside itself")
		}
		if depth > maxCategoryDepth-1 {
			return apperr.Invalid("parentId", fmt.Sprintf("categories nest at most %d deep", maxCategoryDepth))
		}
		p, err := getCategory(ctx, tx, access.SystemScope(), id)
		if apperr.IsCode(err, apperr.CodeNotFound) || (err == nil && id == parentID && !fitsPlacement(at, p.PartnerID, p.OrgID)) {
			return apperr.Invalid("parentId", "no such category in this scope")
		}
		if err != nil {
			return err
		}
		id = store.Deref(p.ParentID)
	}
	return nil
}

func categoryTaken(name string) error {
	return apperr.ConflictCode("CATEGORY_NAME_TAKEN", "a category named "+name+" already exists here")
}

// CreateCategory adds a category.
func (s *Service) CreateCategory(ctx context.Context, in ScriptCategoryInput) (ScriptCategory, error) {
	name, err := validCategory(in.Name, in.Description, in.Color)
	if err != nil {
		return ScriptCategory{}, err
	}
	var c ScriptCategory
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "category", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		id := store.NewID()
		if err := checkParent(ctx, tx, at, id, in.ParentID); err != nil {
			return err
		}
		now := s.clock.Now()
		_, err = tx.ExecContext(ctx, `INSERT INTO script_categories (id, partner_id, org_id, parent_id, name, description, color,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, id, at.PartnerID, store.NullIfEmpty(at.OrgID),
			store.NullIfEmpty(in.ParentID), name, strings.TrimSpace(in.Description), store.NullIfEmpty(in.Color), now)
		if store.IsUniqueViolation(err) {
			return categoryTaken(name)
		}
		if err != nil {
			return fmt.Errorf("insert script category: %w", err)
		}
		if c, err = getCategory(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "script_category.create", ResourceType: "script_category", ResourceID: id,
			ResourceName: name, PartnerID: at.PartnerID, OrgID: at.OrgID})
	})
	if err != nil {
		return c, fmt.Errorf("create script category: %w", err)
	}
	return c, nil
}

// manageableCategory loads a category in scope that the caller may change.
func manageableCategory(ctx context.Context, tx *sql.Tx, id string) (ScriptCategory, error) {
	scope := access.ScopeFrom(ctx)
	c, err := getCategory(ctx, tx, scope, id)
	if err == nil && c.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
		return c, errPartnerWide
	}
	return c, err
}

// UpdateCategory changes a category.
func (s *Service) UpdateCategory(ctx context.Context, id string, in ScriptCategoryPatch) (ScriptCategory, error) {
	var c ScriptCategory
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageableCategory(ctx, tx, id)
		if err != nil {
			return err
		}
		name, description, color, parent := before.Name, before.Description, store.Deref(before.Color), store.Deref(before.ParentID)
		if in.Name != nil {
			name = *in.Name
		}
		if in.Description != nil {
			description = *in.Description
		}
		if in.Color != nil {
			color = *in.Color
		}
		if name, err = validCategory(name, description, color); err != nil {
			return err
		}
		if in.ParentID != nil {
			parent = *in.ParentID
			at := tenancy.Placement{PartnerID: before.PartnerID, OrgID: store.Deref(before.OrgID)}
			if err := checkParent(ctx, tx, at, id, parent); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE script_categories SET name = $1, description = $2, color = $3, parent_id = $4, updated_at = $5
			WHERE id = $6`, name, strings.TrimSpace(description), store.NullIfEmpty(color), store.NullIfEmpty(parent), s.clock.Now(), id)
		if store.IsUniqueViolation(err) {
			return categoryTaken(name)
		}
		if err != nil {
			return fmt.Errorf("update script category %s: %w", id, err)
		}
		if c, err = getCategory(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "script_category.update", ResourceType: "script_category", ResourceID: id,
			ResourceName: c.Name, PartnerID: c.PartnerID, OrgID: store.Deref(c.OrgID)})
	})
	if err != nil {
		return c, fmt.Errorf("update script category: %w", err)
	}
	return c, nil
}

// DeleteCategory removes a category without subcategories (409 otherwise); its scripts
// become uncategorised.
func (s *Service) DeleteCategory(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		c, err := manageableCategory(ctx, tx, id)
		if err != nil {
			return err
		}
		var children int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM script_categories WHERE parent_id = $1`, id).Scan(&children); err != nil {
			return fmt.Errorf("count subcategories of script category %s: %w", id, err)
		}
		if children > 0 {
			return apperr.ConflictCode("CATEGORY_HAS_CHILDREN", "move or delete its subcategories first")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE scripts SET category_id = NULL WHERE category_id = $1`, id); err != nil {
			return fmt.Errorf("uncategorise the scripts of script category %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM script_categories WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete script category %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "script_category.delete", ResourceType: "script_category", ResourceID: id,
			ResourceName: c.Name, PartnerID: c.PartnerID, OrgID: store.Deref(c.OrgID)})
	})
}

const tagColumns = `t.id, t.partner_id, t.org_id, t.name,
	(SELECT COUNT(*) FROM script_tag_links l JOIN scripts s ON s.id = l.script_id WHERE l.tag_id = t.id AND s.deleted_at IS NULL), t.created_at`

func scanTag(row store.Scanner) (ScriptTag, error) {
	var t ScriptTag
	var org sql.NullString
	err := row.Scan(&t.ID, &t.PartnerID, &org, &t.Name, &t.ScriptCount, &t.CreatedAt)
	t.OrgID = store.StringPtr(org)
	return t, err
}

// ListTags lists a page of the tags in scope by name, case aside.
func (s *Service) ListTags(ctx context.Context, orgID string, page store.Page) ([]ScriptTag, string, *int, error) {
	var a store.Args
	conds := []string{tenancy.SharedRowsFilter(access.ScopeFrom(ctx), &a, "t.org_id", "t.partner_id")}
	if orgID != "" {
		conds = append(conds, "(t.org_id = "+a.Add(orgID)+" OR (t.org_id IS NULL AND t.partner_id = "+tenancy.PartnerOfOrg(a.Add(orgID))+"))")
	}
	return listByName(ctx, s.db, store.ListQuery{Columns: tagColumns, From: " FROM script_tags t", Conds: conds, Args: &a,
		SortKey: "lower(t.name)", SortID: "t.id"}, page, scanTag, func(t ScriptTag) string { return t.ID })
}

func validTagName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 50 {
		return "", apperr.Invalid("tags", "a tag is 1 to 50 characters")
	}
	return name, nil
}

// CreateTag adds a tag.
func (s *Service) CreateTag(ctx context.Context, in ScriptTagInput) (ScriptTag, error) {
	name, err := validTagName(in.Name)
	if err != nil {
		return ScriptTag{}, apperr.Invalid("name", "a tag is 1 to 50 characters")
	}
	var t ScriptTag
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "tag", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		id, err := insertTag(ctx, tx, at, name, s.clock.Now())
		if err != nil {
			return err
		}
		if t, err = scanTag(tx.QueryRowContext(ctx, `SELECT `+tagColumns+` FROM script_tags t WHERE t.id = $1`, id)); err != nil {
			return fmt.Errorf("load script tag %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "script_tag.create", ResourceType: "script_tag", ResourceID: id,
			ResourceName: name, PartnerID: at.PartnerID, OrgID: at.OrgID})
	})
	if err != nil {
		return t, fmt.Errorf("create script tag: %w", err)
	}
	return t, nil
}

// insertTag adds a tag at the placement, created at now.
func insertTag(ctx context.Context, tx *sql.Tx, at tenancy.Placement, name string, now time.Time) (string, error) {
	id := store.NewID()
	_, err := tx.ExecContext(ctx, `INSERT INTO script_tags (id, partner_id, org_id, name, created_at) VALUES ($1, $2, $3, $4, $5)`,
		id, at.PartnerID, store.NullIfEmpty(at.OrgID), name, now)
	if store.IsUniqueViolation(err) {
		return "", apperr.ConflictCode("TAG_NAME_TAKEN", "a tag named "+name+" already exists here")
	}
	if err != nil {
		return "", fmt.Errorf("insert script tag: %w", err)
	}
	return id, nil
}

// DeleteTag removes a tag from every script.
func (s *Service) DeleteTag(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		scope := access.ScopeFrom(ctx)
		var a store.Args
		t, err := store.ByID(ctx, tx, "tag", `SELECT `+tagColumns+` FROM script_tags t`, "t.id", id, &a,
			[]string{tenancy.SharedRowsFilter(scope, &a, "t.org_id", "t.partner_id")}, scanTag)
		if err != nil {
			return err
		}
		if t.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
			return errPartnerWide
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM script_tag_links WHERE tag_id = $1`, id); err != nil {
			return fmt.Errorf("untag the scripts of script tag %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM script_tags WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete script tag %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "script_tag.delete", ResourceType: "script_tag", ResourceID: id,
			ResourceName: t.Name, PartnerID: t.PartnerID, OrgID: store.Deref(t.OrgID)})
	})
}

// setTags replaces a script's tags with the named ones, resolved in the script's scope (its
// organization's tags first, then the partner's) and created in it at now when unknown.
func setTags(ctx context.Context, tx *sql.Tx, at tenancy.Placement, scriptID string, names []string, now time.Time) error {
	if len(names) > maxTagsPerScript {
		return apperr.Invalid("tags", fmt.Sprintf("at most %d tags", maxTagsPerScript))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM script_tag_links WHERE script_id = $1`, scriptID); err != nil {
		return fmt.Errorf("untag script %s: %w", scriptID, err)
	}
	seen := map[string]bool{}
	for _, raw := range names {
		name, err := validTagName(raw)
		if err != nil {
			return err
		}
		if seen[strings.ToLower(name)] {
			continue
		}
		seen[strings.ToLower(name)] = true
		var id string
		err = tx.QueryRowContext(ctx, `SELECT id FROM script_tags WHERE partner_id = $1 AND lower(name) = $2
			AND (org_id IS NULL OR org_id = $3) ORDER BY org_id IS NULL LIMIT 1`, at.PartnerID, strings.ToLower(name),
			store.NullIfEmpty(at.OrgID)).Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if id, err = insertTag(ctx, tx, at, name, now); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("find script tag %q: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO script_tag_links (script_id, tag_id) VALUES ($1, $2)`, scriptID, id); err != nil {
			return fmt.Errorf("tag script: %w", err)
		}
	}
	return nil
}
