package vulnerabilities

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

var cveID = regexp.MustCompile(`^CVE-\d{4}-\d{4,}$`)

// advisoryRow is an advisory to store, with what it says of its CVE.
type advisoryRow struct {
	source, pkg, cve, fixed, release string
}

// cveRow is what a source says of a CVE. source "urgency" does not override "import".
type cveRow struct {
	id, severity, source, summary string
	cvss, epss                    *float64
	exploited                     bool
}

// storeAdvisories upserts advisories and CVEs in tx and copies the CVEs' severity to their
// findings; it returns the packages named.
func (s *Service) storeAdvisories(ctx context.Context, tx *sql.Tx, advs []advisoryRow, cves []cveRow) ([]string, error) {
	now := s.now()
	pkgs := map[string]bool{}
	for _, ad := range advs {
		pkgs[ad.pkg] = true
		if _, err := tx.ExecContext(ctx, `INSERT INTO vuln_advisories (id, source, package, cve_id, fixed_version, release, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (source, package, cve_id) DO UPDATE SET fixed_version = excluded.fixed_version,
			release = excluded.release, updated_at = excluded.updated_at WHERE vuln_advisories.fixed_version <> excluded.fixed_version`,
			store.NewID(), ad.source, ad.pkg, ad.cve, ad.fixed, ad.release, now); err != nil {
			return nil, fmt.Errorf("store advisory %s %s: %w", ad.pkg, ad.cve, err)
		}
	}
	ids := make([]string, 0, len(cves))
	for _, c := range cves {
		ids = append(ids, c.id)
		if _, err := tx.ExecContext(ctx, `INSERT INTO vuln_cves (cve_id, severity, severity_source, cvss_score, known_exploited, epss_score,
			summary, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (cve_id) DO UPDATE SET
			severity = CASE WHEN excluded.severity_source = 'import' OR vuln_cves.severity_source = 'urgency' THEN excluded.severity ELSE vuln_cves.severity END,
			severity_source = CASE WHEN excluded.severity_source = 'import' THEN 'import' ELSE vuln_cves.severity_source END,
			cvss_score = COALESCE(excluded.cvss_score, vuln_cves.cvss_score), epss_score = COALESCE(excluded.epss_score, vuln_cves.epss_score),
			known_exploited = (excluded.known_exploited OR vuln_cves.known_exploited),
			summary = CASE WHEN excluded.summary <> '' THEN excluded.summary ELSE vuln_cves.summary END, updated_at = excluded.updated_at`,
			c.id, c.severity, c.source, c.cvss, c.exploited, c.epss, c.summary, now); err != nil {
			return nil, fmt.Errorf("store CVE %s: %w", c.id, err)
		}
	}
	// The findings copy their CVE's severity.
	groups := groupSet{}
	for first := 0; first < len(ids); first += 300 {
		var a store.Args
		in := a.In(ids[first:min(first+300, len(ids))])
		err := groupsOf(ctx, tx, `UPDATE vuln_findings SET
			severity = (SELECT c.severity FROM vuln_cves c WHERE c.cve_id = vuln_findings.cve_id),
			known_exploited = (SELECT c.known_exploited FROM vuln_cves c WHERE c.cve_id = vuln_findings.cve_id),
			severity_rank = (SELECT CASE c.severity WHEN 'critical' THEN 4 WHEN 'high' THEN 3 WHEN 'medium' THEN 2 WHEN 'low' THEN 1 ELSE 0 END
				FROM vuln_cves c WHERE c.cve_id = vuln_findings.cve_id)
			WHERE cve_id IN `+in+` AND EXISTS (SELECT 1 FROM vuln_cves c WHERE c.cve_id = vuln_findings.cve_id
				AND (c.severity <> vuln_findings.severity OR c.known_exploited <> vuln_findings.known_exploited)) RETURNING org_id, group_key`,
			a.Values(), groups)
		if err != nil {
			return nil, fmt.Errorf("copy CVE severities to findings: %w", err)
		}
	}
	if err := s.refreshGroups(ctx, tx, groups); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(pkgs))
	for p := range pkgs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// maxImportBytes bounds an advisory import's body.
const maxImportBytes = 256 << 20

// Import stores the advisories of an OSV document (one object or an array) or a Debian
// Security Tracker JSON (package → CVE → releases), then correlates the devices having the
// packages named. format is osv, debian_tracker or "" (guessed); release picks the tracker's
// release (required for it). System scope only.
func (s *Service) Import(ctx context.Context, body io.Reader, format, release string) (VulnImportResult, error) {
	if !access.ScopeFrom(ctx).IsSystem() {
		return VulnImportResult{}, apperr.Forbidden("advisory imports are for platform administrators (system scope)")
	}
	raw, err := io.ReadAll(io.LimitReader(body, maxImportBytes+1))
	if err != nil {
		return VulnImportResult{}, fmt.Errorf("read the import: %w", err)
	}
	if len(raw) > maxImportBytes {
		return VulnImportResult{}, apperr.Invalid("body", "the import is larger than 256 MB")
	}
	trimmed := strings.TrimSpace(string(raw))
	if format == "" {
		format = SourceTracker
		if strings.HasPrefix(trimmed, "[") || (strings.HasPrefix(trimmed, "{") && isOSVObject(raw)) {
			format = SourceOSV
		}
	}
	var advs []advisoryRow
	var cves []cveRow
	switch format {
	case SourceOSV:
		advs, cves, err = parseOSV(raw)
	case SourceTracker:
		if release == "" {
			return VulnImportResult{}, apperr.Invalid("release", "a Debian Security Tracker import needs the release to take (e.g. bookworm)")
		}
		advs, cves, err = parseTracker(raw, release)
	default:
		return VulnImportResult{}, apperr.Invalid("format", "format is osv or debian_tracker")
	}
	if err != nil {
		return VulnImportResult{}, err
	}
	res := VulnImportResult{Format: format, Advisories: len(advs), CVEs: len(cves)}
	var pkgs []string
	err = s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		pkgs, err = s.storeAdvisories(ctx, tx, advs, cves)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("import vulnerability data: %w", err)
	}
	res.Packages = len(pkgs)
	res.Devices, err = s.correlatePackages(ctx, pkgs)
	return res, err
}

func isOSVObject(raw []byte) bool {
	var probe struct {
		ID       string          `json:"id"`
		Affected json.RawMessage `json:"affected"`
	}
	return json.Unmarshal(raw, &probe) == nil && probe.ID != "" && len(probe.Affected) > 0
}

type osvDoc struct {
	ID       string   `json:"id"`
	Aliases  []string `json:"aliases"`
	Summary  string   `json:"summary"`
	Details  string   `json:"details"`
	Severity []struct {
		Type  string `json:"type"`
		Score string `json:"score"`
	} `json:"severity"`
	Affected []struct {
		Package struct {
			Ecosystem string `json:"ecosystem"`
			Name      string `json:"name"`
		} `json:"package"`
		Ranges []struct {
			Type   string              `json:"type"`
			Events []map[string]string `json:"events"`
		} `json:"ranges"`
	} `json:"affected"`
	DatabaseSpecific struct {
		KnownExploited bool     `json:"known_exploited"`
		EPSS           *float64 `json:"epss"`
		CVSSScore      *float64 `json:"cvss_score"`
		Severity       string   `json:"severity"`
	} `json:"database_specific"`
}

func parseOSV(raw []byte) ([]advisoryRow, []cveRow, error) {
	var docs []osvDoc
	if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
		if err := json.Unmarshal(raw, &docs); err != nil {
			return nil, nil, apperr.Invalid("body", "not an OSV array: "+err.Error())
		}
	} else {
		var d osvDoc
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, nil, apperr.Invalid("body", "not an OSV object: "+err.Error())
		}
		docs = []osvDoc{d}
	}
	var advs []advisoryRow
	var cves []cveRow
	seen := map[string]bool{}
	for i, d := range docs {
		id := d.ID
		if !cveID.MatchString(id) {
			id = ""
			for _, a := range d.Aliases {
				if cveID.MatchString(a) {
					id = a
					break
				}
			}
		}
		if id == "" {
			continue // not a CVE
		}
		if len(d.Affected) == 0 {
			return nil, nil, apperr.Invalid(fmt.Sprintf("body[%d].affected", i), "an OSV entry names the packages it affects")
		}
		c := cveRow{id: id, source: "import", summary: clip(firstNonEmpty(d.Summary, d.Details), 500), exploited: d.DatabaseSpecific.KnownExploited,
			epss: d.DatabaseSpecific.EPSS, cvss: d.DatabaseSpecific.CVSSScore, severity: SeverityUnknown}
		for _, sv := range d.Severity {
			if c.cvss != nil {
				break
			}
			if f, err := strconv.ParseFloat(sv.Score, 64); err == nil {
				c.cvss = &f
			} else if f, ok := cvss3Base(sv.Score); ok {
				c.cvss = &f
			}
		}
		switch {
		case c.cvss != nil:
			c.severity = cvssSeverity(*c.cvss)
		case d.DatabaseSpecific.Severity != "":
			c.severity = urgencySeverity(d.DatabaseSpecific.Severity)
		}
		if !seen[id] {
			seen[id] = true
			cves = append(cves, c)
		}
		for j, af := range d.Affected {
			name := strings.TrimSpace(af.Package.Name)
			if name == "" || len(name) > 200 {
				return nil, nil, apperr.Invalid(fmt.Sprintf("body[%d].affected[%d].package.name", i, j), "a package name of 1 to 200 characters")
			}
			fixed := ""
			for _, r := range af.Ranges {
				for _, ev := range r.Events {
					if f := ev["fixed"]; f != "" {
						fixed = f
					}
				}
			}
			rel := ""
			if _, after, ok := strings.Cut(af.Package.Ecosystem, ":"); ok {
				rel = after
			}
			advs = append(advs, advisoryRow{source: SourceOSV, pkg: name, cve: id, fixed: fixed, release: rel})
		}
	}
	return advs, cves, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// trackerCVE is one CVE of a package in the Debian Security Tracker's JSON.
type trackerCVE struct {
	Description string `json:"description"`
	Releases    map[string]struct {
		Status       string `json:"status"`
		FixedVersion string `json:"fixed_version"`
		Urgency      string `json:"urgency"`
	} `json:"releases"`
}

func parseTracker(raw []byte, release string) ([]advisoryRow, []cveRow, error) {
	var doc map[string]map[string]trackerCVE
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, apperr.Invalid("body", "not a Debian Security Tracker JSON (package → CVE → releases): "+err.Error())
	}
	var advs []advisoryRow
	var cves []cveRow
	seen := map[string]int{}
	pkgs := make([]string, 0, len(doc))
	for p := range doc {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, pkg := range pkgs {
		for id, c := range doc[pkg] {
			if !cveID.MatchString(id) {
				continue
			}
			r, ok := c.Releases[release]
			if !ok || r.FixedVersion == "0" || r.Status == "not-affected" {
				continue
			}
			fixed := r.FixedVersion
			if r.Status != "resolved" {
				fixed = ""
			}
			advs = append(advs, advisoryRow{source: SourceTracker, pkg: pkg, cve: id, fixed: fixed, release: release})
			sev := urgencySeverity(strings.TrimSuffix(r.Urgency, "*"))
			if i, ok := seen[id]; ok {
				if severityRank[sev] > severityRank[cves[i].severity] {
					cves[i].severity = sev
				}
				continue
			}
			seen[id] = len(cves)
			cves = append(cves, cveRow{id: id, severity: sev, source: "urgency", summary: clip(c.Description, 500)})
		}
	}
	return advs, cves, nil
}

// cvss3Base computes the base score of a CVSS v3 vector ("CVSS:3.1/AV:N/AC:L/...").
func cvss3Base(vector string) (float64, bool) {
	if !strings.HasPrefix(vector, "CVSS:3") {
		return 0, false
	}
	m := map[string]string{}
	for _, part := range strings.Split(vector, "/")[1:] {
		k, v, ok := strings.Cut(part, ":")
		if ok {
			m[k] = v
		}
	}
	av := map[string]float64{"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2}[m["AV"]]
	ac := map[string]float64{"L": 0.77, "H": 0.44}[m["AC"]]
	ui := map[string]float64{"N": 0.85, "R": 0.62}[m["UI"]]
	changed := m["S"] == "C"
	pr := map[string]float64{"N": 0.85, "L": 0.62, "H": 0.27}[m["PR"]]
	if changed {
		pr = map[string]float64{"N": 0.85, "L": 0.68, "H": 0.5}[m["PR"]]
	}
	cia := map[string]float64{"H": 0.56, "L": 0.22, "N": 0}
	c, ok1 := cia[m["C"]]
	i, ok2 := cia[m["I"]]
	a, ok3 := cia[m["A"]]
	if av == 0 || ac == 0 || ui == 0 || pr == 0 || !ok1 || !ok2 || !ok3 || (m["S"] != "U" && m["S"] != "C") {
		return 0, false
	}
	iss := 1 - (1-c)*(1-i)*(1-a)
	var impact float64
	if changed {
		impact = 7.52*(iss-0.029) - 3.25*math.Pow(iss-0.02, 15)
	} else {
		impact = 6.42 * iss
	}
	if impact <= 0 {
		return 0, true
	}
	expl := 8.22 * av * ac * pr * ui
	base := impact + expl
	if changed {
		base = 1.08 * base
	}
	return roundUp(math.Min(base, 10)), true
}

func roundUp(x float64) float64 {
	n := int(math.Round(x * 100000))
	if n%10000 == 0 {
		return float64(n) / 100000
	}
	return float64(n/10000+1) / 10
}

// Changelog fetch statuses.
const (
	fetchPending   = "pending"
	fetchRequested = "requested"
	fetchDone      = "done"
	fetchFailed    = "failed"
	// fetchRetryAfter is how long a requested fetch waits for its result before another
	// agent is asked; maxFetchAttempts how many agents are asked in all.
	fetchRetryAfter  = 30 * time.Minute
	maxFetchAttempts = 3
	fetchTimeout     = 900
	// changelogBatch is how many packages one package_changelog names: small commands answer
	// sooner, and the agent runs them one after another.
	changelogBatch = 10
)

// OnPatchScan runs in the transaction recording a patch_scan result: the (package, candidate
// version) pairs of its security upgrades not seen before are noted, and this device, which
// has them pending and just answered, is asked for their changelogs. It also refreshes the
// device's findings' pending patches.
func (s *Service) OnPatchScan(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	if r.Status != agentproto.ResultCompleted {
		return nil
	}
	var res agentproto.PatchScanResult
	if err := json.Unmarshal(r.Result, &res); err != nil || res.Manager != agentproto.ManagerApt {
		return nil
	}
	now := s.now()
	var fresh []agentproto.ChangelogRequest
	for _, u := range res.Updates {
		if !u.Security || u.Name == "" || !pkgversionValid(u.AvailableVersion) {
			continue
		}
		var got string
		err := tx.QueryRowContext(ctx, `INSERT INTO vuln_changelog_fetches (package, version, since_version, status, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (package, version) DO NOTHING RETURNING package`, u.Name, u.AvailableVersion,
			u.InstalledVersion, fetchPending, now).Scan(&got)
		if err == sql.ErrNoRows {
			continue
		}
		if err != nil {
			return fmt.Errorf("note the changelog of %s %s: %w", u.Name, u.AvailableVersion, err)
		}
		fresh = append(fresh, agentproto.ChangelogRequest{Name: u.Name, Version: u.AvailableVersion, SinceVersion: u.InstalledVersion})
	}
	if _, err := s.requestChangelogs(ctx, tx, deviceID, fresh); err != nil {
		return err
	}
	return s.CorrelateDevice(ctx, tx, deviceID)
}

func pkgversionValid(v string) bool { return v != "" && len(v) <= 256 }

// requestChangelogs queues package_changelog commands to a device for the pairs (at most
// MaxChangelogPackages a command) and marks them requested; devices sends them once tx
// commits.
func (s *Service) requestChangelogs(ctx context.Context, tx *sql.Tx, deviceID string, reqs []agentproto.ChangelogRequest) ([]devices.DeviceCommand, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	owners, err := devices.Owners(ctx, tx, []string{deviceID})
	if err != nil {
		return nil, err
	}
	o, ok := owners[deviceID]
	if !ok {
		return nil, nil
	}
	var cmds []devices.DeviceCommand
	actx := access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, ID: "vulnerabilities", Name: "vulnerability advisories",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: o.PartnerID, OrgID: o.OrgID}})
	now := s.now()
	for first := 0; first < len(reqs); first += changelogBatch {
		batch := reqs[first:min(first+changelogBatch, len(reqs))]
		payload, _ := json.Marshal(agentproto.PackageChangelog{Packages: batch})
		res, err := s.devices.SendBulkIn(actx, tx, devices.BulkInput{DeviceIDs: []string{deviceID}, Audited: true,
			OnlyOS: []string{agentproto.OSLinux}, CommandInput: devices.CommandInput{Type: agentproto.CommandPackageChangelog, Payload: payload,
				TimeoutSeconds: fetchTimeout}})
		if err != nil {
			return nil, fmt.Errorf("ask device %s for changelogs: %w", deviceID, err)
		}
		if len(res.Commands) != 1 {
			continue // left pending: the periodic fetch asks another device
		}
		cmds = append(cmds, res.Commands...)
		for _, q := range batch {
			if _, err := tx.ExecContext(ctx, `UPDATE vuln_changelog_fetches SET status = $1, device_id = $2, command_id = $3, requested_at = $4,
				attempts = attempts + 1 WHERE package = $5 AND version = $6`, fetchRequested, deviceID, res.Commands[0].ID, now, q.Name, q.Version); err != nil {
				return nil, fmt.Errorf("mark the changelog of %s %s requested: %w", q.Name, q.Version, err)
			}
		}
	}
	return cmds, nil
}

// onChangelog records a package_changelog result: each package's CVEs become advisories
// (source debian_changelog, fixed in the version asked) with their CVEs, and the devices
// having those packages are correlated again.
func (s *Service) onChangelog(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var res agentproto.PackageChangelogResult
	if r.Status == agentproto.ResultCompleted {
		if err := json.Unmarshal(r.Result, &res); err != nil {
			res = agentproto.PackageChangelogResult{}
		}
	}
	now := s.now()
	done := map[[2]string]bool{}
	var advs []advisoryRow
	var cves []cveRow
	for _, e := range res.Packages {
		done[[2]string{e.Name, e.Version}] = true
		status, errText := fetchDone, any(nil)
		if e.Error != "" {
			status, errText = fetchFailed, clip(e.Error, 500)
		}
		n := 0
		for _, c := range e.CVEs {
			if !cveID.MatchString(c) || n >= agentproto.MaxChangelogCVEs {
				continue
			}
			n++
			advs = append(advs, advisoryRow{source: SourceChangelog, pkg: e.Name, cve: c, fixed: e.Version})
			cves = append(cves, cveRow{id: c, severity: urgencySeverity(e.Urgency), source: "urgency"})
		}
		if _, err := tx.ExecContext(ctx, `UPDATE vuln_changelog_fetches SET status = $1, error = $2, cve_count = $3, done_at = $4
			WHERE package = $5 AND version = $6 AND command_id = $7`, status, errText, n, now, e.Name, e.Version, r.CommandID); err != nil {
			return fmt.Errorf("record the changelog of %s %s: %w", e.Name, e.Version, err)
		}
	}
	// Pairs of the command without an answer go back to pending, for another agent.
	if _, err := tx.ExecContext(ctx, `UPDATE vuln_changelog_fetches SET status = CASE WHEN attempts >= $1 THEN $2 ELSE $3 END, error = $4
		WHERE command_id = $5 AND status = $6`, maxFetchAttempts, fetchFailed, fetchPending, clip(firstNonEmpty(r.Error, "no answer for the package"), 500),
		r.CommandID, fetchRequested); err != nil {
		return fmt.Errorf("release unanswered changelogs: %w", err)
	}
	if len(advs) == 0 {
		return nil
	}
	pkgs, err := s.storeAdvisories(ctx, tx, advs, dedupeCVEs(cves))
	if err != nil {
		return err
	}
	ids, err := devices.DevicesWithSoftware(ctx, tx, pkgs)
	if err != nil {
		return err
	}
	c, err := s.newCorrelator(ctx, tx, pkgs)
	if err != nil {
		return err
	}
	_, err = s.correlateDevices(ctx, tx, ids, pkgs, c, nil)
	return err
}

func dedupeCVEs(in []cveRow) []cveRow {
	idx := map[string]int{}
	var out []cveRow
	for _, c := range in {
		if i, ok := idx[c.id]; ok {
			if severityRank[c.severity] > severityRank[out[i].severity] {
				out[i].severity = c.severity
			}
			continue
		}
		idx[c.id] = len(out)
		out = append(out, c)
	}
	return out
}

// FetchChangelogs asks, for the changelogs still pending (or requested too long ago), one
// online device that has the pair pending; pairs no device can answer wait for the next
// round. It returns the pairs requested.
func (s *Service) FetchChangelogs(ctx context.Context) (int, error) {
	now := s.now()
	type pair struct{ name, version, since string }
	todo, err := store.QueryAll(ctx, s.db, `SELECT package, version, since_version FROM vuln_changelog_fetches
		WHERE status = $1 OR (status = $2 AND requested_at < $3 AND attempts < $4) ORDER BY created_at, package LIMIT 200`,
		[]any{fetchPending, fetchRequested, now.Add(-fetchRetryAfter), maxFetchAttempts}, func(r store.Scanner) (pair, error) {
			var p pair
			return p, r.Scan(&p.name, &p.version, &p.since)
		})
	if err != nil {
		return 0, fmt.Errorf("read pending changelogs: %w", err)
	}
	byDevice := map[string][]agentproto.ChangelogRequest{}
	var order []string
	for _, p := range todo {
		ids, err := s.patches.DevicesPending(ctx, p.name, p.version)
		if err != nil {
			return 0, err
		}
		online, err := s.devices.OnlineAmong(ctx, ids)
		if err != nil {
			return 0, err
		}
		if len(online) == 0 {
			continue
		}
		d := online[0]
		if _, ok := byDevice[d]; !ok {
			order = append(order, d)
		}
		byDevice[d] = append(byDevice[d], agentproto.ChangelogRequest{Name: p.name, Version: p.version, SinceVersion: p.since})
	}
	n := 0
	for _, d := range order {
		var cmds []devices.DeviceCommand
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			// Failed for good after maxFetchAttempts.
			if _, err := tx.ExecContext(ctx, `UPDATE vuln_changelog_fetches SET status = $1, error = $2 WHERE status = $3 AND attempts >= $4
				AND requested_at < $5`, fetchFailed, "no agent answered", fetchRequested, maxFetchAttempts, now.Add(-fetchRetryAfter)); err != nil {
				return fmt.Errorf("give up unanswered changelog fetches: %w", err)
			}
			var err error
			cmds, err = s.requestChangelogs(ctx, tx, d, byDevice[d])
			return err
		})
		if err != nil {
			return n, fmt.Errorf("request changelogs from device %s: %w", d, err)
		}
		s.devices.Dispatch(ctx, cmds)
		n += len(byDevice[d])
	}
	return n, nil
}

func validateChangelog(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.PackageChangelog
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "package_changelog takes {packages: [{name, version, sinceVersion?}]}: "+err.Error())
	}
	if len(p.Packages) == 0 || len(p.Packages) > agentproto.MaxChangelogPackages {
		return nil, apperr.Invalid("payload.packages", "name 1 to 50 packages")
	}
	for i, q := range p.Packages {
		if strings.TrimSpace(q.Name) == "" || strings.TrimSpace(q.Version) == "" {
			return nil, apperr.Invalid(fmt.Sprintf("payload.packages[%d]", i), "a package needs a name and a version")
		}
	}
	return p, nil
}
