package vulnerabilities_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// insertMany runs multi-row INSERTs of n rows, row(i, a) rendering row i's placeholders.
func insertMany(b *testing.B, db *store.DB, head string, n, perStatement int, row func(i int, a *store.Args) string) {
	b.Helper()
	for first := 0; first < n; first += perStatement * 250 {
		err := db.Write(context.Background(), func(tx *sql.Tx) error {
			for s := first; s < min(first+perStatement*250, n); s += perStatement {
				var a store.Args
				vals := make([]string, 0, perStatement)
				for i := s; i < min(s+perStatement, n); i++ {
					vals = append(vals, row(i, &a))
				}
				if _, err := tx.Exec(head+" VALUES "+strings.Join(vals, ", "), a.Values()...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func tuple(a *store.Args, v ...any) string {
	marks := make([]string, len(v))
	for i, x := range v {
		marks[i] = a.Add(x)
	}
	return "(" + strings.Join(marks, ", ") + ")"
}

// fleet inserts n devices of the tenant's organization and returns their IDs.
func fleet(b *testing.B, e *apptest.Env, ten apptest.Tenant, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = store.NewID()
	}
	now := store.Now()
	insertMany(b, e.App.DB, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, os_type, os_name, os_version,
		created_at, updated_at, enrolled_at, last_seen_at, inventory_at)`, n, 20, func(i int, a *store.Args) string {
		return tuple(a, ids[i], ten.PartnerID, ten.OrgID, ten.SiteID, fmt.Sprint("host-", i), "online", "linux", "Debian GNU/Linux", "12", now, now,
			now, now, now)
	})
	return ids
}

// BenchmarkCorrelation correlates 2,000 devices of 1,500 packages each against 50,000
// advisories (5 for each of 10,000 packages; 1 in 50 fixed above what two thirds of the
// devices have: about 200,000 findings), then one device's inventory change.
func BenchmarkCorrelation(b *testing.B) {
	const devicesN, pkgsPerDevice, pkgNames, perPkg = 2000, 1500, 10000, 5
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	s := app.Service[*vulnerabilities.Service](e.App)
	ids := fleet(b, e, ten, devicesN)
	start := time.Now()
	insertMany(b, e.App.DB, `INSERT INTO device_software (id, device_id, name, version, publisher, architecture, install_date, size_bytes,
		source)`, devicesN*pkgsPerDevice, 40, func(i int, a *store.Args) string {
		d, p := i/pkgsPerDevice, i%pkgsPerDevice
		return tuple(a, store.NewID(), ids[d], fmt.Sprintf("pkg%05d", p), fmt.Sprintf("2.0-%d", d%3+1), "", "amd64", "", 0, "dpkg")
	})
	now := store.Now()
	insertMany(b, e.App.DB, `INSERT INTO vuln_advisories (id, source, package, cve_id, fixed_version, release, created_at, updated_at)`,
		pkgNames*perPkg, 40, func(i int, a *store.Args) string {
			fixed := fmt.Sprintf("1.%d-1", i%7)
			if i%50 == 0 {
				fixed = "2.0-3"
			}
			return tuple(a, store.NewID(), "osv", fmt.Sprintf("pkg%05d", i/perPkg), fmt.Sprintf("CVE-2026-%06d", i), fixed, "", now, now)
		})
	insertMany(b, e.App.DB, `INSERT INTO vuln_cves (cve_id, severity, severity_source, cvss_score, known_exploited, epss_score, summary, updated_at)`,
		pkgNames*perPkg, 40, func(i int, a *store.Args) string {
			return tuple(a, fmt.Sprintf("CVE-2026-%06d", i), []string{"critical", "high", "medium", "low"}[i%4], "import", 5.0, i%97 == 0, nil, "", now)
		})
	b.Logf("setup %s", time.Since(start).Round(time.Millisecond))
	b.Run("all", func(b *testing.B) {
		for range b.N {
			if _, err := e.App.DB.SQL.Exec(`DELETE FROM vuln_findings`); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			n, err := s.CorrelateAll(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(time.Since(t0).Seconds(), "s/correlation")
			b.ReportMetric(float64(n), "findings")
		}
	})
	dev := app.Service[*devices.Service](e.App)
	ag := devices.Agent{DeviceID: ids[0], PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
	inv := agentproto.Inventory{Hostname: "host-0", OS: agentproto.OSInfo{Type: agentproto.OSLinux}}
	for p := range pkgsPerDevice {
		inv.Software = append(inv.Software, agentproto.Software{Name: fmt.Sprintf("pkg%05d", p), Version: "2.0-1", Source: "dpkg", Architecture: "amd64"})
	}
	if err := dev.StoreInventory(context.Background(), ag, inv); err != nil {
		b.Fatal(err)
	}
	b.Run("device", func(b *testing.B) {
		for i := range b.N {
			// One package moves up (fixing its findings) or back.
			inv.Software[0].Version = []string{"2.0-3", "2.0-1"}[i%2]
			if err := dev.StoreInventory(context.Background(), ag, inv); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("device-correlation-only", func(b *testing.B) {
		for range b.N {
			if err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error { return s.CorrelateDevice(context.Background(), tx, ids[1]) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSoftwareView measures GET /vulnerabilities/software for a partner whose
// organizations hold 1,000,000 open findings (5,000 devices, 2,000 groups).
func BenchmarkSoftwareView(b *testing.B) {
	const devicesN, groupsN, orgsN = 5000, 2000, 10
	findingsN := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("VULN_BENCH_FINDINGS")); err == nil && n > 0 {
		findingsN = n
	}
	e := apptest.New(b)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Bench")
	orgs := []string{ten.OrgID}
	for i := 1; i < orgsN; i++ {
		orgs = append(orgs, e.CreateOrg(admin, ten.PartnerID, fmt.Sprint("Org ", i)))
	}
	devs := make([]string, devicesN)
	for i := range devs {
		devs[i] = store.NewID()
	}
	start, now := time.Now(), store.Now()
	insertMany(b, e.App.DB, `INSERT INTO vuln_findings (id, partner_id, org_id, device_id, cve_id, package, group_key, installed_version,
		fixed_version, severity, severity_rank, known_exploited, status, patch_id, first_seen, last_seen, updated_at)`, findingsN, 20,
		func(i int, a *store.Args) string {
			d, g := i%devicesN, (i/devicesN+i)%groupsN
			var patch any
			if i%3 == 0 {
				patch = store.NewID()
			}
			sev := []string{"critical", "high", "medium", "low"}[i%4]
			return tuple(a, store.NewID(), ten.PartnerID, orgs[d%orgsN], devs[d], fmt.Sprintf("CVE-2026-%06d", i%50000), fmt.Sprintf("pkg%04d", g),
				fmt.Sprintf("pkg:pkg%04d", g), "1.0-1", fmt.Sprintf("1.%d-1", i%9+1), sev, 4-i%4, i%101 == 0, "open", patch, now, now, now)
		})
	if err := app.Service[*vulnerabilities.Service](e.App).RecountGroups(context.Background()); err != nil {
		b.Fatal(err)
	}
	if _, err := e.App.DB.SQL.Exec(`ANALYZE`); err != nil {
		b.Logf("analyze: %v", err)
	}
	b.Logf("setup of %d findings %s", findingsN, time.Since(start).Round(time.Millisecond))
	b.Run("get", func(b *testing.B) {
		apptest.MeasureGets(b, e.Server.URL+"/api/v1/vulnerabilities/software", ten.Partner, 4)
	})
}
