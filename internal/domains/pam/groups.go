package pam

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

const groupColumns = `g.id, g.partner_id, g.org_id, g.name, g.signers, g.thumbprints, g.created_by, g.created_at, g.updated_at,
	(SELECT COUNT(*) FROM pam_rules x WHERE x.match_signer_group_id = g.id)`

func scanGroup(row store.Scanner) (PAMSignerGroup, error) {
	var g PAMSignerGroup
	var signers, thumbs string
	var by sql.NullString
	if err := row.Scan(&g.ID, &g.PartnerID, &g.OrgID, &g.Name, &signers, &thumbs, &by, &g.CreatedAt, &g.UpdatedAt, &g.RuleCount); err != nil {
		return g, err
	}
	var err1, err2 error
	g.Signers, err1 = store.DecodeStrings(signers)
	g.Thumbprints, err2 = store.DecodeStrings(thumbs)
	if err := errors.Join(err1, err2); err != nil {
		return g, fmt.Errorf("read signer group %s: %w", g.ID, err)
	}
	if g.Signers == nil {
		g.Signers = []string{}
	}
	if g.Thumbprints == nil {
		g.Thumbprints = []string{}
	}
	g.CreatedBy = store.StringPtr(by)
	g.CreatedAt, g.UpdatedAt = g.CreatedAt.UTC(), g.UpdatedAt.UTC()
	return g, nil
}

func getGroup(ctx context.Context, q store.Querier, scope access.Scope, id string) (PAMSignerGroup, error) {
	var a store.Args
	return store.ByID(ctx, q, "signer group", `SELECT `+groupColumns+` FROM pam_signer_groups g`, "g.id", id, &a, []string{scope.OrgFilter(&a, "g.org_id", "g.partner_id"), tenancy.LiveOrg("g.org_id")}, scanGroup)
}

// GetGroup returns a signer group in scope.
func (s *Service) GetGroup(ctx context.Context, id string) (PAMSignerGroup, error) {
	return getGroup(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListGroups lists the signer groups in scope, newest first.
func (s *Service) ListGroups(ctx context.Context, orgID string, page store.Page) ([]PAMSignerGroup, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "g.org_id", "g.partner_id"), tenancy.LiveOrg("g.org_id")}
	if orgID != "" {
		conds = append(conds, "g.org_id = "+a.Add(orgID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: groupColumns, From: " FROM pam_signer_groups g", Conds: conds, Args: &a,
		SortKey: "g.id", SortID: "g.id", Desc: true}, page, scanGroup, func(g PAMSignerGroup) (string, string) { return g.ID, g.ID })
}

// cleanGroup checks and normalizes a group's lists.
func cleanGroup(name string, signers, thumbs []string) (string, []string, []string, error) {
	var c checker
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxShortField {
		c.fail("name", "1 to %d characters", maxShortField)
	}
	if len(signers) > maxGroupEntries {
		c.fail("signers", "at most %d signers", maxGroupEntries)
	}
	if len(thumbs) > maxGroupEntries {
		c.fail("thumbprints", "at most %d thumbprints", maxGroupEntries)
	}
	outS, outT := []string{}, []string{}
	for i, v := range signers {
		if v = strings.TrimSpace(v); v == "" || len(v) > maxShortField {
			c.fail(fmt.Sprintf("signers[%d]", i), "1 to %d characters", maxShortField)
		}
		outS = append(outS, v)
	}
	for i, v := range thumbs {
		if !hex64.MatchString(v) {
			c.fail(fmt.Sprintf("thumbprints[%d]", i), "a SHA-256 thumbprint is exactly 64 hexadecimal characters")
		}
		outT = append(outT, strings.ToLower(v))
	}
	return name, outS, outT, c.err()
}

// CreateGroup adds a signer group.
func (s *Service) CreateGroup(ctx context.Context, in PAMSignerGroupInput) (PAMSignerGroup, error) {
	name, signers, thumbs, err := cleanGroup(in.Name, in.Signers, in.Thumbprints)
	if err != nil {
		return PAMSignerGroup{}, err
	}
	var out PAMSignerGroup
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "signer group"})
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO pam_signer_groups (id, partner_id, org_id, name, signers, thumbprints, created_by,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, id, at.PartnerID, at.OrgID, name,
			store.EncodeStrings(signers), store.EncodeStrings(thumbs), access.ActorName(ctx), now); err != nil {
			return fmt.Errorf("insert signer group: %w", err)
		}
		if out, err = getGroup(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "pam.signer_group.create", ResourceType: "pam_signer_group", ResourceID: id,
			ResourceName: name, PartnerID: at.PartnerID, OrgID: at.OrgID, Details: map[string]any{"signers": signers, "thumbprints": thumbs}})
	})
	if err != nil {
		return out, fmt.Errorf("create signer group: %w", err)
	}
	return out, nil
}

// UpdateGroup changes a signer group; the rules that use it see the change at once.
func (s *Service) UpdateGroup(ctx context.Context, id string, u PAMSignerGroupUpdate) (PAMSignerGroup, error) {
	var out PAMSignerGroup
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := getGroup(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		store.Assign(&g.Name, u.Name)
		store.Assign(&g.Signers, u.Signers)
		store.Assign(&g.Thumbprints, u.Thumbprints)
		name, signers, thumbs, err := cleanGroup(g.Name, g.Signers, g.Thumbprints)
		if err != nil {
			return err
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, `UPDATE pam_signer_groups SET name = $1, signers = $2, thumbprints = $3, updated_at = $4 WHERE id = $5`,
			name, store.EncodeStrings(signers), store.EncodeStrings(thumbs), now, id); err != nil {
			return fmt.Errorf("update signer group %s: %w", id, err)
		}
		if err := bumpVersion(ctx, tx, g.PartnerID, g.OrgID, now); err != nil {
			return err
		}
		if out, err = getGroup(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "pam.signer_group.update", ResourceType: "pam_signer_group", ResourceID: id,
			ResourceName: name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: map[string]any{"signers": signers, "thumbprints": thumbs}})
	})
	if err != nil {
		return out, fmt.Errorf("update signer group: %w", err)
	}
	return out, nil
}

// DeleteGroup removes a signer group that no rule uses (409 otherwise).
func (s *Service) DeleteGroup(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := getGroup(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM pam_signer_groups WHERE id = $1
			AND NOT EXISTS (SELECT 1 FROM pam_rules WHERE match_signer_group_id = $1)`, id)
		if err != nil {
			return fmt.Errorf("delete signer group %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, apperr.ConflictCode(CodeSignerGroupInUse,
				"rules use the signer group: change or delete them first"))
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "pam.signer_group.delete", ResourceType: "pam_signer_group", ResourceID: id,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID})
	})
}

// configOrg resolves the organization of a config call: orgID, or the caller's own.
func configOrg(ctx context.Context, q store.Querier, orgID string) (string, string, error) {
	scope := access.ScopeFrom(ctx)
	if orgID == "" && scope.Level == access.LevelOrganization {
		orgID = scope.OrgID
	}
	if orgID == "" {
		return "", "", apperr.Invalid("orgId", "orgId is required")
	}
	if !store.ValidID(orgID) {
		return "", "", apperr.NotFound("organization")
	}
	partnerID, ok, err := tenancy.OrgInScope(ctx, q, scope, orgID)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", apperr.NotFound("organization")
	}
	return partnerID, orgID, nil
}

// GetConfig returns an organization's PAM settings.
func (s *Service) GetConfig(ctx context.Context, orgID string) (PAMConfig, error) {
	_, orgID, err := configOrg(ctx, s.db, orgID)
	if err != nil {
		return PAMConfig{}, err
	}
	return readConfig(ctx, s.db, orgID)
}

func readConfig(ctx context.Context, q store.Querier, orgID string) (PAMConfig, error) {
	out := PAMConfig{OrgID: orgID, DefaultVerdict: defaultDefaultVerdict}
	var set sql.NullTime
	var verdict string
	err := q.QueryRowContext(ctx, `SELECT default_verdict, updated_at FROM pam_config WHERE org_id = $1`, orgID).Scan(&verdict, &set)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("read pam config of %s: %w", orgID, err)
	}
	out.DefaultVerdict = verdict
	if set.Valid {
		t := set.Time.UTC()
		out.UpdatedAt = &t
	}
	return out, nil
}

// PutConfig sets an organization's default verdict.
func (s *Service) PutConfig(ctx context.Context, orgID, verdict string) (PAMConfig, error) {
	if !contains(verdicts, verdict) {
		return PAMConfig{}, apperr.Invalid("defaultVerdict", "defaultVerdict must be auto_approve, auto_deny, require_approval or ignore")
	}
	var out PAMConfig
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		partnerID, org, err := configOrg(ctx, tx, orgID)
		if err != nil {
			return err
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO pam_config (org_id, partner_id, default_verdict, rules_version, updated_at)
			VALUES ($1, $2, $3, 1, $4) ON CONFLICT (org_id) DO UPDATE SET default_verdict = $3, updated_at = $4,
			rules_version = pam_config.rules_version + 1`, org, partnerID, verdict, now); err != nil {
			return fmt.Errorf("set pam config of %s: %w", org, err)
		}
		if out, err = readConfig(ctx, tx, org); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "pam.config.update", ResourceType: "organization", ResourceID: org,
			PartnerID: partnerID, OrgID: org, Details: map[string]any{"defaultVerdict": verdict}})
	})
	if err != nil {
		return out, fmt.Errorf("set PAM config: %w", err)
	}
	return out, nil
}
