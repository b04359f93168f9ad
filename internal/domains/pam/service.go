package pam

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service keeps PAM rules, signer groups, settings and elevation requests.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	devices *devices.Service
	tenancy *tenancy.Service
	wake    func()

	// cache holds each organization's compiled rules with the rules_version they were built
	// at; a decision reads the version in its transaction and rebuilds on a mismatch, so
	// every node decides with the rules committed last.
	mu    sync.Mutex
	cache map[string]*ruleSet
}

// Deps are what a Service needs.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Wake is called once events were committed; nil for none.
	Wake func()
	// Devices carries the decisions to the agents.
	Devices *devices.Service
	// Tenancy places previews in the caller's organization.
	Tenancy *tenancy.Service
}

// New returns the PAM service.
func New(d Deps) *Service {
	logger, wake := d.Logger, d.Wake
	if logger == nil {
		logger = slog.Default()
	}
	if wake == nil {
		wake = func() {}
	}
	return &Service{db: d.DB, logger: logger, clock: clock.Or(d.Clock), devices: d.Devices, tenancy: d.Tenancy, wake: wake, cache: map[string]*ruleSet{}}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const ruleColumns = `r.id, r.partner_id, r.org_id, r.site_id, r.name, r.priority, r.verdict, r.approval_minutes, r.enabled, r.match_signer,
	r.match_signer_thumbprint, r.match_signer_group_id, r.match_hash, r.match_path_glob, r.match_parent_image, r.match_command_line,
	r.match_user, r.match_ad_group, r.window_start, r.window_end, r.window_days, r.window_timezone, r.created_by, r.created_at, r.updated_at`

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func scanRule(row store.Scanner) (PAMRule, error) {
	var r PAMRule
	var site, group, by sql.NullString
	var signer, thumb, hash, path, parent, cmd, user, ad, ws, we, wd, wz string
	if err := row.Scan(&r.ID, &r.PartnerID, &r.OrgID, &site, &r.Name, &r.Priority, &r.Verdict, &r.ApprovalMinutes, &r.Enabled, &signer,
		&thumb, &group, &hash, &path, &parent, &cmd, &user, &ad, &ws, &we, &wd, &wz, &by, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return r, err
	}
	r.SiteID, r.MatchSignerGroupID, r.CreatedBy = store.StringPtr(site), store.StringPtr(group), store.StringPtr(by)
	r.MatchSigner, r.MatchSignerThumbprint, r.MatchHash = nonEmpty(signer), nonEmpty(thumb), nonEmpty(hash)
	r.MatchPathGlob, r.MatchParentImage, r.MatchCommandLine = nonEmpty(path), nonEmpty(parent), nonEmpty(cmd)
	r.MatchUser, r.MatchAdGroup = nonEmpty(user), nonEmpty(ad)
	if ws != "" {
		w := &PAMTimeWindow{Start: ws, End: we, Timezone: wz}
		if err := json.Unmarshal([]byte(wd), &w.Days); err != nil {
			return r, fmt.Errorf("read pam rule %s: %w", r.ID, err)
		}
		r.TimeWindow = w
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

func specOf(r PAMRule) ruleSpec {
	return ruleSpec{SiteID: store.Deref(r.SiteID), Name: r.Name, Verdict: r.Verdict, Priority: r.Priority, ApprovalMinutes: r.ApprovalMinutes,
		Enabled: r.Enabled, Signer: store.Deref(r.MatchSigner), Thumbprint: store.Deref(r.MatchSignerThumbprint),
		GroupID: store.Deref(r.MatchSignerGroupID), Hash: store.Deref(r.MatchHash), PathGlob: store.Deref(r.MatchPathGlob),
		Parent: store.Deref(r.MatchParentImage), CmdLine: store.Deref(r.MatchCommandLine), User: store.Deref(r.MatchUser),
		AD: store.Deref(r.MatchAdGroup), Window: r.TimeWindow}
}

func ruleFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "r.org_id", "r.partner_id"), tenancy.LiveOrg("r.org_id")}
}

func getRule(ctx context.Context, q store.Querier, scope access.Scope, id string) (PAMRule, error) {
	var a store.Args
	return store.ByID(ctx, q, "pam rule", `SELECT `+ruleColumns+` FROM pam_rules r`, "r.id", id, &a, ruleFilter(scope, &a), scanRule)
}

// GetRule returns a rule in scope.
func (s *Service) GetRule(ctx context.Context, id string) (PAMRule, error) {
	return getRule(ctx, s.db, access.ScopeFrom(ctx), id)
}

// RuleFilter narrows ListRules.
type RuleFilter struct {
	OrgID, SiteID, Verdict string
	Enabled                *bool
}

// ListRules lists the rules in scope in decision order: priority, createdAt, id.
func (s *Service) ListRules(ctx context.Context, f RuleFilter, page store.Page) ([]PAMRule, string, *int, error) {
	var a store.Args
	conds := ruleFilter(access.ScopeFrom(ctx), &a)
	for col, v := range map[string]string{"r.org_id": f.OrgID, "r.site_id": f.SiteID, "r.verdict": f.Verdict} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	if f.Enabled != nil {
		conds = append(conds, "r.enabled = "+a.Add(*f.Enabled))
	}
	return s.listRulesOrdered(ctx, conds, &a, page)
}

// listRulesOrdered pages rules in decision order, (priority, created_at, id).
func (s *Service) listRulesOrdered(ctx context.Context, conds []string, a *store.Args, page store.Page) ([]PAMRule, string, *int, error) {
	if page.Limit <= 0 {
		page.Limit = 100
	}
	var prio int
	var created time.Time
	var id string
	out, next, total, err := store.KeysetList(ctx, s.db, store.SeekQuery{Columns: ruleColumns, From: " FROM pam_rules r", Conds: conds,
		Args: a, Keys: []string{"r.priority", "r.created_at", "r.id"}}, page, scanRule,
		func(r PAMRule) []any { return []any{r.Priority, r.CreatedAt, r.ID} }, &prio, &created, &id)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list pam rules: %w", err)
	}
	return out, next, total, nil
}

// bumpVersion records a change of an organization's rules, groups or settings: every node's
// cache of its compiled rules is stale from this commit on.
func bumpVersion(ctx context.Context, tx *sql.Tx, partnerID, orgID string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO pam_config (org_id, partner_id, default_verdict, rules_version, updated_at)
		VALUES ($1, $2, $3, 1, $4) ON CONFLICT (org_id) DO UPDATE SET rules_version = pam_config.rules_version + 1`,
		orgID, partnerID, defaultDefaultVerdict, now)
	if err != nil {
		return fmt.Errorf("bump pam rules version of organization %s: %w", orgID, err)
	}
	return nil
}

// checkRefs makes sure the site and signer group of a rule are of its organization.
func checkRefs(ctx context.Context, q store.Querier, orgID string, sp ruleSpec, prefix string) error {
	var c checker
	if sp.SiteID != "" {
		owners, err := tenancy.SiteOwners(ctx, q, []string{sp.SiteID})
		if err != nil {
			return fmt.Errorf("check the rule's site: %w", err)
		}
		if o, ok := owners[sp.SiteID]; !ok || o.OrgID != orgID {
			c.fail(prefix+"siteId", "no such site in the organization")
		}
	}
	if sp.GroupID != "" {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM pam_signer_groups WHERE id = $1 AND org_id = $2`, sp.GroupID, orgID).
			Scan(&n); err != nil {
			return fmt.Errorf("check the rule's signer group: %w", err)
		}
		if n == 0 {
			c.fail(prefix+"matchSignerGroupId", "no such signer group in the organization")
		}
	}
	return c.err()
}

func (in PAMRuleInput) spec() ruleSpec {
	sp := ruleSpec{SiteID: in.SiteID, Name: in.Name, Verdict: in.Verdict, Priority: defaultPriority, ApprovalMinutes: defaultApproval,
		Enabled: true, Window: in.TimeWindow}
	if sp.Verdict == "" {
		sp.Verdict = VerdictRequireApproval
	}
	store.Assign(&sp.Priority, in.Priority)
	store.Assign(&sp.ApprovalMinutes, in.ApprovalMinutes)
	store.Assign(&sp.Enabled, in.Enabled)
	store.Assign(&sp.Signer, in.MatchSigner)
	store.Assign(&sp.Thumbprint, in.MatchSignerThumbprint)
	store.Assign(&sp.GroupID, in.MatchSignerGroupID)
	store.Assign(&sp.Hash, in.MatchHash)
	store.Assign(&sp.PathGlob, in.MatchPathGlob)
	store.Assign(&sp.Parent, in.MatchParentImage)
	store.Assign(&sp.CmdLine, in.MatchCommandLine)
	store.Assign(&sp.User, in.MatchUser)
	store.Assign(&sp.AD, in.MatchAdGroup)
	return sp
}

// hasMatchValue reports whether an update carries a match field with a value.
func (u PAMRuleUpdate) hasMatchValue() bool {
	for _, p := range []*string{u.MatchSigner, u.MatchSignerThumbprint, u.MatchSignerGroupID, u.MatchHash, u.MatchPathGlob,
		u.MatchParentImage, u.MatchCommandLine, u.MatchUser, u.MatchAdGroup} {
		if p != nil && *p != "" {
			return true
		}
	}
	return false
}

func (u PAMRuleUpdate) apply(sp *ruleSpec) {
	store.Assign(&sp.SiteID, u.SiteID)
	store.Assign(&sp.Name, u.Name)
	store.Assign(&sp.Verdict, u.Verdict)
	store.Assign(&sp.Priority, u.Priority)
	store.Assign(&sp.ApprovalMinutes, u.ApprovalMinutes)
	store.Assign(&sp.Enabled, u.Enabled)
	store.Assign(&sp.Signer, u.MatchSigner)
	store.Assign(&sp.Thumbprint, u.MatchSignerThumbprint)
	store.Assign(&sp.GroupID, u.MatchSignerGroupID)
	store.Assign(&sp.Hash, u.MatchHash)
	store.Assign(&sp.PathGlob, u.MatchPathGlob)
	store.Assign(&sp.Parent, u.MatchParentImage)
	store.Assign(&sp.CmdLine, u.MatchCommandLine)
	store.Assign(&sp.User, u.MatchUser)
	store.Assign(&sp.AD, u.MatchAdGroup)
	if u.TimeWindow != nil {
		sp.Window = u.TimeWindow
	}
}

func windowCols(w *PAMTimeWindow) (string, string, string, string) {
	if w == nil {
		return "", "", "[]", ""
	}
	days := w.Days
	if days == nil {
		days = []int{}
	}
	b, _ := json.Marshal(days)
	return w.Start, w.End, string(b), w.Timezone
}

func auditRule(r PAMRule) map[string]any {
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"id", "partnerId", "orgId", "createdBy", "createdAt", "updatedAt"} {
		delete(m, k)
	}
	return m
}

// CreateRule adds a rule.
func (s *Service) CreateRule(ctx context.Context, in PAMRuleInput) (PAMRule, error) {
	sp := in.spec()
	var c checker
	sp.validate(&c, "")
	if err := c.err(); err != nil {
		return PAMRule{}, err
	}
	var out PAMRule
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "pam rule"})
		if err != nil {
			return err
		}
		if err := checkRefs(ctx, tx, at.OrgID, sp, ""); err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		ws, we, wd, wz := windowCols(sp.Window)
		if _, err := tx.ExecContext(ctx, `INSERT INTO pam_rules (id, partner_id, org_id, site_id, name, priority, verdict, approval_minutes,
			enabled, match_signer, match_signer_thumbprint, match_signer_group_id, match_hash, match_path_glob, match_parent_image,
			match_command_line, match_user, match_ad_group, window_start, window_end, window_days, window_timezone, created_by, created_at,
			updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $24)`,
			id, at.PartnerID, at.OrgID, store.NullIfEmpty(sp.SiteID), sp.Name, sp.Priority, sp.Verdict, sp.ApprovalMinutes, sp.Enabled, sp.Signer,
			sp.Thumbprint, store.NullIfEmpty(sp.GroupID), sp.Hash, sp.PathGlob, sp.Parent, sp.CmdLine, sp.User, sp.AD, ws, we, wd, wz,
			access.ActorName(ctx), now); err != nil {
			return fmt.Errorf("insert pam rule: %w", err)
		}
		if err := bumpVersion(ctx, tx, at.PartnerID, at.OrgID, now); err != nil {
			return err
		}
		if out, err = getRule(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "pam.rule.create", ResourceType: "pam_rule", ResourceID: id, ResourceName: out.Name,
			PartnerID: out.PartnerID, OrgID: out.OrgID, Details: auditRule(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create PAM rule: %w", err)
	}
	return out, nil
}

// updateIn applies one update to a rule in scope in the caller's transaction.
func (s *Service) updateIn(ctx context.Context, tx *sql.Tx, id string, u PAMRuleUpdate, prefix string, now time.Time) (PAMRule, error) {
	r, err := getRule(ctx, tx, access.ScopeFrom(ctx), id)
	if err != nil {
		return r, err
	}
	var c checker
	if !u.hasMatchValue() {
		c.fail(prefix+"matchSigner", "an update carries at least one match field with a value (send a current one to keep it)")
	}
	sp := specOf(r)
	u.apply(&sp)
	sp.validate(&c, prefix)
	if err := c.err(); err != nil {
		return r, err
	}
	if err := checkRefs(ctx, tx, r.OrgID, sp, prefix); err != nil {
		return r, err
	}
	ws, we, wd, wz := windowCols(sp.Window)
	ch := store.NewChanges(now)
	ch.Set("site_id", store.NullIfEmpty(sp.SiteID))
	ch.Set("name", sp.Name)
	ch.Set("priority", sp.Priority)
	ch.Set("verdict", sp.Verdict)
	ch.Set("approval_minutes", sp.ApprovalMinutes)
	ch.Set("enabled", sp.Enabled)
	ch.Set("match_signer", sp.Signer)
	ch.Set("match_signer_thumbprint", sp.Thumbprint)
	ch.Set("match_signer_group_id", store.NullIfEmpty(sp.GroupID))
	ch.Set("match_hash", sp.Hash)
	ch.Set("match_path_glob", sp.PathGlob)
	ch.Set("match_parent_image", sp.Parent)
	ch.Set("match_command_line", sp.CmdLine)
	ch.Set("match_user", sp.User)
	ch.Set("match_ad_group", sp.AD)
	ch.Set("window_start", ws)
	ch.Set("window_end", we)
	ch.Set("window_days", wd)
	ch.Set("window_timezone", wz)
	if _, err := tx.ExecContext(ctx, `UPDATE pam_rules SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
		return r, fmt.Errorf("update pam rule %s: %w", id, err)
	}
	if err := bumpVersion(ctx, tx, r.PartnerID, r.OrgID, now); err != nil {
		return r, err
	}
	out, err := getRule(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return out, err
	}
	return out, audit.Record(ctx, tx, audit.Entry{Action: "pam.rule.update", ResourceType: "pam_rule", ResourceID: id, ResourceName: out.Name,
		PartnerID: out.PartnerID, OrgID: out.OrgID, Details: auditRule(out)})
}

// UpdateRule changes a rule (PATCH).
func (s *Service) UpdateRule(ctx context.Context, id string, u PAMRuleUpdate) (PAMRule, error) {
	var out PAMRule
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		out, err = s.updateIn(ctx, tx, id, u, "", s.now())
		return err
	})
	if err != nil {
		return out, fmt.Errorf("update PAM rule: %w", err)
	}
	return out, nil
}

// UpdateRules changes several rules in one transaction: all or none.
func (s *Service) UpdateRules(ctx context.Context, items []PAMRuleBulkItem) ([]PAMRule, error) {
	if len(items) == 0 || len(items) > maxBulkRules {
		return nil, apperr.Invalid("rules", fmt.Sprintf("1 to %d rules per request", maxBulkRules))
	}
	seen := map[string]bool{}
	for i, it := range items {
		if seen[it.ID] {
			return nil, apperr.Invalid(fmt.Sprintf("rules[%d].id", i), "a rule appears twice")
		}
		seen[it.ID] = true
	}
	out := make([]PAMRule, 0, len(items))
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.now()
		for i, it := range items {
			r, err := s.updateIn(ctx, tx, it.ID, it.PAMRuleUpdate, fmt.Sprintf("rules[%d].", i), now)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update PAM rules: %w", err)
	}
	return out, nil
}

// DeleteRule removes a rule; requests it decided keep its ID.
func (s *Service) DeleteRule(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := getRule(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM pam_rules WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete pam rule %s: %w", id, err)
		}
		if err := bumpVersion(ctx, tx, r.PartnerID, r.OrgID, s.now()); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "pam.rule.delete", ResourceType: "pam_rule", ResourceID: id, ResourceName: r.Name,
			PartnerID: r.PartnerID, OrgID: r.OrgID})
	})
}
