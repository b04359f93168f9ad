package scripts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// Bundle limits.
const (
	BundleVersion     = 1
	MaxBundleScripts  = 200
	MaxBundleRequest  = 20 << 20
	availabilityOrg   = "org"
	availabilityWide  = "partner"
	modeSkip          = "skip"
	modeRename        = "rename"
	modeNewVersion    = "new-version"
	entryNew          = "new"
	entryNameConflict = "name-conflict"
	entryInvalid      = "invalid"
)

// BundleEntry is a script in a bundle: its definition and how it is filed, nothing of the
// tenant it came from.
type BundleEntry struct {
	Name                    string             `json:"name"`
	Description             string             `json:"description,omitempty"`
	Category                string             `json:"category,omitempty"`
	Tags                    []string           `json:"tags,omitempty"`
	OSTypes                 []string           `json:"osTypes"`
	Language                string             `json:"language"`
	Content                 string             `json:"content"`
	Parameters              []ScriptParameter  `json:"parameters,omitempty"`
	RunAs                   string             `json:"runAs,omitempty"`
	TimeoutSeconds          int                `json:"timeoutSeconds,omitempty"`
	ExitCodeSeverityMapping map[string]*string `json:"exitCodeSeverityMapping,omitempty"`
}

// ScriptBundle carries scripts between tenants and installations.
type ScriptBundle struct {
	BundleVersion int           `json:"bundleVersion"`
	ExportedAt    time.Time     `json:"exportedAt"`
	Scripts       []BundleEntry `json:"scripts"`
}

// BundleRequest is the body of a bundle preview or import.
type BundleRequest struct {
	ScriptBundle json.RawMessage `json:"bundle" doc:"A bundle as GET /scripts/bundle/export makes it: {bundleVersion: 1, scripts: [...]}."`
	Availability string          `json:"availability,omitempty" enum:"org,partner" doc:"org (default): the scripts belong to orgId; partner: to the whole partner (needs access to every organization)."`
	OrgID        string          `json:"orgId,omitempty" format:"uuid" doc:"The organization of availability org (an organization caller's own by default)."`
	PartnerID    string          `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of availability partner."`
	Mode         string          `json:"mode,omitempty" enum:"skip,rename,new-version" doc:"Import only: what to do with a name already taken (default skip)."`
}

// BundlePreviewEntry is what an import would do with one entry.
type BundlePreviewEntry struct {
	Status string `json:"status" enum:"new,name-conflict,invalid"`
	Name   string `json:"name"`
	Error  string `json:"error,omitempty"`
}

// BundlePreview is the answer of a bundle preview.
type BundlePreview struct {
	Entries []BundlePreviewEntry `json:"entries"`
}

// BundleImportError names an entry that was not imported.
type BundleImportError struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Error string `json:"error"`
}

// BundleImportResult counts what an import did: imported under their own names, imported under a
// new name (rename), saved as a new version of the script of that name (new-version), skipped
// (a name taken in skip mode), and refused entries.
type BundleImportResult struct {
	Imported  int                 `json:"imported"`
	Skipped   int                 `json:"skipped"`
	Renamed   int                 `json:"renamed"`
	Versioned int                 `json:"versioned"`
	Errors    []BundleImportError `json:"errors"`
	SHA256    string              `json:"sha256" doc:"The bundle's SHA-256, as audited with every imported script."`
}

// parseBundle reads a bundle's envelope; entries stay raw so that one bad entry is reported
// on its own while the others import.
func parseBundle(raw []byte) ([]json.RawMessage, error) {
	var b struct {
		BundleVersion *int              `json:"bundleVersion"`
		Scripts       []json.RawMessage `json:"scripts"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&b); err != nil {
		return nil, apperr.Invalid("bundle", "the bundle is not a JSON object: "+err.Error())
	}
	if b.BundleVersion == nil || *b.BundleVersion != BundleVersion {
		return nil, apperr.Invalid("bundle.bundleVersion", "bundleVersion must be 1")
	}
	if b.Scripts == nil {
		return nil, apperr.Invalid("bundle.scripts", "the bundle has no scripts array")
	}
	if len(b.Scripts) > MaxBundleScripts {
		return nil, apperr.Invalid("bundle.scripts", fmt.Sprintf("a bundle holds at most %d scripts", MaxBundleScripts))
	}
	return b.Scripts, nil
}

// decodeEntry reads and validates one entry. Fields other than BundleEntry's (IDs, tenancy,
// system flags) are dropped: a bundle cannot say where a script belongs or what it is.
func decodeEntry(raw json.RawMessage) (BundleEntry, definition, error) {
	var e BundleEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, definition{}, fmt.Errorf("the entry is not a script: %v", err)
	}
	if httpapi.HasControl(e.Name+e.Category+strings.Join(e.Tags, ""), false) || httpapi.HasControl(e.Description+e.Content, true) {
		return e, definition{}, errors.New("the entry holds control characters (only its content and description may hold line breaks and tabs)")
	}
	if len(e.Content) > MaxContentBytes {
		return e, definition{}, errors.New("content is larger than 256 KB")
	}
	d, err := validateDefinition(ScriptInput{Name: e.Name, Description: e.Description, OSTypes: e.OSTypes, Language: e.Language,
		Content: e.Content, Parameters: e.Parameters, TimeoutSeconds: e.TimeoutSeconds, RunAs: e.RunAs,
		ExitCodeSeverityMapping: e.ExitCodeSeverityMapping})
	if err != nil {
		return e, definition{}, errors.New(describe(err))
	}
	if len(e.Tags) > maxTagsPerScript {
		return e, definition{}, fmt.Errorf("at most %d tags", maxTagsPerScript)
	}
	for _, t := range e.Tags {
		if _, err := validTagName(t); err != nil {
			return e, definition{}, errors.New("a tag is 1 to 50 characters")
		}
	}
	if c := strings.TrimSpace(e.Category); len(c) > maxCategoryNameLen {
		return e, definition{}, errors.New("a category name is 1 to 100 characters")
	}
	return e, d, nil
}

// describe joins a validation error's details into one line.
func describe(err error) string {
	ae, ok := apperr.As(err)
	if !ok || len(ae.Details) == 0 {
		return err.Error()
	}
	parts := make([]string, len(ae.Details))
	for i, d := range ae.Details {
		parts[i] = d.Field + ": " + d.Message
	}
	return strings.Join(parts, "; ")
}

// Export makes a bundle of scripts in scope (at most 200). An ID not in scope is 404.
func (s *Service) Export(ctx context.Context, ids []string) (ScriptBundle, error) {
	if len(ids) == 0 || len(ids) > MaxBundleScripts {
		return ScriptBundle{}, apperr.Invalid("ids", fmt.Sprintf("name 1 to %d scripts", MaxBundleScripts))
	}
	b := ScriptBundle{BundleVersion: BundleVersion, ExportedAt: s.clock.Now(), Scripts: []BundleEntry{}}
	seen := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if seen[id] {
			continue
		}
		seen[id] = true
		sc, err := s.Get(ctx, id)
		if err != nil {
			return ScriptBundle{}, err
		}
		b.Scripts = append(b.Scripts, BundleEntry{Name: sc.Name, Description: sc.Description, Category: store.Deref(sc.Category), Tags: sc.Tags,
			OSTypes: sc.OSTypes, Language: sc.Language, Content: sc.Content, Parameters: sc.Parameters, RunAs: sc.RunAs,
			TimeoutSeconds: sc.TimeoutSeconds, ExitCodeSeverityMapping: sc.ExitCodeSeverityMapping})
	}
	return b, nil
}

// bundleCaller checks the caller may import bundles: a partner administrator (or system
// administrator) signed in as a user; the route itself requires MFA.
func bundleCaller(ctx context.Context) error {
	p := access.PrincipalFrom(ctx)
	if p == nil || p.Kind != access.ActorUser || !p.Permissions.Has(access.FullAdmin) ||
		(p.Scope.Level != access.LevelPartner && !p.Scope.IsSystem()) {
		return apperr.Forbidden("bundles are imported by a partner administrator signed in as a user")
	}
	return nil
}

// bundleTarget decides where a bundle's scripts go.
func bundleTarget(ctx context.Context, q store.Querier, in BundleRequest) (tenancy.Placement, error) {
	scope := access.ScopeFrom(ctx)
	switch in.Availability {
	case "", availabilityOrg:
		if in.OrgID == "" && scope.Level != access.LevelOrganization {
			return tenancy.Placement{}, apperr.Invalid("orgId", "availability org needs orgId")
		}
		return tenancy.Place(ctx, q, scope, in.OrgID, tenancy.PlaceOptions{Noun: "script"})
	case availabilityWide:
		if in.OrgID != "" {
			return tenancy.Placement{}, apperr.Invalid("orgId", "availability partner takes no orgId")
		}
		if !tenancy.ReachesWholePartner(scope) {
			return tenancy.Placement{}, apperr.Forbidden("partner-wide scripts need access to every organization of the partner")
		}
		return tenancy.Place(ctx, q, scope, "", tenancy.PlaceOptions{Noun: "script", PartnerID: in.PartnerID, PartnerWide: true})
	}
	return tenancy.Placement{}, apperr.Invalid("availability", "availability is org or partner")
}

// scriptNamed returns the live script of a name at a placement, if any.
func scriptNamed(ctx context.Context, q store.Querier, at tenancy.Placement, name string) (Script, bool, error) {
	var id string
	var err error
	if at.OrgID == "" {
		err = q.QueryRowContext(ctx, `SELECT id FROM scripts WHERE partner_id = $1 AND org_id IS NULL AND lower(name) = $2 AND deleted_at IS NULL`,
			at.PartnerID, strings.ToLower(name)).Scan(&id)
	} else {
		err = q.QueryRowContext(ctx, `SELECT id FROM scripts WHERE partner_id = $1 AND org_id = $2 AND lower(name) = $3 AND deleted_at IS NULL`,
			at.PartnerID, at.OrgID, strings.ToLower(name)).Scan(&id)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return Script{}, false, nil
	}
	if err != nil {
		return Script{}, false, fmt.Errorf("find script %q: %w", name, err)
	}
	sc, err := getScript(ctx, q, access.SystemScope(), id)
	return sc, err == nil, err
}

// PreviewBundle says what an import would do with each entry; it writes nothing.
func (s *Service) PreviewBundle(ctx context.Context, in BundleRequest) (BundlePreview, error) {
	if err := bundleCaller(ctx); err != nil {
		return BundlePreview{}, err
	}
	entries, err := parseBundle(in.ScriptBundle)
	if err != nil {
		return BundlePreview{}, err
	}
	at, err := bundleTarget(ctx, s.db, in)
	if err != nil {
		return BundlePreview{}, err
	}
	out := BundlePreview{Entries: make([]BundlePreviewEntry, 0, len(entries))}
	taken := map[string]bool{}
	for _, raw := range entries {
		e, d, err := decodeEntry(raw)
		if err != nil {
			out.Entries = append(out.Entries, BundlePreviewEntry{Status: entryInvalid, Name: e.Name, Error: err.Error()})
			continue
		}
		_, exists, err := scriptNamed(ctx, s.db, at, d.Name)
		if err != nil {
			return BundlePreview{}, err
		}
		status := entryNew
		if exists || taken[strings.ToLower(d.Name)] {
			status = entryNameConflict
		}
		taken[strings.ToLower(d.Name)] = true
		out.Entries = append(out.Entries, BundlePreviewEntry{Status: status, Name: d.Name})
	}
	return out, nil
}

// ImportBundle imports a bundle's scripts: each valid entry in the one transaction of the
// import, a bad entry reported in errors while the rest import. Nothing is run.
func (s *Service) ImportBundle(ctx context.Context, in BundleRequest) (BundleImportResult, error) {
	if err := bundleCaller(ctx); err != nil {
		return BundleImportResult{}, err
	}
	mode := in.Mode
	if mode == "" {
		mode = modeSkip
	}
	if mode != modeSkip && mode != modeRename && mode != modeNewVersion {
		return BundleImportResult{}, apperr.Invalid("mode", "mode is skip, rename or new-version")
	}
	entries, err := parseBundle(in.ScriptBundle)
	if err != nil {
		return BundleImportResult{}, err
	}
	sum := sha256.Sum256(in.ScriptBundle)
	out := BundleImportResult{Errors: []BundleImportError{}, SHA256: hex.EncodeToString(sum[:])}
	source := "bundle:" + out.SHA256
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := bundleTarget(ctx, tx, in)
		if err != nil {
			return err
		}
		for i, raw := range entries {
			e, d, err := decodeEntry(raw)
			if err != nil {
				out.Errors = append(out.Errors, BundleImportError{Index: i, Name: e.Name, Error: err.Error()})
				continue
			}
			existing, exists, err := scriptNamed(ctx, tx, at, d.Name)
			if err != nil {
				return err
			}
			categoryID, err := resolveCategory(ctx, tx, at, e.Category, s.clock.Now())
			if err != nil {
				return err
			}
			var sc Script
			switch {
			case !exists:
				sc, err = s.insert(ctx, tx, at, d, categoryID, e.Tags, source, "imported from a bundle")
				out.Imported++
			case mode == modeSkip:
				out.Skipped++
				continue
			case mode == modeRename:
				if d.Name, err = freeName(ctx, tx, at, d.Name); err != nil {
					return err
				}
				sc, err = s.insert(ctx, tx, at, d, categoryID, e.Tags, source, "imported from a bundle")
				out.Renamed++
			default:
				sc, err = s.save(ctx, tx, existing, d, "", nil, "imported from bundle "+out.SHA256[:12], false)
				out.Versioned++
			}
			if err != nil {
				return err
			}
			if err := audit.Record(ctx, tx, audit.Entry{Action: "script.import", ResourceType: "script", ResourceID: sc.ID,
				ResourceName: sc.Name, PartnerID: sc.PartnerID, OrgID: store.Deref(sc.OrgID),
				Details: map[string]any{"bundleSha256": out.SHA256, "mode": mode, "version": sc.Version}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return BundleImportResult{}, fmt.Errorf("import script bundle: %w", err)
	}
	return out, nil
}

// freeName returns name with the first numeric suffix in parentheses that no live script at
// the placement has: "Backup (2)", "Backup (3)", ...
func freeName(ctx context.Context, tx *sql.Tx, at tenancy.Placement, name string) (string, error) {
	for n := 2; n < 10000; n++ {
		suffix := fmt.Sprintf(" (%d)", n)
		candidate := name
		if len([]rune(candidate))+len(suffix) > MaxNameLen {
			candidate = string([]rune(candidate)[:MaxNameLen-len(suffix)])
		}
		candidate += suffix
		_, taken, err := scriptNamed(ctx, tx, at, candidate)
		if err != nil || !taken {
			return candidate, err
		}
	}
	return "", apperr.ConflictCode("SCRIPT_NAME_TAKEN", "no free name for "+name)
}

// resolveCategory finds a top-level category of a name usable at the placement (the
// organization's own first, then the partner's), creating it there at now when there is none.
func resolveCategory(ctx context.Context, tx *sql.Tx, at tenancy.Placement, name string, now time.Time) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", nil
	}
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM script_categories WHERE partner_id = $1 AND lower(name) = $2 AND parent_id IS NULL
		AND (org_id IS NULL OR org_id = $3) ORDER BY org_id IS NULL LIMIT 1`, at.PartnerID, strings.ToLower(name), store.NullIfEmpty(at.OrgID)).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("find category %q: %w", name, err)
	}
	id = store.NewID()
	_, err = tx.ExecContext(ctx, `INSERT INTO script_categories (id, partner_id, org_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)`, id, at.PartnerID, store.NullIfEmpty(at.OrgID), name, now)
	if err != nil {
		return "", fmt.Errorf("create category %q: %w", name, err)
	}
	return id, nil
}
