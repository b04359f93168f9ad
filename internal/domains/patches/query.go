package patches

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

const patchColumns = `p.id, p.partner_id, p.source, p.external_id, p.package_id, p.title, p.version, p.vendor, p.cve_ids, p.severity,
	p.category, p.requires_reboot, p.description, p.created_at, p.updated_at`

func scanPatch(row store.Scanner) (Patch, error) {
	var p Patch
	var vendor sql.NullString
	var cves string
	err := row.Scan(&p.ID, &p.PartnerID, &p.Source, &p.ExternalID, &p.PackageID, &p.Title, &p.Version, &vendor, &cves, &p.Severity,
		&p.Category, &p.RequiresReboot, &p.Description, &p.CreatedAt, &p.UpdatedAt)
	if err != nil {
		return p, err
	}
	p.Vendor = store.StringPtr(vendor)
	if cves != "" {
		if err := json.Unmarshal([]byte(cves), &p.CVEIDs); err != nil {
			return p, fmt.Errorf("read the CVEs of patch %s: %w", p.ID, err)
		}
	}
	p.PatchApproval = ApprovalPending
	return p, nil
}

// withApprovals fills in the decision that applies to each patch: the organization's when
// orgID is set and it has one, else the partner's; a deferral that has passed by now is
// pending again.
func withApprovals(ctx context.Context, q store.Querier, list []Patch, orgID string, now time.Time) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	at := map[string]int{}
	for i, p := range list {
		ids[i], at[p.ID] = p.ID, i
	}
	type decision struct {
		patchID, orgKey, status string
		until                   sql.NullTime
	}
	var a store.Args
	decisions, err := store.QueryAll(ctx, q, `SELECT patch_id, org_key, status, deferred_until FROM patch_approvals WHERE patch_id IN `+
		a.In(ids)+` AND org_key IN ('', `+a.Add(orgID)+`)`, a.Values(), func(sc store.Scanner) (d decision, err error) {
		err = sc.Scan(&d.patchID, &d.orgKey, &d.status, &d.until)
		return d, err
	})
	if err != nil {
		return fmt.Errorf("read patch approvals: %w", err)
	}
	orgDecided := map[string]bool{}
	for _, d := range decisions {
		if d.orgKey == "" && orgDecided[d.patchID] {
			continue
		}
		status := d.status
		if status == ApprovalDeferred && d.until.Valid && !d.until.Time.After(now) {
			status = ApprovalPending
		}
		list[at[d.patchID]].PatchApproval = status
		orgDecided[d.patchID] = orgDecided[d.patchID] || d.orgKey != ""
	}
	return nil
}

// PatchFilter narrows a list of patches.
type PatchFilter struct {
	Source, Severity, Category, Status, Search, OrgID, DeviceID string
}

// ListPatches lists the partner's patches, newest first. With orgId, the patches offered to
// that organization's devices, with the decision that applies to it; with deviceId, those
// of that device.
func (s *Service) ListPatches(ctx context.Context, f PatchFilter, page store.Page) ([]Patch, string, *int, error) {
	scope := access.ScopeFrom(ctx)
	var a store.Args
	conds := []string{partnerRows(scope, &a, "p.partner_id")}
	for col, v := range map[string]string{"p.source": f.Source, "p.severity": f.Severity, "p.category": f.Category} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	if f.Search != "" {
		like := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(strings.ToLower(f.Search)) + "%"
		conds = append(conds, "(lower(p.title) LIKE "+a.Add(like)+` ESCAPE '\' OR lower(p.package_id) LIKE `+a.Add(like)+` ESCAPE '\')`)
	}
	if f.OrgID != "" {
		if !store.ValidID(f.OrgID) || !scope.CanSeeOrg(f.OrgID, scope.PartnerID) && !scope.IsSystem() {
			return nil, "", nil, apperr.Invalid("orgId", "no such organization")
		}
		conds = append(conds, "EXISTS (SELECT 1 FROM patch_devices od WHERE od.patch_id = p.id AND od.org_id = "+a.Add(f.OrgID)+")")
	} else if scope.Level == access.LevelOrganization || scope.OrgLimited() {
		// A caller of some organizations sees the patches offered to them.
		conds = append(conds, "EXISTS (SELECT 1 FROM patch_devices od WHERE od.patch_id = p.id AND "+
			scope.OrgFilter(&a, "od.org_id", "od.partner_id")+")")
	}
	if f.DeviceID != "" {
		conds = append(conds, "EXISTS (SELECT 1 FROM patch_devices dd WHERE dd.patch_id = p.id AND dd.device_id = "+a.Add(f.DeviceID)+
			" AND "+scope.OrgFilter(&a, "dd.org_id", "dd.partner_id")+")")
	}
	if f.Status != "" {
		org := "''"
		if f.OrgID != "" {
			org = a.Add(f.OrgID)
		}
		conds = append(conds, effectiveApproval(&a, "p.id", org, s.clock.Now())+" = "+a.Add(f.Status))
	}
	list, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: patchColumns, From: " FROM patches p", Conds: conds, Args: &a,
		SortKey: "p.id", SortID: "p.id", Desc: true}, page, scanPatch, func(p Patch) (string, string) { return p.ID, p.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list patches: %w", err)
	}
	return list, next, total, withApprovals(ctx, s.db, list, f.OrgID, s.clock.Now())
}

func (s *Service) getPatch(ctx context.Context, q store.Querier, scope access.Scope, id, orgID string) (Patch, error) {
	var a store.Args
	p, err := store.ByID(ctx, q, "patch", `SELECT `+patchColumns+` FROM patches p`, "p.id", id, &a,
		[]string{partnerRows(scope, &a, "p.partner_id")}, scanPatch)
	if err != nil {
		return p, err
	}
	list := []Patch{p}
	err = withApprovals(ctx, q, list, orgID, s.clock.Now())
	return list[0], err
}

// GetPatch returns a patch with the count of devices in scope by its state on them.
func (s *Service) GetPatch(ctx context.Context, id string) (Patch, error) {
	return s.GetPatchIn(ctx, id, "")
}

// GetPatchIn is GetPatch with the decision that applies to an organization in scope (orgID:
// its own, else the partner's); "" gives the partner's, as GetPatch.
func (s *Service) GetPatchIn(ctx context.Context, id, orgID string) (Patch, error) {
	scope := access.ScopeFrom(ctx)
	if orgID != "" && (!store.ValidID(orgID) || !scope.CanSeeOrg(orgID, scope.PartnerID) && !scope.IsSystem()) {
		return Patch{}, apperr.Invalid("orgId", "no such organization")
	}
	p, err := s.getPatch(ctx, s.db, scope, id, orgID)
	if err != nil {
		return p, err
	}
	var a store.Args
	counts, err := store.QueryAll(ctx, s.db, `SELECT pd.status, COUNT(*) FROM patch_devices pd WHERE pd.patch_id = `+a.Add(id)+` AND `+
		orgRows(scope, &a, "pd.org_id", "pd.partner_id")+` GROUP BY pd.status`, a.Values(), scanCount)
	if err != nil {
		return p, fmt.Errorf("count the devices of patch %s: %w", id, err)
	}
	c := PatchStateCounts{}
	for _, n := range counts {
		switch n.key {
		case DeviceStatePending:
			c.Pending = n.n
		case DeviceStateInstalled:
			c.Installed = n.n
		case DeviceStateFailed:
			c.Failed = n.n
		case DeviceStateSkipped:
			c.Skipped = n.n
		case DeviceStateMissing:
			c.Missing = n.n
		}
	}
	p.DeviceCounts = &c
	return p, nil
}

// keyCount is a row of a count grouped by one text column.
type keyCount struct {
	key string
	n   int
}

func scanCount(sc store.Scanner) (c keyCount, err error) {
	err = sc.Scan(&c.key, &c.n)
	return c, err
}

// SourcesWithCounts counts the partner's patches by source; every source is listed.
func (s *Service) SourcesWithCounts(ctx context.Context) ([]PatchSourceCount, error) {
	var a store.Args
	list, err := store.QueryAll(ctx, s.db, `SELECT p.source, COUNT(*) FROM patches p WHERE `+
		partnerRows(access.ScopeFrom(ctx), &a, "p.partner_id")+` GROUP BY p.source`, a.Values(), scanCount)
	if err != nil {
		return nil, fmt.Errorf("count patches by source: %w", err)
	}
	counts := map[string]int{}
	for _, c := range list {
		counts[c.key] = c.n
	}
	out := make([]PatchSourceCount, len(Sources))
	for i, src := range Sources {
		out[i] = PatchSourceCount{Source: src, Count: counts[src]}
	}
	return out, nil
}

var errConflict = func(have string) error {
	return apperr.ConflictCode("APPROVAL_CONFLICT", "the patch is already "+have+"; a decision is not reversed")
}

// decide records a decision on a patch, for the partner or one organization. Approve and
// decline take a patch from pending or deferred; repeating the decision in force changes
// nothing; the other decision is 409 APPROVAL_CONFLICT. Two callers racing end with one
// decision: the conditional upsert lets one of them write it.
func (s *Service) decide(ctx context.Context, tx *sql.Tx, patchID, status, note, orgID string, until *time.Time) (PatchApproval, error) {
	scope := access.ScopeFrom(ctx)
	p, err := s.getPatch(ctx, tx, scope, patchID, "")
	if err != nil {
		return PatchApproval{}, err
	}
	pl, err := tenancy.Place(ctx, tx, scope, orgID, tenancy.PlaceOptions{Noun: "approval", PartnerWide: true, PartnerID: p.PartnerID})
	if err != nil {
		return PatchApproval{}, err
	}
	if pl.PartnerID != p.PartnerID {
		return PatchApproval{}, apperr.NotFound("patch")
	}
	by, email := actor(ctx)
	now := s.clock.Now()
	var untilArg any
	if until != nil {
		untilArg = until.UTC()
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO patch_approvals (id, partner_id, patch_id, org_id, org_key, status, note, deferred_until,
		decided_by, decided_by_email, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
		ON CONFLICT (patch_id, org_key) DO UPDATE SET status = excluded.status, note = excluded.note,
			deferred_until = excluded.deferred_until, decided_by = excluded.decided_by, decided_by_email = excluded.decided_by_email,
			updated_at = excluded.updated_at
		WHERE patch_approvals.status = $12`, store.NewID(), p.PartnerID, p.ID, store.NullIfEmpty(pl.OrgID), pl.OrgID, status, note,
		untilArg, by, email, now, ApprovalDeferred)
	if err != nil {
		return PatchApproval{}, fmt.Errorf("record a decision on patch %s: %w", p.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return PatchApproval{}, fmt.Errorf("record a decision on patch %s: %w", p.ID, err)
	}
	ap, err := approvalOf(ctx, tx, p.ID, pl.OrgID)
	if err != nil {
		return ap, fmt.Errorf("read the decision on patch %s: %w", p.ID, err)
	}
	if n == 0 {
		if ap.Status == status && status != ApprovalDeferred {
			return ap, nil
		}
		return ap, errConflict(ap.Status)
	}
	err = audit.Record(ctx, tx, audit.Entry{Action: "patch." + map[string]string{ApprovalApproved: "approve", ApprovalDeclined: "decline",
		ApprovalDeferred: "defer"}[status], ResourceType: "patch", ResourceID: p.ID, ResourceName: p.Title, PartnerID: p.PartnerID, OrgID: pl.OrgID,
		Details: map[string]any{"note": note, "deferredUntil": untilArg}})
	return ap, err
}

const approvalColumns = `a.id, a.patch_id, p.title, a.org_id, a.status, a.note, a.deferred_until, a.decided_by_email, a.updated_at`

func scanApproval(row store.Scanner) (PatchApproval, error) {
	var ap PatchApproval
	var org, by sql.NullString
	var until sql.NullTime
	err := row.Scan(&ap.ID, &ap.PatchID, &ap.PatchTitle, &org, &ap.Status, &ap.Note, &until, &by, &ap.UpdatedAt)
	ap.OrgID, ap.DeferredUntil, ap.DecidedBy = store.StringPtr(org), store.TimePtr(until), store.StringPtr(by)
	return ap, err
}

func approvalOf(ctx context.Context, q store.Querier, patchID, orgKey string) (PatchApproval, error) {
	return scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM patch_approvals a JOIN patches p ON p.id = a.patch_id
		WHERE a.patch_id = $1 AND a.org_key = $2`, patchID, orgKey))
}

// Decide approves, declines or defers a patch in a transaction of its own.
func (s *Service) Decide(ctx context.Context, patchID, status, note, orgID string, until *time.Time) (PatchApproval, error) {
	if status == ApprovalDeferred && (until == nil || !until.After(s.clock.Now())) {
		return PatchApproval{}, apperr.Invalid("until", "until must be a future date-time")
	}
	var ap PatchApproval
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		ap, err = s.decide(ctx, tx, patchID, status, note, orgID, until)
		return err
	})
	if err != nil {
		return ap, fmt.Errorf("decide on patch: %w", err)
	}
	return ap, nil
}

// BulkApprove approves patches (1 to 500) one by one in one transaction, reporting each.
func (s *Service) BulkApprove(ctx context.Context, in PatchBulkApproval) ([]PatchBulkApprovalItem, error) {
	if len(in.PatchIDs) == 0 || len(in.PatchIDs) > MaxBulkApprove {
		return nil, apperr.Invalid("patchIds", "name 1 to 500 patches")
	}
	out := make([]PatchBulkApprovalItem, 0, len(in.PatchIDs))
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		for _, id := range unique(in.PatchIDs) {
			_, err := s.decide(ctx, tx, id, ApprovalApproved, in.Note, in.OrgID, nil)
			if ae, ok := apperr.As(err); ok && (ae.Kind == apperr.KindNotFound || ae.Kind == apperr.KindConflict) {
				code, msg := ae.Code, ae.Message
				out = append(out, PatchBulkApprovalItem{PatchID: id, Status: "error", Code: &code, Message: &msg})
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, PatchBulkApprovalItem{PatchID: id, Status: ApprovalApproved})
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("approve patches: %w", err)
	}
	return out, nil
}

// ApprovalFilter narrows a list of decisions.
type ApprovalFilter struct{ Status, OrgID, PatchID string }

// ListApprovals lists the decisions in scope, newest first: the partner's and those of the
// organizations the caller reaches.
func (s *Service) ListApprovals(ctx context.Context, f ApprovalFilter, page store.Page) ([]PatchApproval, string, *int, error) {
	var a store.Args
	conds := []string{tenancy.SharedRowsFilter(access.ScopeFrom(ctx), &a, "a.org_id", "a.partner_id")}
	if f.Status != "" {
		conds = append(conds, "a.status = "+a.Add(f.Status))
	}
	if f.OrgID != "" {
		conds = append(conds, "a.org_id = "+a.Add(f.OrgID))
	}
	if f.PatchID != "" {
		conds = append(conds, "a.patch_id = "+a.Add(f.PatchID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: approvalColumns, From: " FROM patch_approvals a JOIN patches p ON p.id = a.patch_id",
		Conds: conds, Args: &a, SortKey: "a.id", SortID: "a.id", Desc: true}, page, scanApproval,
		func(ap PatchApproval) (string, string) { return ap.ID, ap.ID })
}

// summariesJoin joins the patch summary (alias s) of each device (alias d) that has one.
const summariesJoin = " LEFT JOIN patch_device_summaries s ON s.device_id = d.id"

// Compliance adds up the summaries of the live devices in scope (of an organization, a site).
// Devices never scanned count in devicesNeverScanned only.
func (s *Service) Compliance(ctx context.Context, orgID, siteID string) (PatchCompliance, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id"), tenancy.LiveOrg("d.org_id")}
	if orgID != "" {
		conds = append(conds, "d.org_id = "+a.Add(orgID))
	}
	if siteID != "" {
		conds = append(conds, "d.site_id = "+a.Add(siteID))
	}
	var c PatchCompliance
	var devicesTotal int
	err := s.db.QueryRowContext(ctx, devices.SelectLive(`COUNT(*), COUNT(s.device_id), COALESCE(SUM(s.installed), 0), COALESCE(SUM(s.pending), 0),
		COALESCE(SUM(s.failed), 0), COALESCE(SUM(s.critical_pending), 0), COALESCE(SUM(CASE WHEN s.pending > 0 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN s.reboot_required THEN 1 ELSE 0 END), 0)`, summariesJoin, conds...), a.Values()...).
		Scan(&devicesTotal, &c.DevicesScanned, &c.Installed, &c.Pending, &c.Failed, &c.CriticalPending, &c.DevicesNeedingPatches, &c.RebootRequired)
	if err != nil {
		return c, fmt.Errorf("add up patch compliance: %w", err)
	}
	c.DevicesNeverScanned = devicesTotal - c.DevicesScanned
	c.CompliancePercent = percent(c.Installed, c.Pending)
	return c, nil
}

// percent is installed / (installed + pending) * 100 to two decimals; 100 when both are 0.
func percent(installed, pending int) float64 {
	if installed+pending == 0 {
		return 100
	}
	return float64(int64(float64(installed)/float64(installed+pending)*10000+0.5)) / 100
}
