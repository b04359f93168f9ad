package vulnerabilities

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"gale/internal/domains/patches"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
)

// ListFilter narrows the grouped lists.
type ListFilter struct {
	OrgID    string
	Severity string
	// Status of the findings counted; default open.
	Status string
	// Search keeps the findings whose CVE ID, package or CVE summary holds it (any case).
	Search string
}

func (f ListFilter) conds(scope access.Scope, a *store.Args) []string {
	conds := findingFilter(scope, a)
	status := f.Status
	if status == "" {
		status = StatusOpen
	}
	conds = append(conds, "f.status = "+a.Add(status))
	if f.OrgID != "" {
		conds = append(conds, "f.org_id = "+a.Add(f.OrgID))
	}
	if f.Severity != "" {
		conds = append(conds, "f.severity = "+a.Add(f.Severity))
	}
	if f.Search != "" {
		conds = append(conds, "("+store.Contains(a, f.Search, "f.cve_id", "f.package")+
			" OR EXISTS (SELECT 1 FROM vuln_cves s WHERE s.cve_id = f.cve_id AND "+store.Contains(a, f.Search, "s.summary")+"))")
	}
	return conds
}

func scanCVE(r store.Scanner) (VulnCVE, error) {
	var v VulnCVE
	var cvss, epss sql.NullFloat64
	var ke int
	var fs store.NullTime
	if err := r.Scan(&v.CVEID, &v.Severity, &cvss, &ke, &epss, &v.Summary, &v.AffectedDevices, &v.OpenFindings, &v.PatchReady, &fs); err != nil {
		return v, err
	}
	v.KnownExploited = ke == 1
	if cvss.Valid {
		v.CVSSScore = &cvss.Float64
	}
	if epss.Valid {
		v.EPSSScore = &epss.Float64
	}
	v.FirstSeen = fs.Time
	return v, nil
}

// List is the by-CVE view: one row per CVE with open findings in scope, worst first
// (severity, known exploited, CVSS, CVE ID).
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]VulnCVE, string, *int, error) {
	var a store.Args
	where := store.Where(f.conds(access.ScopeFrom(ctx), &a))
	inner := `SELECT f.cve_id, MAX(f.severity_rank) AS sr, MAX(CASE WHEN f.known_exploited THEN 1 ELSE 0 END) AS ke, COUNT(DISTINCT f.device_id) AS devs,
		COUNT(*) AS n, SUM(CASE WHEN f.patch_id IS NOT NULL THEN 1 ELSE 0 END) AS ready, MIN(f.first_seen) AS fs
		FROM vuln_findings f WHERE ` + where + ` GROUP BY f.cve_id`
	out, next, total, err := store.RankedList(ctx, s.db, store.RankedQuery{Args: &a, Count: `SELECT COUNT(*) FROM (` + inner + `) g`,
		Select: `SELECT g.cve_id, COALESCE(c.severity, 'unknown'), c.cvss_score, g.ke, c.epss_score, COALESCE(c.summary, ''),
		g.devs, g.n, g.ready, g.fs FROM (` + inner + `) g LEFT JOIN vuln_cves c ON c.cve_id = g.cve_id
		ORDER BY g.sr DESC, g.ke DESC, COALESCE(c.cvss_score, 0) DESC, g.cve_id`}, page, scanCVE)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list CVEs: %w", err)
	}
	// The packages of each CVE on the page.
	if len(out) > 0 {
		ids := make([]string, len(out))
		for i, v := range out {
			ids[i] = v.CVEID
		}
		var b store.Args
		conds := append(f.conds(access.ScopeFrom(ctx), &b), "f.cve_id IN "+b.In(ids))
		type cvePackage struct{ cve, pkg string }
		pairs, err := store.QueryAll(ctx, s.db, `SELECT DISTINCT f.cve_id, f.package FROM vuln_findings f WHERE `+store.Where(conds)+
			` ORDER BY f.cve_id, f.package`, b.Values(), func(r store.Scanner) (cvePackage, error) {
			var p cvePackage
			return p, r.Scan(&p.cve, &p.pkg)
		})
		if err != nil {
			return nil, "", nil, fmt.Errorf("list the packages of CVEs: %w", err)
		}
		pk := map[string][]string{}
		for _, p := range pairs {
			pk[p.cve] = append(pk[p.cve], p.pkg)
		}
		for i := range out {
			out[i].Packages = jsonenc.NonNil(pk[out[i].CVEID])
		}
	}
	return out, next, total, nil
}

const groupSelect = `SELECT f.group_key, COUNT(DISTINCT f.device_id), COUNT(*), SUM(CASE WHEN f.severity_rank = 4 THEN 1 ELSE 0 END),
	SUM(CASE WHEN f.known_exploited THEN 1 ELSE 0 END), COUNT(DISTINCT CASE WHEN f.patch_id IS NOT NULL THEN f.device_id END),
	SUM(f.severity_rank * f.severity_rank + CASE WHEN f.known_exploited THEN 25 ELSE 0 END) AS risk`

func scanGroup(r store.Scanner) (VulnSoftwareGroup, error) {
	var g VulnSoftwareGroup
	err := r.Scan(&g.GroupKey, &g.Devices, &g.Findings, &g.Critical, &g.KnownExploited, &g.PatchReady, &g.RiskScore)
	g.Name = groupName(g.GroupKey)
	return g, err
}

// Software is the by-software view: open findings grouped by remediation unit, riskiest
// first. It reads the counts kept per organization and group (vuln_group_stats); a severity
// filter or a search counts the findings themselves.
func (s *Service) Software(ctx context.Context, f ListFilter, page store.Page) ([]VulnSoftwareGroup, string, *int, error) {
	if f.Severity != "" || f.Search != "" {
		return s.softwareFromFindings(ctx, f, page)
	}
	status := f.Status
	if status == "" {
		status = StatusOpen
	}
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "g.org_id", "g.partner_id"), tenancy.LiveOrg("g.org_id"), "g.status = " + a.Add(status)}
	if f.OrgID != "" {
		conds = append(conds, "g.org_id = "+a.Add(f.OrgID))
	}
	where := store.Where(conds)
	out, next, total, err := store.RankedList(ctx, s.db, store.RankedQuery{Args: &a,
		Count: `SELECT COUNT(DISTINCT g.group_key) FROM vuln_group_stats g WHERE ` + where,
		Select: `SELECT g.group_key, SUM(g.devices), SUM(g.findings), SUM(g.critical), SUM(g.known_exploited),
		SUM(g.patch_ready), SUM(g.risk) AS risk FROM vuln_group_stats g WHERE ` + where + ` GROUP BY g.group_key ORDER BY risk DESC, g.group_key`},
		page, scanGroup)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list groups: %w", err)
	}
	if len(out) == 0 {
		return out, next, total, nil
	}
	keys := make([]string, len(out))
	for i, g := range out {
		keys[i] = g.GroupKey
	}
	var b store.Args
	conds = []string{access.ScopeFrom(ctx).OrgFilter(&b, "g.org_id", "g.partner_id"), tenancy.LiveOrg("g.org_id"), "g.status = " + b.Add(status),
		"g.group_key IN " + b.In(keys)}
	if f.OrgID != "" {
		conds = append(conds, "g.org_id = "+b.Add(f.OrgID))
	}
	versions, err := store.QueryAll(ctx, s.db, `SELECT DISTINCT g.group_key, g.fixed_version FROM vuln_group_stats g WHERE `+store.Where(conds),
		b.Values(), scanKeyedVersion)
	if err != nil {
		return nil, "", nil, fmt.Errorf("read fixed versions: %w", err)
	}
	best := highestFixed(versions)
	for i := range out {
		out[i].FixedVersion = best[out[i].GroupKey]
	}
	return out, next, total, nil
}

// softwareFromFindings groups the findings themselves (a severity filter, a search).
func (s *Service) softwareFromFindings(ctx context.Context, f ListFilter, page store.Page) ([]VulnSoftwareGroup, string, *int, error) {
	var a store.Args
	where := store.Where(f.conds(access.ScopeFrom(ctx), &a))
	out, next, total, err := store.RankedList(ctx, s.db, store.RankedQuery{Args: &a,
		Count:  `SELECT COUNT(DISTINCT f.group_key) FROM vuln_findings f WHERE ` + where,
		Select: groupSelect + ` FROM vuln_findings f WHERE ` + where + ` GROUP BY f.group_key ORDER BY risk DESC, f.group_key`},
		page, scanGroup)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list groups: %w", err)
	}
	if err := s.fixedVersions(ctx, f, out); err != nil {
		return nil, "", nil, err
	}
	return out, next, total, nil
}

// fixedVersions fills in each group's highest needed fixed version.
func (s *Service) fixedVersions(ctx context.Context, f ListFilter, groups []VulnSoftwareGroup) error {
	if len(groups) == 0 {
		return nil
	}
	keys := make([]string, len(groups))
	for i, g := range groups {
		keys[i] = g.GroupKey
	}
	var a store.Args
	conds := append(f.conds(access.ScopeFrom(ctx), &a), "f.group_key IN "+a.In(keys))
	versions, err := store.QueryAll(ctx, s.db, `SELECT DISTINCT f.group_key, f.fixed_version FROM vuln_findings f WHERE `+store.Where(conds),
		a.Values(), scanKeyedVersion)
	if err != nil {
		return fmt.Errorf("read fixed versions: %w", err)
	}
	best := highestFixed(versions)
	for i := range groups {
		groups[i].FixedVersion = best[groups[i].GroupKey]
	}
	return nil
}

// SoftwareGroup returns one group with its devices (at most 500) and their findings; a
// group without findings in scope is 404.
func (s *Service) SoftwareGroup(ctx context.Context, key string, f ListFilter) (VulnSoftwareDetail, error) {
	var a store.Args
	conds := append(f.conds(access.ScopeFrom(ctx), &a), "f.group_key = "+a.Add(key))
	g, err := scanGroup(s.db.QueryRowContext(ctx, groupSelect+` FROM vuln_findings f WHERE `+store.Where(conds)+` GROUP BY f.group_key`, a.Values()...))
	if err == sql.ErrNoRows {
		return VulnSoftwareDetail{}, apperr.NotFound("vulnerability group")
	}
	if err != nil {
		return VulnSoftwareDetail{}, fmt.Errorf("load group %s: %w", key, err)
	}
	one := []VulnSoftwareGroup{g}
	if err := s.fixedVersions(ctx, f, one); err != nil {
		return VulnSoftwareDetail{}, err
	}
	var b store.Args
	conds = append(f.conds(access.ScopeFrom(ctx), &b), "f.group_key = "+b.Add(key))
	findings, err := store.QueryAll(ctx, s.db, `SELECT `+findingColumns+findingFrom+` WHERE `+store.Where(conds)+
		` AND f.device_id IN (SELECT DISTINCT f.device_id FROM vuln_findings f WHERE `+store.Where(conds)+` ORDER BY f.device_id LIMIT 500)
		ORDER BY f.device_id, f.severity_rank DESC, f.cve_id`, b.Values(), scanFinding)
	if err != nil {
		return VulnSoftwareDetail{}, fmt.Errorf("list the findings of group %s: %w", key, err)
	}
	out := VulnSoftwareDetail{Group: one[0], Devices: []VulnGroupDevice{}}
	for _, x := range findings {
		n := len(out.Devices)
		if n == 0 || out.Devices[n-1].DeviceID != x.DeviceID {
			out.Devices = append(out.Devices, VulnGroupDevice{DeviceID: x.DeviceID, OrgID: x.OrgID, InstalledVersion: x.InstalledVersion})
			n++
		}
		d := &out.Devices[n-1]
		d.PatchReady = d.PatchReady || x.PatchReady
		d.Findings = append(d.Findings, x)
	}
	return out, nil
}

// Stats counts the findings in scope.
func (s *Service) Stats(ctx context.Context, orgID string) (VulnStats, error) {
	var a store.Args
	conds := findingFilter(access.ScopeFrom(ctx), &a)
	if orgID != "" {
		conds = append(conds, "f.org_id = "+a.Add(orgID))
	}
	soon := s.now().Add(expiringWithin)
	var st VulnStats
	err := s.db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN f.status = 'open' AND f.severity_rank = 4 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN f.status = 'open' AND f.known_exploited THEN 1 ELSE 0 END), 0),
		COUNT(DISTINCT CASE WHEN f.status = 'open' AND f.known_exploited THEN f.device_id END),
		COALESCE(SUM(CASE WHEN f.status = 'open' AND f.patch_id IS NOT NULL THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN f.status = 'accepted' AND f.accepted_until IS NOT NULL AND f.accepted_until <= `+a.Add(soon)+` THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN f.status = 'open' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN f.status = 'accepted' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN f.status = 'mitigated' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN f.status = 'patched' THEN 1 ELSE 0 END), 0),
		COUNT(DISTINCT CASE WHEN f.status = 'open' THEN f.device_id END)
		FROM vuln_findings f WHERE `+store.Where(conds), a.Values()...).Scan(&st.CriticalOpen, &st.KnownExploitedExposure,
		&st.KnownExploitedDevices, &st.PatchReady, &st.AcceptedExpiringSoon, &st.Open, &st.Accepted, &st.Mitigated, &st.Patched, &st.AffectedDevices)
	if err != nil {
		return st, fmt.Errorf("count findings: %w", err)
	}
	return st, nil
}

// CVEDevices lists the findings of a CVE in scope (one per device and package), by device;
// status filters them (default: every status but patched). A CVE without findings in scope
// is 404.
func (s *Service) CVEDevices(ctx context.Context, cve, status string, page store.Page) ([]VulnFinding, string, *int, error) {
	cve = strings.ToUpper(strings.TrimSpace(cve))
	var a store.Args
	conds := append(findingFilter(access.ScopeFrom(ctx), &a), "f.cve_id = "+a.Add(cve))
	if status != "" {
		conds = append(conds, "f.status = "+a.Add(status))
	} else {
		conds = append(conds, "f.status <> "+a.Add(StatusPatched))
	}
	var exists int
	var b store.Args
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM vuln_findings f WHERE `+
		store.Where(append(findingFilter(access.ScopeFrom(ctx), &b), "f.cve_id = "+b.Add(cve)))+` LIMIT 1) x`, b.Values()...).Scan(&exists); err != nil {
		return nil, "", nil, fmt.Errorf("look for CVE %s: %w", cve, err)
	}
	if exists == 0 {
		return nil, "", nil, apperr.NotFound("CVE")
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: findingColumns, From: findingFrom, Conds: conds, Args: &a, SortKey: "f.id", SortID: "f.id"},
		page, scanFinding, func(f VulnFinding) (string, string) { return f.ID, f.ID })
}

// Remediate schedules, through the patching domain, the pending patches that fix the
// findings selected, on each affected device: one install job.
func (s *Service) Remediate(ctx context.Context, in VulnRemediate) (VulnRemediation, error) {
	n := len(in.FindingIDs) + len(in.CVEIDs) + len(in.GroupKeys)
	if n == 0 || n > MaxSelectors {
		return VulnRemediation{}, apperr.Invalid("findingIds", "name 1 to 200 findings, CVEs or groups in all")
	}
	if len(in.DeviceIDs) > patches.MaxInstallDevices {
		return VulnRemediation{}, apperr.Invalid("deviceIds", "at most 500 devices")
	}
	scope := access.ScopeFrom(ctx)
	var a store.Args
	conds := append(findingFilter(scope, &a), "f.status IN ("+a.Add(StatusOpen)+", "+a.Add(StatusAccepted)+", "+a.Add(StatusMitigated)+")")
	var sel []string
	if len(in.FindingIDs) > 0 {
		sel = append(sel, "f.id IN "+a.In(validIDs(in.FindingIDs)))
	}
	if len(in.CVEIDs) > 0 {
		sel = append(sel, "f.cve_id IN "+a.In(in.CVEIDs))
	}
	if len(in.GroupKeys) > 0 {
		sel = append(sel, "f.group_key IN "+a.In(in.GroupKeys))
	}
	conds = append(conds, "("+strings.Join(sel, " OR ")+")")
	if len(in.DeviceIDs) > 0 {
		conds = append(conds, "f.device_id IN "+a.In(validIDs(in.DeviceIDs)))
	}
	type selected struct{ device, org, pkg, fixed string }
	findings, err := store.QueryAll(ctx, s.db, `SELECT f.device_id, f.org_id, f.package, f.fixed_version FROM vuln_findings f WHERE `+
		store.Where(conds)+` ORDER BY f.device_id LIMIT 20000`, a.Values(), func(r store.Scanner) (selected, error) {
		var x selected
		return x, r.Scan(&x.device, &x.org, &x.pkg, &x.fixed)
	})
	if err != nil {
		return VulnRemediation{}, fmt.Errorf("read the findings to remediate: %w", err)
	}
	type need struct{ org, fixed string }
	needs := map[[2]string]need{}
	var devs []string
	for _, x := range findings {
		k := [2]string{x.device, x.pkg}
		if have, ok := needs[k]; ok && (x.fixed == "" || !higher(have.fixed, x.fixed)) {
			continue
		}
		if len(devs) == 0 || devs[len(devs)-1] != x.device {
			devs = append(devs, x.device)
		}
		needs[k] = need{x.org, x.fixed}
	}
	if len(needs) == 0 {
		return VulnRemediation{}, apperr.NotFound("finding")
	}
	devs = slices.Compact(devs)
	if len(devs) > patches.MaxInstallDevices {
		return VulnRemediation{}, apperr.Invalid("deviceIds", "the selection affects more than 500 devices: name deviceIds")
	}
	pkgs := map[string]bool{}
	for k := range needs {
		pkgs[k[1]] = true
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	pend, err := s.patches.PendingFor(ctx, devs, names)
	if err != nil {
		return VulnRemediation{}, err
	}
	// For each (device, package) the highest pending version, if it fixes the finding.
	best := map[[2]string]patches.PendingPatch{}
	for _, p := range pend {
		k := [2]string{p.DeviceID, p.Package}
		if _, ok := needs[k]; !ok {
			continue
		}
		if have, ok := best[k]; !ok || higher(have.Version, p.Version) {
			best[k] = p
		}
	}
	patchSet := map[string]string{} // patch → an organization it is for
	withWork := map[string]bool{}
	out := VulnRemediation{Skipped: []VulnRemediateSkip{}, PatchIDs: []string{}}
	for k, nd := range needs {
		p, ok := best[k]
		if !ok || nd.fixed == "" || higher(p.Version, nd.fixed) {
			continue
		}
		patchSet[p.PatchID] = nd.org
		withWork[k[0]] = true
	}
	for _, d := range devs {
		if !withWork[d] {
			out.Skipped = append(out.Skipped, VulnRemediateSkip{DeviceID: d, Reason: "no pending patch reaches the fixed version"})
		}
	}
	if len(patchSet) == 0 {
		return VulnRemediation{}, apperr.ConflictCode(CodeNoPatch, "no pending patch fixes the findings selected: scan the devices for patches first")
	}
	ids := make([]string, 0, len(patchSet))
	for id := range patchSet {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	approve := map[string][]string{}
	if in.Approve {
		seen := map[[2]string]bool{}
		for _, p := range pend {
			if k := [2]string{p.PatchID, p.OrgID}; patchSet[p.PatchID] != "" && withWork[p.DeviceID] && !seen[k] {
				seen[k] = true
				approve[p.PatchID] = append(approve[p.PatchID], p.OrgID)
			}
		}
	}
	work := make([]string, 0, len(withWork))
	for _, d := range devs {
		if withWork[d] {
			work = append(work, d)
		}
	}
	job, err := s.patches.ApproveAndInstall(ctx, work, ids, approve, "approved to remediate vulnerabilities", patches.InstallOptions{})
	if err != nil {
		return VulnRemediation{}, err
	}
	job.Commands = nil
	out.Job, out.PatchIDs = job, ids
	return out, nil
}

func validIDs(ids []string) []string {
	out := []string{}
	for _, id := range ids {
		if store.ValidID(id) {
			out = append(out, id)
		}
	}
	return out
}

// OpenTickets validates a ticket request; the helpdesk tickets domain does not exist yet, so
// it then answers 501 TICKETS_UNAVAILABLE (see the route).
func (s *Service) OpenTickets(ctx context.Context, in VulnTicketRequest) error {
	if len(in.FindingIDs) == 0 || len(in.FindingIDs) > MaxBulk {
		return apperr.Invalid("findingIds", "name 1 to 200 findings")
	}
	for _, id := range in.FindingIDs {
		if _, err := s.Get(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
