package vulnerabilities

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
)

// maxCVELength bounds a CVE identifier (the API's own bound on cveId).
const maxCVELength = 40

// validStatus reports whether status names a finding status ("" for the default).
func validStatus(status string) bool {
	switch status {
	case "", StatusOpen, StatusAccepted, StatusMitigated, StatusPatched:
		return true
	}
	return false
}

// CVE returns a CVE as the by-CVE view shows it, its counts taken over its open findings in
// scope, with the packages of all its findings in scope. A CVE without any finding in scope
// (whatever their status) is 404, as for CVEDevices.
func (s *Service) CVE(ctx context.Context, cve string) (VulnCVE, error) {
	cve = strings.ToUpper(strings.TrimSpace(cve))
	if cve == "" || len(cve) > maxCVELength {
		return VulnCVE{}, apperr.NotFound("CVE")
	}
	var a store.Args
	where := store.Where(append(findingFilter(access.ScopeFrom(ctx), &a), "f.cve_id = "+a.Add(cve)))
	open := a.Add(StatusOpen)
	v, err := scanCVE(s.db.QueryRowContext(ctx, `SELECT g.cve_id, COALESCE(c.severity, 'unknown'), c.cvss_score, g.ke, c.epss_score,
		COALESCE(c.summary, ''), g.devs, g.n, g.ready, g.fs FROM (SELECT f.cve_id, MAX(CASE WHEN f.known_exploited THEN 1 ELSE 0 END) AS ke,
		COUNT(DISTINCT CASE WHEN f.status = `+open+` THEN f.device_id END) AS devs, SUM(CASE WHEN f.status = `+open+` THEN 1 ELSE 0 END) AS n,
		SUM(CASE WHEN f.status = `+open+` AND f.patch_id IS NOT NULL THEN 1 ELSE 0 END) AS ready, MIN(f.first_seen) AS fs
		FROM vuln_findings f WHERE `+where+` GROUP BY f.cve_id) g LEFT JOIN vuln_cves c ON c.cve_id = g.cve_id`, a.Values()...))
	if errors.Is(err, sql.ErrNoRows) {
		return VulnCVE{}, apperr.NotFound("CVE")
	}
	if err != nil {
		return VulnCVE{}, fmt.Errorf("load CVE %s: %w", cve, err)
	}
	var b store.Args
	conds := append(findingFilter(access.ScopeFrom(ctx), &b), "f.cve_id = "+b.Add(cve))
	pkgs, err := store.QueryStrings(ctx, s.db, `SELECT DISTINCT f.package FROM vuln_findings f WHERE `+store.Where(conds)+` ORDER BY f.package`,
		b.Values()...)
	if err != nil {
		return VulnCVE{}, fmt.Errorf("list the packages of CVE %s: %w", cve, err)
	}
	v.Packages = jsonenc.NonNil(pkgs)
	return v, nil
}

// DeviceFindings lists a device's findings in scope, worst first (severity, known exploited,
// CVSS score, then CVE and package); status filters them (default: every status but
// patched). A device out of scope is 404.
func (s *Service) DeviceFindings(ctx context.Context, deviceID, status string, page store.Page) ([]VulnFinding, string, *int, error) {
	if !validStatus(status) {
		return nil, "", nil, apperr.Invalid("status", "open, accepted, mitigated or patched")
	}
	if !store.ValidID(deviceID) {
		return nil, "", nil, apperr.NotFound("device")
	}
	if _, err := s.devices.Get(ctx, deviceID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := append(findingFilter(access.ScopeFrom(ctx), &a), "f.device_id = "+a.Add(deviceID))
	if status != "" {
		conds = append(conds, "f.status = "+a.Add(status))
	} else {
		conds = append(conds, "f.status <> "+a.Add(StatusPatched))
	}
	where := store.Where(conds)
	out, next, total, err := store.RankedList(ctx, s.db, store.RankedQuery{Args: &a, Count: `SELECT COUNT(*) FROM vuln_findings f WHERE ` + where,
		Select: `SELECT ` + findingColumns + findingFrom + ` WHERE ` + where + ` ORDER BY f.severity_rank DESC,
		CASE WHEN f.known_exploited THEN 1 ELSE 0 END DESC, COALESCE(c.cvss_score, 0) DESC, f.cve_id, f.package, f.id`}, page, scanFinding)
	if err != nil {
		return nil, "", nil, fmt.Errorf("list the findings of device %s: %w", deviceID, err)
	}
	return out, next, total, nil
}
