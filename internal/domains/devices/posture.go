package devices

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// maxPostureProducts caps the products one inventory may report.
const maxPostureProducts = 100

// storePosture replaces the device's management products with those an inventory reports;
// an inventory without them (an agent that does not detect them) leaves the last report.
func storePosture(ctx context.Context, tx *sql.Tx, deviceID string, products []agentproto.ManagementProduct, now time.Time) error {
	if products == nil {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM device_posture WHERE device_id = $1`, deviceID); err != nil {
		return err
	}
	seen := map[string]bool{}
	var a store.Args
	var rows []string
	for _, p := range products[:min(len(products), maxPostureProducts)] {
		p.Product = CleanLine(p.Product, 100)
		if p.Product == "" || seen[p.Product] {
			continue
		}
		seen[p.Product] = true
		if p.Status != agentproto.ProductActive {
			p.Status = agentproto.ProductInstalled
		}
		rows = append(rows, "("+strings.Join([]string{a.Add(deviceID), a.Add(p.Product), a.Add(CleanLine(p.Name, 200)),
			a.Add(CleanLine(p.Category, 50)), a.Add(p.Status), a.Add(CleanLine(p.Version, 200)), a.Add(CleanLine(p.Evidence, 1000))}, ", ")+")")
	}
	if len(rows) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_posture (device_id, product, name, category, status, version, evidence) VALUES `+
			strings.Join(rows, ", "), a.Values()...); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE devices SET posture_at = $1 WHERE id = $2`, now, deviceID)
	return err
}

// PostureProduct counts the devices of an organization with a product in one status.
type PostureProduct struct {
	Product     string `json:"product"`
	Name        string `json:"name"`
	Category    string `json:"category" doc:"rmm, remote_access, endpoint_security, backup or patch_management."`
	Status      string `json:"status" enum:"active,installed" doc:"active: its service runs; installed: present, its service not running."`
	DeviceCount int    `json:"deviceCount"`
}

// PostureCounts are the devices of a scope, and those that never reported their management
// products or last did before the staleness limit.
type PostureCounts struct {
	Devices      int `json:"devices"`
	NeverScanned int `json:"neverScanned"`
	Stale        int `json:"stale"`
}

// PostureOrg is one organization's management posture.
type PostureOrg struct {
	OrgID    string           `json:"orgId"`
	Products []PostureProduct `json:"products"`
	PostureCounts
}

// PostureSummary is the management posture of the organizations in scope.
type PostureSummary struct {
	Orgs          []PostureOrg  `json:"orgs"`
	Totals        PostureCounts `json:"totals"`
	StalenessDays int           `json:"stalenessDays"`
}

// PostureSummary counts, per organization in scope (or the one given), the devices with each
// management product by status, and the devices that never reported or last reported more than
// stalenessDays ago. Products count every device's last report, stale ones included.
func (s *Service) PostureSummary(ctx context.Context, orgID string, stalenessDays int) (PostureSummary, error) {
	out := PostureSummary{Orgs: []PostureOrg{}, StalenessDays: stalenessDays}
	if orgID != "" && !store.ValidID(orgID) {
		return out, apperr.Invalid("orgId", "not a valid ID")
	}
	// where renders the devices' conditions with their arguments into a.
	where := func(a *store.Args) string {
		conds := []string{access.ScopeFrom(ctx).OrgFilter(a, "d.org_id", "d.partner_id"), "d.decommissioned_at IS NULL"}
		if orgID != "" {
			conds = append(conds, "d.org_id = "+a.Add(orgID))
		}
		return strings.Join(conds, " AND ")
	}
	var a store.Args
	staleBefore := a.Add(s.clock.Now().Add(-time.Duration(stalenessDays) * 24 * time.Hour))
	var err error
	out.Orgs, err = store.QueryAll(ctx, s.db, `SELECT d.org_id, COUNT(*), SUM(CASE WHEN d.posture_at IS NULL THEN 1 ELSE 0 END),
		SUM(CASE WHEN d.posture_at < `+staleBefore+` THEN 1 ELSE 0 END) FROM devices d WHERE `+where(&a)+` GROUP BY d.org_id ORDER BY d.org_id`,
		a.Values(), func(row store.Scanner) (PostureOrg, error) {
			o := PostureOrg{Products: []PostureProduct{}}
			return o, row.Scan(&o.OrgID, &o.Devices, &o.NeverScanned, &o.Stale)
		})
	if err != nil {
		return out, fmt.Errorf("count devices by posture: %w", err)
	}
	orgs := make(map[string]*PostureOrg, len(out.Orgs))
	for i, o := range out.Orgs {
		orgs[o.OrgID] = &out.Orgs[i]
		out.Totals.Devices += o.Devices
		out.Totals.NeverScanned += o.NeverScanned
		out.Totals.Stale += o.Stale
	}
	type orgProduct struct {
		org string
		p   PostureProduct
	}
	var b store.Args
	products, err := store.QueryAll(ctx, s.db, `SELECT d.org_id, p.product, MIN(p.name), MIN(p.category), p.status, COUNT(*)
		FROM device_posture p JOIN devices d ON d.id = p.device_id WHERE `+where(&b)+`
		GROUP BY d.org_id, p.product, p.status ORDER BY d.org_id, p.product, p.status`, b.Values(),
		func(row store.Scanner) (orgProduct, error) {
			var r orgProduct
			return r, row.Scan(&r.org, &r.p.Product, &r.p.Name, &r.p.Category, &r.p.Status, &r.p.DeviceCount)
		})
	if err != nil {
		return out, fmt.Errorf("count management products: %w", err)
	}
	for _, r := range products {
		if o := orgs[r.org]; o != nil {
			o.Products = append(o.Products, r.p)
		}
	}
	return out, nil
}

// PostureDevice is a device with a management product.
type PostureDevice struct {
	DeviceID   string    `json:"deviceId"`
	Hostname   string    `json:"hostname"`
	OrgID      string    `json:"orgId"`
	SiteID     string    `json:"siteId"`
	Product    string    `json:"product"`
	Category   string    `json:"category"`
	Status     string    `json:"status"`
	Version    string    `json:"version"`
	Evidence   string    `json:"evidence"`
	ReportedAt time.Time `json:"reportedAt"`
}

// PostureDevices lists the devices in scope with a product (in a status, when given), by
// hostname, at most limit.
func (s *Service) PostureDevices(ctx context.Context, product, status, orgID string, limit int) ([]PostureDevice, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id"), "d.decommissioned_at IS NULL",
		"p.product = " + a.Add(product)}
	if status != "" {
		conds = append(conds, "p.status = "+a.Add(status))
	}
	if orgID != "" {
		if !store.ValidID(orgID) {
			return nil, apperr.Invalid("orgId", "not a valid ID")
		}
		conds = append(conds, "d.org_id = "+a.Add(orgID))
	}
	out, err := store.QueryAll(ctx, s.db, `SELECT d.id, d.hostname, d.org_id, d.site_id, p.product, p.category, p.status, p.version,
		p.evidence, d.posture_at FROM device_posture p JOIN devices d ON d.id = p.device_id WHERE `+strings.Join(conds, " AND ")+
		` ORDER BY d.hostname, d.id LIMIT `+a.Add(limit), a.Values(), func(row store.Scanner) (PostureDevice, error) {
		var d PostureDevice
		err := row.Scan(&d.DeviceID, &d.Hostname, &d.OrgID, &d.SiteID, &d.Product, &d.Category, &d.Status, &d.Version, &d.Evidence,
			&d.ReportedAt)
		d.ReportedAt = d.ReportedAt.UTC()
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list devices with %s: %w", product, err)
	}
	return out, nil
}

type postureSummaryInput struct {
	OrgID         string `query:"orgId" format:"uuid" doc:"One organization; omitted, every organization in scope."`
	StalenessDays int    `query:"stalenessDays" minimum:"1" maximum:"365" default:"7" doc:"A device whose last report is older is stale."`
}

type postureSummaryOutput struct {
	Body struct {
		Data PostureSummary `json:"data"`
	}
}

type postureDevicesInput struct {
	Product string `query:"product" required:"true" minLength:"1" maxLength:"100" doc:"A product key, e.g. clamav, openssh-server, ninjaone."`
	Status  string `query:"status" enum:"active,installed"`
	OrgID   string `query:"orgId" format:"uuid"`
	Limit   int    `query:"limit" minimum:"1" maximum:"500" default:"100"`
}

type postureDevicesOutput struct {
	Body struct {
		Data struct {
			Devices []PostureDevice `json:"devices"`
		} `json:"data"`
	}
}

// registerPosture adds the management posture routes.
func (s *Service) registerPosture(api *httpapi.Server, tag string) {
	httpapi.Register(api, httpapi.Route{ID: "get-management-posture-summary", Method: http.MethodGet, Path: "/devices/management-posture/summary",
		Tag: tag, Permission: access.DevicesRead, Summary: "Summarize management posture",
		Description: "Per organization in scope: the devices with each management product (other RMMs, remote access, endpoint " +
			"security, backup, patch management) by status, and the devices that never reported (neverScanned) or last reported more " +
			"than stalenessDays ago (stale); totals across them."},
		func(ctx context.Context, in *postureSummaryInput) (*postureSummaryOutput, error) {
			sum, err := s.PostureSummary(ctx, in.OrgID, in.StalenessDays)
			out := &postureSummaryOutput{}
			out.Body.Data = sum
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-management-posture-devices", Method: http.MethodGet, Path: "/devices/management-posture/devices",
		Tag: tag, Permission: access.DevicesRead, Summary: "List devices with a management product",
		Description: "The devices in scope whose last report names the product, by hostname."},
		func(ctx context.Context, in *postureDevicesInput) (*postureDevicesOutput, error) {
			devs, err := s.PostureDevices(ctx, in.Product, in.Status, in.OrgID, in.Limit)
			out := &postureDevicesOutput{}
			out.Body.Data.Devices = devs
			return out, err
		})
}
