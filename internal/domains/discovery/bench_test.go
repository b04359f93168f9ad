package discovery_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// seedAssets writes n assets of the tenant's organization, in 10.x.y.z order.
func seedAssets(b *testing.B, e *apptest.Env, ten apptest.Tenant, n int) {
	now := store.Now()
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for first := 0; first < n; first += 500 {
			var a store.Args
			at := a.Add(now)
			rows := make([]string, 0, 500)
			for i := first; i < min(first+500, n); i++ {
				ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				key := fmt.Sprintf("0a%02x%02x%02x", i>>16&255, i>>8&255, i&255)
				rows = append(rows, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(ten.PartnerID), a.Add(ten.OrgID), a.Add(ten.SiteID),
					a.Add(ip), a.Add(key), a.Add(fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)),
					a.Add(fmt.Sprintf("host-%05d", i)), a.Add([]string{"server", "workstation", "printer", "unknown"}[i%4]),
					a.Add("[22,80,443]"), a.Add("new"), at, at, at}, ", ")+")")
			}
			if _, err := tx.Exec(`INSERT INTO discovery_assets (id, partner_id, org_id, site_id, ip, ip_key, mac, hostname, asset_type,
				open_ports, status, first_seen_at, last_seen_at, updated_at) VALUES `+strings.Join(rows, ", "), a.Values()...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if e.App.DB.Dialect == store.Postgres {
		if _, err := e.App.DB.SQL.Exec(`VACUUM ANALYZE discovery_assets`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiscoveryAssetList is an authenticated GET /discovery/assets?limit=100 over 10,000
// assets of one organization, from 16 concurrent clients, as its partner's admin: the first
// page, a page deep into the cursor, and a search by part of a hostname.
func BenchmarkDiscoveryAssetList(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	seedAssets(b, e, ten, 10_000)
	base := e.Server.URL + "/api/v1/discovery/assets?limit=100"
	cursor := ""
	for range 50 {
		var page struct {
			Pagination struct{ Cursor string }
		}
		e.Must(200, ten.Partner, "GET", "/api/v1/discovery/assets?limit=100&cursor="+url.QueryEscape(cursor), nil).JSON(b, &page)
		cursor = page.Pagination.Cursor
	}
	for _, bc := range []struct{ name, url string }{
		{"FirstPage", base},
		{"DeepPage", base + "&cursor=" + url.QueryEscape(cursor)},
		{"Search", base + "&search=host-07"},
		{"Type", base + "&type=printer"},
	} {
		b.Run(bc.name, func(b *testing.B) { apptest.MeasureGets(b, bc.url, ten.Partner, 16) })
	}
}
