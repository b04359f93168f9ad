package incidents_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// seedFeed inserts n feed rows (half tracked, half findings of both providers, severities and
// detection times spread) into the tenant's organization, with one prepared statement in
// transactions of 10,000 rows.
func seedFeed(b *testing.B, e *apptest.Env, ten apptest.Tenant, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 10000
	now := store.Now()
	for first := 0; first < n; first += batch {
		err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
			stmt, err := tx.Prepare(`INSERT INTO incidents (id, partner_id, org_id, kind, source, source_id, origin, origin_ref, title,
				severity, status, edr_status, detected_at, in_feed, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)`)
			if err != nil {
				return err
			}
			defer stmt.Close()
			for i := first; i < min(first+batch, n); i++ {
				id := store.NewID()
				kind, source, origin, status := "tracked", "native", "alert", "open"
				var ref, edr any = id, nil
				if i%2 == 1 {
					kind, origin, ref, status, edr = "finding", "edr", nil, "new", "new"
					source = []string{"edr_a", "edr_b"}[i%4/2]
				}
				if _, err := stmt.Exec(id, ten.PartnerID, ten.OrgID, kind, source, "src-"+id, origin, ref, "Incident "+id[:8], 1+rng.IntN(4),
					status, edr, base.Add(time.Duration(rng.IntN(365*24*3600))*time.Second), true, now); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
	if e.App.DB.Dialect == store.Postgres {
		_, _ = e.App.DB.SQL.Exec(`VACUUM ANALYZE incidents`)
	} else {
		_, _ = e.App.DB.SQL.Exec(`ANALYZE`)
	}
}

// BenchmarkIncidentFeed reads the feed over 200,000 rows of one partner, from 8 concurrent
// clients (INCIDENT_FEED_CLIENTS changes it): the first page and page 400 (25 rows a page), as a partner admin (tracked and
// findings) and as a caller with alerts:read only (tracked only).
func BenchmarkIncidentFeed(b *testing.B) {
	e := apptest.New(b)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Bench")
	seedFeed(b, e, ten, 200000)
	f := fixture{e: e, admin: admin, a: ten}
	clients := 8
	if v := os.Getenv("INCIDENT_FEED_CLIENTS"); v != "" {
		_, _ = fmt.Sscan(v, &clients)
	}
	alertsOnly := f.roleUserB(b, ten)
	for _, c := range []struct {
		name   string
		caller apptest.Caller
		query  string
	}{
		{"admin/page1", ten.Partner, ""},
		{"admin/page400", ten.Partner, "page=400"},
		{"admin/page400-kind-finding", ten.Partner, "page=400&kind=finding"},
		{"alerts-only/page1", alertsOnly, ""},
		{"alerts-only/page400", alertsOnly, "page=400"},
	} {
		b.Run(c.name, func(b *testing.B) {
			apptest.MeasureGets(b, e.Server.URL+api+"/incidents/feed?"+c.query, c.caller, clients)
		})
	}
}

func (f fixture) roleUserB(b *testing.B, ten apptest.Tenant) apptest.Caller {
	var role struct {
		ID string `json:"id"`
	}
	f.e.Must(201, ten.Partner, "POST", api+"/roles", map[string]any{"name": "BenchAlerts", "scope": "partner",
		"permissions": []string{"alerts:read"}}).JSON(b, &role)
	_, c := f.e.CreateUser("bench-alerts@gale.test", "partner", ten.PartnerID, "", role.ID)
	return c
}
