package security_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"

	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// BenchmarkSecurityReads measures GET /security/status (a page of 100) and /security/dashboard
// (every device judged and scored) over 10,000 devices of one organization.
func BenchmarkSecurityReads(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	snap, _ := json.Marshal(healthy())
	now := store.Now()
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for i := range 10000 {
			state := []string{"protected", "at_risk", "unprotected", "offline"}[i%4]
			if _, err := tx.Exec(`INSERT INTO security_device_status (device_id, partner_id, org_id, site_id, hostname, os_name, os_version,
				online, state, provider, av_installed, av_running, firewall_enabled, encryption_status, password_summary, password_max_days,
				password_min_length, admin_count, exposed_ports, auto_updates, snapshot, collected_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, 'Debian GNU/Linux', $6, $7, $8, 'clamav', TRUE, $9, $10, 'encrypted', 'x', 90, 12, 2, $11, TRUE,
				$12, $13, $13)`, store.NewID(), ten.PartnerID, ten.OrgID, ten.SiteID, fmt.Sprint("host-", i), fmt.Sprint(11+i%2),
				state != "offline", state, i%3 == 0, i%5 != 0, i%20, string(snap), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/security/status?limit=100", "/security/status?limit=100&state=at_risk", "/security/dashboard"} {
		b.Run(path, func(b *testing.B) {
			apptest.MeasureGets(b, e.Server.URL+api+path, ten.Partner, 4)
		})
	}
}
