// Package seed writes a large fleet straight into the database, for the benchmarks and load
// scripts that need many devices without enrolling them one by one.
package seed

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Partner inserts a partner named name and returns its ID.
func Partner(ctx context.Context, db *store.DB, name string) (string, error) {
	id, now := store.NewID(), store.Now()
	_, err := db.SQL.ExecContext(ctx, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)`,
		id, name, "seed-"+id, now)
	if err != nil {
		return "", fmt.Errorf("insert partner: %w", err)
	}
	return id, nil
}

// Orgs is how many organizations Devices spreads its devices over.
const Orgs = 100

// Devices inserts n enrolled devices spread over Orgs new organizations (one site each) of the
// partner, in one transaction: the i-th is named host-%06d, was last seen i seconds ago and
// carries the metrics sample its last heartbeat left. status is their status: "online" as in
// a benchmark of an instant, "offline" for a running server, whose sweep would otherwise mark
// every device that no agent keeps alive offline, one write each, in the middle of a
// measurement.
func Devices(ctx context.Context, db *store.DB, partnerID string, n int, status string) error {
	const batch = 500
	now := store.Now()
	type place struct{ org, site string }
	places := make([]place, Orgs)
	err := db.Write(ctx, func(tx *sql.Tx) error {
		for i := range places {
			places[i] = place{store.NewID(), store.NewID()}
			if _, err := tx.ExecContext(ctx, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $5)`, places[i].org, partnerID, fmt.Sprintf("Customer %03d", i),
				fmt.Sprintf("seed-%s-%03d", partnerID, i), now); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO sites (id, partner_id, org_id, name, created_at, updated_at)
				VALUES ($1, $2, $3, 'Main Site', $4, $4)`, places[i].site, partnerID, places[i].org, now); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE partners SET org_count = org_count + $1 WHERE id = $2`, Orgs, partnerID); err != nil {
			return err
		}
		for first := 0; first < n; first += batch {
			var a store.Args
			values := make([]string, 0, batch)
			for i := first; i < min(first+batch, n); i++ {
				p := places[i%Orgs]
				seen := now.Add(-time.Duration(i) * time.Second)
				metrics := fmt.Sprintf(`{"cpuPercent":%.1f,"ramPercent":%.1f,"ramUsedMb":%d,"ramTotalMb":16384,"diskPercent":%.1f,`+
					`"diskUsedGb":%.1f,"diskTotalGb":512,"processCount":%d,"load1":%.2f}`, float64(i%1000)/10, float64(i%997)/10,
					i%16384, float64(i%991)/10, float64(i%5120)/10, 100+i%300, float64(i%400)/100)
				values = append(values, "("+a.Add(store.NewID())+", "+a.Add(partnerID)+", "+a.Add(p.org)+", "+a.Add(p.site)+", "+
					a.Add(fmt.Sprintf("host-%06d", i))+", "+a.Add(status)+", 'linux', 'Debian GNU/Linux', '12', "+a.Add(now)+", "+
					a.Add(now)+", "+a.Add(now)+", "+a.Add(seen)+", "+a.Add(metrics)+")")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, os_type,
				os_name, os_version, created_at, updated_at, enrolled_at, last_seen_at, metrics) VALUES `+strings.Join(values, ", "),
				a.Values()...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed %d devices: %w", n, err)
	}
	return nil
}

// Agent is a seeded agent's credentials, as its enrollment would have returned them.
type Agent struct {
	DeviceID string
	Token    string
}

// agentTokenPrefix starts every agent token (the server's devices package tells an agent's
// token from its watchdog's by it).
const agentTokenPrefix = "gale_at_"

// Agents inserts n devices into the first site of the partner's first organization, each
// with an agent token, as enrolled agents that have not reported yet (pending, never seen),
// in one transaction: enrolling 100,000 agents one request at a time takes many minutes,
// this a few seconds of database time. It returns their credentials.
func Agents(ctx context.Context, db *store.DB, partnerID string, n int) ([]Agent, error) {
	const batch = 500
	agents := make([]Agent, n)
	err := db.Write(ctx, func(tx *sql.Tx) error {
		var orgID, siteID string
		if err := tx.QueryRowContext(ctx, `SELECT org_id, id FROM sites WHERE partner_id = $1 ORDER BY org_id, id LIMIT 1`,
			partnerID).Scan(&orgID, &siteID); err != nil {
			return fmt.Errorf("find a site of partner %s: %w", partnerID, err)
		}
		now := store.Now()
		for first := 0; first < n; first += batch {
			var a store.Args
			values := make([]string, 0, batch)
			for i := first; i < min(first+batch, n); i++ {
				agents[i] = Agent{DeviceID: store.NewID(), Token: secrets.Token(agentTokenPrefix, 32)}
				values = append(values, "("+a.Add(agents[i].DeviceID)+", "+a.Add(partnerID)+", "+a.Add(orgID)+", "+a.Add(siteID)+", "+
					a.Add(fmt.Sprintf("sim-%06d", i))+", 'pending', 'linux', '12', 'amd64', 'sim', "+
					a.Add(secrets.Hash(agents[i].Token))+", "+a.Add(now)+", "+a.Add(now)+", "+a.Add(now)+")")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, os_type,
				os_version, architecture, agent_version, agent_token_hash, created_at, updated_at, enrolled_at) VALUES `+
				strings.Join(values, ", "), a.Values()...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("seed %d agents: %w", n, err)
	}
	return agents, nil
}

// Settle brings a freshly seeded database to its steady state before measuring. PostgreSQL's
// autovacuum would soon vacuum and analyze the new rows, in the middle of a measurement; do
// it now. (On SQLite, statistics make bound values re-plan every statement, so the server
// never creates them.)
func Settle(ctx context.Context, db *store.DB) error {
	if db.Dialect != store.Postgres {
		return nil
	}
	for _, stmt := range []string{`VACUUM ANALYZE`, `CHECKPOINT`} {
		if _, err := db.SQL.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}
