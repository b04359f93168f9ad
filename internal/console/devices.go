package console

import (
	"context"
	"encoding/json"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// devicePageSize is the device list's page.
const devicePageSize = 50

// deviceStatuses are the list's status tabs, in order.
var deviceStatuses = []string{"online", "offline", "pending"}

// deviceListPage is the device list's data.
type deviceListPage struct {
	Devices []deviceRow
	// Query is the filter as sent; Next and First page through it.
	Query  deviceQuery
	Counts map[string]int
	All    int
	Next   string
	First  string
	// Self is the list's address, which live updates fetch again.
	Self string
	// Bulk are the actions on selected devices the user may take.
	Bulk bulkTools
	// Groups are those the list can be narrowed to (when the user may list groups).
	Groups []groups.Group
}

// deviceQuery is the list's filter, sort and page as the address gives them.
type deviceQuery struct {
	Search, Status, Sort, Dir, Cursor string
	// OS, Tag and Group narrow the list to an operating system, a tag, a group.
	OS, Tag, Group string
}

// Filtered tells whether the list is narrowed by more than its status.
func (q deviceQuery) Filtered() bool {
	return q.Search != "" || q.OS != "" || q.Tag != "" || q.Group != ""
}

func (q deviceQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"q": q.Search, "status": q.Status, "sort": q.Sort, "dir": q.Dir, "cursor": q.Cursor,
		"os": q.OS, "tag": q.Tag, "group": q.Group} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// With is the address of the list with one parameter changed (and paging restarted).
func (q deviceQuery) With(key, value string) string {
	v := q.values()
	v.Del("cursor")
	if value == "" {
		v.Del(key)
	} else {
		v.Set(key, value)
	}
	if len(v) == 0 {
		return "/devices"
	}
	return "/devices?" + v.Encode()
}

// SortBy is the address that sorts by key, turning the direction round when the list is
// sorted by it already.
func (q deviceQuery) SortBy(key string) string {
	dir := ""
	if (q.Sort == key || (q.Sort == "" && key == "hostname")) && q.Dir != "desc" {
		dir = "desc"
	}
	v := q.values()
	v.Del("cursor")
	v.Set("sort", key)
	if dir == "" {
		v.Del("dir")
	} else {
		v.Set("dir", dir)
	}
	return "/devices?" + v.Encode()
}

func (c *Console) deviceList(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-devices"); err != nil {
		return err
	}
	in := r.URL.Query()
	q := deviceQuery{Search: strings.TrimSpace(in.Get("q")), Status: in.Get("status"), Sort: in.Get("sort"),
		Dir: in.Get("dir"), Cursor: in.Get("cursor"), OS: in.Get("os"), Tag: strings.TrimSpace(in.Get("tag")), Group: in.Get("group")}
	f := c.deviceFilter(r)
	f.Search, f.Status, f.Sort, f.Desc, f.OSType, f.Tag = q.Search, q.Status, q.Sort, q.Dir == "desc", q.OS, q.Tag
	if q.Group != "" {
		f.GroupIDs = []string{q.Group}
	}
	list, next, _, err := c.Devices.List(r.Context(), f, store.Page{Limit: devicePageSize, Cursor: q.Cursor})
	if err != nil {
		return err
	}
	counts, err := cached(c.counts, access.PrincipalFrom(r.Context()).Scope, "device-counts|"+strings.Join(f.OrgIDs, ",")+"|"+
		strings.Join(f.SiteIDs, ",")+"|"+f.Search+"|"+f.OSType+"|"+f.Tag+"|"+q.Group,
		func() (map[string]int, error) { return c.Devices.StatusCounts(r.Context(), f) })
	if err != nil {
		return err
	}
	pg := deviceListPage{Devices: c.deviceRows(r, list), Query: q, Counts: counts, Self: r.URL.RequestURI()}
	if pg.Bulk, err = c.bulkTools(r); err != nil {
		return err
	}
	if targeted(r, "device-table") == "" && c.HTTP.Permits(r.Context(), "list-groups") {
		if pg.Groups, _, _, err = c.Groups.List(r.Context(), groups.ListFilter{OrgID: c.currentOrg(r)},
			store.Page{Limit: maxRunnableScripts}); err != nil {
			return err
		}
	}
	for _, n := range counts {
		pg.All += n
	}
	if next != "" {
		v := q.values()
		v.Set("cursor", next)
		pg.Next = "/devices?" + v.Encode()
	}
	if q.Cursor != "" {
		pg.First = q.With("cursor", "")
	}
	return c.render(w, r, http.StatusOK, "devices", targeted(r, "device-table"), view{Title: "Devices", Section: "devices", Data: pg})
}

// deviceDetailPage is a device page's data.
type deviceDetailPage struct {
	Device devices.Detail
	Alerts []alerts.Alert
	// OrgName and SiteName place the device.
	OrgName, SiteName string
	// CanAlerts tells whether the user may read alerts.
	CanAlerts bool
	// Scripts are those the user may run here.
	Scripts []scripts.Script
	// CanTerminal tells whether the user may open a terminal.
	CanTerminal bool
	// Chart is the last hour of metrics as the chart script reads it (JSON); empty without
	// metrics.
	Chart string
	// Patches is the device's patch summary, when the user may read patches.
	Patches *devicePatchFact
	// Tools are the links to its system tools the user may open.
	Tools toolTabs
}

// chartSeries is the metrics chart's data: Unix seconds, then each series' percentages.
type chartSeries struct {
	T    []int64   `json:"t"`
	CPU  []float64 `json:"cpu"`
	RAM  []float64 `json:"ram"`
	Disk []float64 `json:"disk"`
}

func chartOf(points []devices.MetricPoint) (string, error) {
	if len(points) < 2 {
		return "", nil
	}
	var s chartSeries
	for _, p := range points {
		s.T = append(s.T, p.RecordedAt.Unix())
		s.CPU, s.RAM, s.Disk = append(s.CPU, p.CPUPercent), append(s.RAM, p.RAMPercent), append(s.Disk, p.DiskPercent)
	}
	b, err := json.Marshal(s)
	return string(b), err
}

func (c *Console) deviceDetail(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "get-device"); err != nil {
		return err
	}
	d, err := c.Devices.GetDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := deviceDetailPage{Device: d}
	if pg.OrgName, pg.SiteName, err = c.Tenancy.Names(r.Context(), d.OrgID, d.SiteID); err != nil {
		return err
	}
	if pg.CanAlerts = c.HTTP.Permits(r.Context(), "list-alerts"); pg.CanAlerts {
		pg.Alerts, _, _, err = c.Alerts.List(r.Context(), alerts.ListFilter{DeviceID: d.ID, Statuses: openAlertStatuses},
			store.Page{Limit: 20})
		if err != nil {
			return err
		}
	}
	pg.CanTerminal = c.HTTP.Permits(r.Context(), "create-remote-session") && d.Status == "online"
	pg.Tools = c.toolTabs(r.Context(), d.ID, "")
	if pg.Chart, err = chartOf(d.RecentMetrics); err != nil {
		return err
	}
	if pg.Scripts, err = c.runnableScripts(r, d.OSType); err != nil {
		return err
	}
	if pg.Patches, err = c.devicePatchFact(r, d.ID); err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "device", targeted(r, "device-status"), view{Title: d.Name(), Section: "devices", Data: pg})
}

// deviceNames names the devices of ids by ID, in one read, as far as the user may list
// devices: a device they cannot see (moved to another organization, say) has no name, and
// a failed read leaves every name out rather than failing the page that shows them.
func (c *Console) deviceNames(ctx context.Context, ids []string) map[string]string {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 || !c.HTTP.Permits(ctx, "list-devices") {
		return nil
	}
	names := make(map[string]string, len(ids))
	for chunk := range slices.Chunk(ids, devices.MaxCursorPageSize) {
		found, _, _, err := c.Devices.List(ctx, devices.ListFilter{IDs: chunk}, store.Page{Limit: len(chunk)})
		if err != nil {
			c.Logger.WarnContext(ctx, "naming devices", "error", err)
			return nil
		}
		for _, d := range found {
			names[d.ID] = d.Name()
		}
	}
	return names
}

// deviceRow is a row of the device list, its text made ready: a page shows 50 of them, and
// every value a template computes costs on every row.
type deviceRow struct {
	ID, Name, Status, OS, IP, Agent, Org string
	Tags                                 []string
	// Seen, SeenAt and SeenISO say when the device was last heard from ("" for never).
	Seen, SeenAt, SeenISO string
}

// deviceRowsHTML writes the rows of the device list: selectable when bulk, with the
// organization's name when the scope shows several. The list is the console's busiest page,
// and html/template makes a reflective call for every value it writes (some fifteen a row, a
// third of the page's processor time): the rows are written here instead, each value escaped.
func deviceRowsHTML(rows []deviceRow, bulk bool, scope scopeView) template.HTML {
	var b strings.Builder
	b.Grow(len(rows) * 700)
	text := func(parts ...string) {
		for i, p := range parts {
			if i%2 == 0 {
				b.WriteString(p)
			} else {
				b.WriteString(html.EscapeString(p))
			}
		}
	}
	or := func(v, none string) {
		if v == "" {
			b.WriteString(`<span class="muted">` + none + `</span>`)
		} else {
			b.WriteString(html.EscapeString(v))
		}
	}
	for _, d := range rows {
		text(`<tr data-device="`, d.ID, `">`)
		if bulk {
			text(`<td class="check"><input type="checkbox" name="ids" value="`, d.ID, `" aria-label="Select `, d.Name, `"></td>`)
		}
		text(`<td><a href="/devices/`, d.ID, `">`, d.Name, `</a>`)
		for _, t := range d.Tags {
			text(` <span class="tag">`, t, `</span>`)
		}
		text(`</td><td><span class="badge status-`, d.Status, `">`, d.Status, `</span></td>`)
		if scope.Shown {
			text(`<td>`, scope.OrgNames[d.Org], `</td>`)
		}
		b.WriteString(`<td>`)
		or(d.OS, "unknown")
		b.WriteString(`</td><td>`)
		if d.IP == "" {
			or("", "—")
		} else {
			text(`<code>`, d.IP, `</code>`)
		}
		b.WriteString(`</td><td>`)
		if d.Seen == "" {
			or("", "never")
		} else {
			text(`<time datetime="`, d.SeenISO, `" title="`, d.SeenAt, `">`, d.Seen, `</time>`)
		}
		b.WriteString(`</td><td>`)
		or(d.Agent, "—")
		b.WriteString("</td></tr>\n")
	}
	return template.HTML(b.String())
}

func (c *Console) deviceRows(r *http.Request, list []*devices.Device) []deviceRow {
	now := c.clock.Now()
	rows := make([]deviceRow, len(list))
	for i, d := range list {
		row := deviceRow{ID: d.ID, Name: d.Name(), Status: d.Status, OS: d.OSName, IP: d.IPAddress, Agent: d.AgentVersion,
			Org: d.OrgID, Tags: d.Tags}
		if row.OS == "" {
			row.OS = d.OSType
		} else if d.OSVersion != "" {
			row.OS += " " + d.OSVersion
		}
		if d.LastSeen != nil {
			row.Seen, row.SeenAt, row.SeenISO = ago(now.Sub(*d.LastSeen)), d.LastSeen.UTC().Format(timeLayout),
				d.LastSeen.UTC().Format(time.RFC3339)
		}
		rows[i] = row
	}
	return rows
}

// deviceFilter narrows the devices to the organization and site the switcher chose.
func (c *Console) deviceFilter(r *http.Request) devices.ListFilter {
	var f devices.ListFilter
	if org := c.currentOrg(r); org != "" {
		f.OrgIDs = []string{org}
	}
	if site := c.currentSite(r); site != "" {
		f.SiteIDs = []string{site}
	}
	return f
}
