package vulnerabilities

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// advisory is one CVE of a package, fixed from fixed ("" when no fix is known).
type advisory struct{ cve, fixed string }

// cveInfo is what the findings copy of a CVE.
type cveInfo struct {
	severity string
	rank     int
	exploit  bool
}

// loadAdvisories returns the advisories by package, of the packages named (nil: all). Where
// sources disagree on a CVE's fixed version, the highest holds.
func loadAdvisories(ctx context.Context, q store.Querier, names []string) (map[string][]advisory, error) {
	out := map[string][]advisory{}
	type packageAdvisory struct {
		pkg string
		advisory
	}
	read := func(cond string, args []any) error {
		rows, err := store.QueryAll(ctx, q, `SELECT package, cve_id, fixed_version FROM vuln_advisories`+cond+` ORDER BY package, cve_id`, args,
			func(r store.Scanner) (packageAdvisory, error) {
				var pa packageAdvisory
				return pa, r.Scan(&pa.pkg, &pa.cve, &pa.fixed)
			})
		if err != nil {
			return fmt.Errorf("read advisories: %w", err)
		}
		for _, pa := range rows {
			list := out[pa.pkg]
			if n := len(list); n > 0 && list[n-1].cve == pa.cve {
				if higher(list[n-1].fixed, pa.fixed) {
					list[n-1].fixed = pa.fixed
				}
				continue
			}
			out[pa.pkg] = append(list, pa.advisory)
		}
		return nil
	}
	if names == nil {
		return out, read("", nil)
	}
	for first := 0; first < len(names); first += 400 {
		var a store.Args
		if err := read(" WHERE package IN "+a.In(names[first:min(first+400, len(names))]), a.Values()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// higher reports whether b is a higher fixed version than a ("" — no fix — is highest).
func higher(a, b string) bool {
	if a == "" {
		return false
	}
	if b == "" {
		return true
	}
	for _, m := range []string{agentproto.ManagerApt, agentproto.ManagerDnf} {
		if c, err := pkgversion.Compare(m, b, a); err == nil {
			return c > 0
		}
	}
	return b > a
}

// managerOf is the version ordering of a package source.
func managerOf(source string) string {
	switch source {
	case "rpm", "dnf", "yum":
		return agentproto.ManagerDnf
	}
	return agentproto.ManagerApt
}

func loadCVEs(ctx context.Context, q store.Querier, ids []string) (map[string]cveInfo, error) {
	out := map[string]cveInfo{}
	type cveRow struct {
		id string
		cveInfo
	}
	read := func(cond string, args []any) error {
		rows, err := store.QueryAll(ctx, q, `SELECT cve_id, severity, known_exploited FROM vuln_cves`+cond, args, func(r store.Scanner) (cveRow, error) {
			var c cveRow
			err := r.Scan(&c.id, &c.severity, &c.exploit)
			c.rank = severityRank[c.severity]
			return c, err
		})
		if err != nil {
			return fmt.Errorf("read CVEs: %w", err)
		}
		for _, c := range rows {
			out[c.id] = c.cveInfo
		}
		return nil
	}
	if ids == nil {
		return out, read("", nil)
	}
	for first := 0; first < len(ids); first += 400 {
		var a store.Args
		if err := read(" WHERE cve_id IN "+a.In(ids[first:min(first+400, len(ids))]), a.Values()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// correlator compares installed versions with advisories, once per (package, version).
type correlator struct {
	adv map[string][]advisory
	// cves holds every CVE when all is set, else those read so far (correlateDevices reads
	// the ones its findings need).
	cves map[string]cveInfo
	all  bool
	// affected caches the advisories a (manager, package, version) is below.
	affected map[string][]advisory
}

func (c *correlator) affectedBy(manager, pkg, version string) []advisory {
	key := manager + "\x00" + pkg + "\x00" + version
	if got, ok := c.affected[key]; ok {
		return got
	}
	var out []advisory
	for _, ad := range c.adv[pkg] {
		if ad.fixed == "" {
			out = append(out, ad)
			continue
		}
		if cmp, err := pkgversion.Compare(manager, version, ad.fixed); err == nil && cmp < 0 {
			out = append(out, ad)
		}
	}
	c.affected[key] = out
	return out
}

type findingKey struct{ device, cve, pkg string }

type wanted struct {
	partnerID, orgID, installed, fixed, manager string
}

type existing struct {
	id, org, status, installed, fixed, severity string
	patchID                                     sql.NullString
	exploit                                     bool
}

// correlateDevices brings the findings of the devices in step with their packages and the
// advisories, in tx: new findings open, findings whose package reached the fixed version
// (or left) patched, patched ones seen again open. names, when not nil, limits the work to
// those packages. c holds the advisories and CVEs of (at least) those packages.
//
// The groups whose findings changed are added to touched, or (touched nil) their by-software
// counts recomputed before it returns.
func (s *Service) correlateDevices(ctx context.Context, tx *sql.Tx, ids, names []string, c *correlator, touched groupSet) (int, error) {
	refresh := touched == nil
	if refresh {
		touched = groupSet{}
	}
	sw, err := devices.SoftwareOf(ctx, tx, ids, names)
	if err != nil {
		return 0, err
	}
	want := map[findingKey]wanted{}
	pkgSet := map[string]bool{}
	for _, p := range sw {
		if len(c.adv[p.Name]) == 0 {
			continue
		}
		m := managerOf(p.Source)
		for _, ad := range c.affectedBy(m, p.Name, p.Version) {
			k := findingKey{p.DeviceID, ad.cve, p.Name}
			if w, ok := want[k]; ok && !higher(w.installed, p.Version) {
				continue // two versions side by side: the lowest counts
			}
			want[k] = wanted{partnerID: p.PartnerID, orgID: p.OrgID, installed: p.Version, fixed: ad.fixed, manager: m}
			pkgSet[p.Name] = true
		}
	}
	if !c.all {
		var missing []string
		seen := map[string]bool{}
		for k := range want {
			if _, ok := c.cves[k.cve]; !ok && !seen[k.cve] {
				seen[k.cve] = true
				missing = append(missing, k.cve)
			}
		}
		if len(missing) > 0 {
			got, err := loadCVEs(ctx, tx, missing)
			if err != nil {
				return 0, err
			}
			for id, info := range got {
				c.cves[id] = info
			}
		}
	}
	// The pending patch of each (device, package): the highest version offered.
	patchOf := map[[2]string]patches.PendingPatch{}
	if len(pkgSet) > 0 {
		pkgs := make([]string, 0, len(pkgSet))
		for p := range pkgSet {
			pkgs = append(pkgs, p)
		}
		pend, err := patches.PendingFor(ctx, tx, ids, pkgs)
		if err != nil {
			return 0, err
		}
		for _, p := range pend {
			k := [2]string{p.DeviceID, p.Package}
			if have, ok := patchOf[k]; !ok || higher(have.Version, p.Version) {
				patchOf[k] = p
			}
		}
	}
	have := map[findingKey]existing{}
	for first := 0; first < len(ids); first += deviceChunk {
		var a store.Args
		cond := ""
		if names != nil {
			cond = " AND package IN " + a.In(names)
		}
		type keyed struct {
			key findingKey
			existing
		}
		rows, err := store.QueryAll(ctx, tx, `SELECT id, org_id, device_id, cve_id, package, status, installed_version, fixed_version, patch_id,
			severity, known_exploited FROM vuln_findings WHERE device_id IN `+a.In(ids[first:min(first+deviceChunk, len(ids))])+cond, a.Values(),
			func(r store.Scanner) (keyed, error) {
				var e keyed
				return e, r.Scan(&e.id, &e.org, &e.key.device, &e.key.cve, &e.key.pkg, &e.status, &e.installed, &e.fixed, &e.patchID, &e.severity,
					&e.exploit)
			})
		if err != nil {
			return 0, fmt.Errorf("read findings: %w", err)
		}
		for _, e := range rows {
			have[e.key] = e.existing
		}
	}
	now := s.now()
	var inserts []insertRow
	changes := 0
	for k, w := range want {
		info, ok := c.cves[k.cve]
		if !ok {
			info = cveInfo{severity: SeverityUnknown}
		}
		var patchID any
		if p, ok := patchOf[[2]string{k.device, k.pkg}]; ok && w.fixed != "" {
			if cmp, err := pkgversion.Compare(w.manager, p.Version, w.fixed); err == nil && cmp >= 0 {
				patchID = p.PatchID
			}
		}
		e, ok := have[k]
		if !ok {
			inserts = append(inserts, insertRow{k: k, w: w, info: info, patchID: patchID, now: now})
			touched.add(w.orgID, GroupKey(k.pkg))
			continue
		}
		status := e.status
		if status == StatusPatched {
			status = StatusOpen
		}
		samePatch := (patchID == nil && !e.patchID.Valid) || (patchID != nil && e.patchID.Valid && e.patchID.String == patchID)
		if status == e.status && e.installed == w.installed && e.fixed == w.fixed && samePatch && e.severity == info.severity && e.exploit == info.exploit {
			continue
		}
		changes++
		touched.add(e.org, GroupKey(k.pkg))
		var q string
		if status != e.status {
			q = `, patched_at = NULL, accepted_until = NULL, first_seen = $9`
		} else {
			q = `, first_seen = first_seen`
		}
		if _, err := tx.ExecContext(ctx, `UPDATE vuln_findings SET status = $1, installed_version = $2, fixed_version = $3, patch_id = $4,
			severity = $5, severity_rank = $6, known_exploited = $7, last_seen = $9, updated_at = $9`+q+` WHERE id = $8`,
			status, w.installed, w.fixed, patchID, info.severity, info.rank, info.exploit, e.id, now); err != nil {
			return 0, fmt.Errorf("update finding %s: %w", e.id, err)
		}
	}
	var gone []string
	for k, e := range have {
		if _, ok := want[k]; !ok && e.status != StatusPatched {
			gone = append(gone, e.id)
			touched.add(e.org, GroupKey(k.pkg))
		}
	}
	for first := 0; first < len(gone); first += 400 {
		var a store.Args
		if _, err := tx.ExecContext(ctx, `UPDATE vuln_findings SET status = `+a.Add(StatusPatched)+`, patched_at = `+a.Add(now)+
			`, patch_id = NULL, updated_at = `+a.Add(now)+` WHERE id IN `+a.In(gone[first:min(first+400, len(gone))]), a.Values()...); err != nil {
			return 0, fmt.Errorf("mark findings patched: %w", err)
		}
	}
	if err := insertFindings(ctx, tx, inserts); err != nil {
		return 0, err
	}
	if refresh {
		if err := s.refreshGroups(ctx, tx, touched); err != nil {
			return 0, err
		}
	}
	return len(inserts) + changes + len(gone), nil
}

type insertRow struct {
	k       findingKey
	w       wanted
	info    cveInfo
	patchID any
	now     time.Time
}

// insertFindings inserts new open findings, many rows a statement.
func insertFindings(ctx context.Context, tx *sql.Tx, rows []insertRow) error {
	const perStatement = 25
	for first := 0; first < len(rows); first += perStatement {
		var a store.Args
		vals := make([]string, 0, perStatement)
		for _, r := range rows[first:min(first+perStatement, len(rows))] {
			vals = append(vals, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(r.w.partnerID), a.Add(r.w.orgID), a.Add(r.k.device),
				a.Add(r.k.cve), a.Add(r.k.pkg), a.Add(GroupKey(r.k.pkg)), a.Add(r.w.installed), a.Add(r.w.fixed), a.Add(r.info.severity),
				a.Add(r.info.rank), a.Add(r.info.exploit), a.Add(StatusOpen), a.Add(r.patchID), a.Add(r.now)}, ", ")+", "+
				"$"+fmt.Sprint(len(a.Values()))+", $"+fmt.Sprint(len(a.Values()))+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO vuln_findings (id, partner_id, org_id, device_id, cve_id, package, group_key,
			installed_version, fixed_version, severity, severity_rank, known_exploited, status, patch_id, first_seen, last_seen, updated_at)
			VALUES `+strings.Join(vals, ", ")+` ON CONFLICT (device_id, cve_id, package) DO NOTHING`, a.Values()...); err != nil {
			return fmt.Errorf("insert findings: %w", err)
		}
	}
	return nil
}

func (s *Service) newCorrelator(ctx context.Context, q store.Querier, names []string) (*correlator, error) {
	adv, err := loadAdvisories(ctx, q, names)
	if err != nil {
		return nil, err
	}
	c := &correlator{adv: adv, cves: map[string]cveInfo{}, affected: map[string][]advisory{}, all: names == nil}
	if c.all {
		if c.cves, err = loadCVEs(ctx, q, nil); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// CorrelateAll correlates every live device with every advisory, deviceChunk devices a
// transaction, and returns the findings written.
func (s *Service) CorrelateAll(ctx context.Context) (int, error) {
	c, err := s.newCorrelator(ctx, s.db, nil)
	if err != nil {
		return 0, err
	}
	total, after, done := 0, "", false
	touched := groupSet{}
	for !done {
		// Each chunk of devices is read in the transaction that correlates it.
		err = s.db.Write(ctx, func(tx *sql.Tx) error {
			ids, err := devices.LiveIDsAfter(ctx, tx, after, deviceChunk)
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				done = true
				return nil
			}
			after = ids[len(ids)-1]
			n, err := s.correlateDevices(ctx, tx, ids, nil, c, touched)
			total += n
			return err
		})
		if err != nil {
			return total, fmt.Errorf("correlate devices: %w", err)
		}
	}
	return total, s.refreshInBatches(ctx, touched)
}

// refreshInBatches recomputes the counts of groups, 500 a transaction.
func (s *Service) refreshInBatches(ctx context.Context, groups groupSet) error {
	all := groups.sorted()
	for first := 0; first < len(all); first += 500 {
		batch := groupSet{}
		for _, g := range all[first:min(first+500, len(all))] {
			batch[g] = true
		}
		if err := s.db.Write(ctx, func(tx *sql.Tx) error { return s.refreshGroups(ctx, tx, batch) }); err != nil {
			return err
		}
	}
	return nil
}

// correlatePackages correlates the devices having one of names, for those packages only, in
// transactions of deviceChunk devices; it returns the devices correlated.
func (s *Service) correlatePackages(ctx context.Context, names []string) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	ids, err := s.devices.DevicesWithSoftware(ctx, names)
	if err != nil {
		return 0, err
	}
	c, err := s.newCorrelator(ctx, s.db, names)
	if err != nil {
		return 0, err
	}
	touched := groupSet{}
	for first := 0; first < len(ids); first += deviceChunk {
		chunk := ids[first:min(first+deviceChunk, len(ids))]
		if err := s.db.Write(ctx, func(tx *sql.Tx) error {
			_, err := s.correlateDevices(ctx, tx, chunk, names, c, touched)
			return err
		}); err != nil {
			return first, err
		}
	}
	return len(ids), s.refreshInBatches(ctx, touched)
}

// CorrelateDevice correlates one device's packages with every advisory of them, in tx.
func (s *Service) CorrelateDevice(ctx context.Context, tx *sql.Tx, deviceID string) error {
	sw, err := devices.SoftwareOf(ctx, tx, []string{deviceID}, nil)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(sw))
	seen := map[string]bool{}
	for _, p := range sw {
		if !seen[p.Name] {
			seen[p.Name] = true
			names = append(names, p.Name)
		}
	}
	c, err := s.newCorrelator(ctx, tx, names)
	if err != nil {
		return err
	}
	// Every package of the device (nil): findings of packages it no longer has become patched.
	_, err = s.correlateDevices(ctx, tx, []string{deviceID}, nil, c, nil)
	return err
}

// DeviceChanged re-correlates a device when its inventory changed since its last correlation
// (the devices' Changed hook also runs for status and tag changes, which change nothing here).
func (s *Service) DeviceChanged(ctx context.Context, tx *sql.Tx, deviceID string) error {
	at, ok, err := devices.InventoryAt(ctx, tx, deviceID)
	if err != nil || !ok || at.IsZero() {
		return err
	}
	var mark sql.NullTime
	err = tx.QueryRowContext(ctx, `SELECT inventory_at FROM vuln_device_marks WHERE device_id = $1`, deviceID).Scan(&mark)
	if err != nil && err != sql.ErrNoRows {
		return fmt.Errorf("read the correlation mark of device %s: %w", deviceID, err)
	}
	if mark.Valid && mark.Time.Equal(at) {
		return nil
	}
	if err := s.CorrelateDevice(ctx, tx, deviceID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO vuln_device_marks (device_id, inventory_at) VALUES ($1, $2)
		ON CONFLICT (device_id) DO UPDATE SET inventory_at = excluded.inventory_at`, deviceID, at); err != nil {
		return fmt.Errorf("mark the correlation of device %s: %w", deviceID, err)
	}
	return nil
}
