package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/security"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Page sizes of the security pages.
const (
	threatPageSize = 50
	// scanListSize is how many of a device's scans its page shows, newest first.
	scanListSize = 10
	// attentionListSize bounds each state's devices on the fleet page.
	attentionListSize = 20
	// securityPoll is how often a device's page with an unfinished scan or threat action asks
	// again; securityChanged makes it ask after a threat action of the page.
	securityPoll    = "every 5s"
	securityChanged = "security-changed from:body delay:300ms"
)

// threatActions are the threat actions and the API operations whose rules they follow.
var threatActions = map[string]string{
	agentproto.ThreatQuarantine: "quarantine-security-threat",
	agentproto.ThreatRemove:     "remove-security-threat",
	agentproto.ThreatRestore:    "restore-security-threat",
}

// threatStatusTabs are the fleet page's threat filters: active ones by default.
var threatStatusTabs = map[string]bool{security.ThreatActive: true, security.ThreatQuarantined: true, security.ThreatRemoved: true}

// securityPage is the data of security.html: the fleet's page or a device's, one of the two set.
type securityPage struct {
	Fleet  *fleetSecurity
	Device *deviceSecurity
}

// fleetSecurity is the security page of the organizations in scope.
type fleetSecurity struct {
	Dashboard security.SecurityDashboard
	// ScoreTile is the tile class of the score's risk band.
	ScoreTile string
	// Attention are the devices not protected (unprotected first, then at risk).
	Attention    []security.SecurityDeviceStatus
	CanStatuses  bool
	CanThreats   bool
	CanVulns     bool
	Threats      []threatRow
	ThreatStatus string
	Next         string
}

// deviceSecurity is one device's security page.
type deviceSecurity struct {
	DeviceID, Device string
	Online           bool
	// Status is nil until the agent reported one: the page says it is pending, and when
	// Gale asks for it (NextCollection, nil while the device cannot be asked).
	Status         *security.SecurityStatusDetail
	NextCollection *time.Time
	// ExposedPorts are the listening ports bound beyond the loopback.
	ExposedPorts []agentproto.ListeningPort
	Posture      *security.SecurityPosture
	Factors      []factorRow
	Scans        []security.SecurityScanRun
	CanScan      bool
	CanVulns     bool
	Threats      []threatRow
	Next         string
	// Busy is set while a scan or a threat action awaits the agent: the page asks again, as
	// Trigger says.
	Busy    bool
	Trigger string
	Self    string
}

// factorRow is one factor of a device's score.
type factorRow struct {
	Name, Reason string
	Points       string
	Weight       int
	Short        bool
}

// factorNames name the score's factors.
var factorNames = map[string]string{security.FactorPatches: "Security patches", security.FactorEncryption: "Disk encryption",
	security.FactorAntivirus: "Antivirus", security.FactorFirewall: "Firewall", security.FactorOpenPorts: "Exposed ports",
	security.FactorPasswordPolicy: "Password policy", security.FactorOSCurrency: "Operating system version",
	security.FactorAdminExposure: "Administrators"}

// riskTiles are the tile classes of the risk bands.
var riskTiles = map[string]string{"low": "tile-ok", "medium": "tile-warn", "high": "tile-bad", "critical": "tile-crit"}

// threatRow is one threat of a list with the actions offered on it.
type threatRow struct {
	Threat security.SecurityThreat
	// Fleet rows name their device; DeviceName is "" for a device out of reach.
	Fleet      bool
	DeviceName string
	// Pending is the action awaiting the agent's answer ("" for none).
	Pending                     string
	Quarantine, Remove, Restore bool
	Error                       string
}

// pendingLapse is how long a threat's pending action hides the actions: past it the command
// has timed out (a queued command waits at most devices.QueueTTL), and the service takes a
// new action.
const pendingLapse = devices.QueueTTL

// threatRows makes the rows of threats, with the actions the user may take on each.
func (c *Console) threatRows(ctx context.Context, list []security.SecurityThreat, fleet bool) ([]threatRow, error) {
	can := map[string]bool{}
	for action, op := range threatActions {
		can[action] = c.HTTP.Permits(ctx, op)
	}
	var names map[string]string
	if fleet {
		ids := make([]string, len(list))
		for i, t := range list {
			ids[i] = t.DeviceID
		}
		names = c.deviceNames(ctx, ids)
	}
	now := c.clock.Now()
	rows := make([]threatRow, len(list))
	for i, t := range list {
		row := threatRow{Threat: t, Fleet: fleet, DeviceName: names[t.DeviceID]}
		if t.LastActionError != nil {
			row.Error = *t.LastActionError
		}
		if t.PendingAction != nil && now.Sub(t.UpdatedAt) < pendingLapse {
			row.Pending = *t.PendingAction
		} else {
			row.Quarantine = can[agentproto.ThreatQuarantine] && t.Status == security.ThreatActive
			row.Remove = can[agentproto.ThreatRemove] && (t.Status == security.ThreatActive || t.Status == security.ThreatQuarantined)
			row.Restore = can[agentproto.ThreatRestore] && t.Status == security.ThreatQuarantined
		}
		rows[i] = row
	}
	return rows, nil
}

// securityFleet is the security dashboard of the organizations in scope (the switcher's one
// when chosen), its devices that are not protected and its threats.
func (c *Console) securityFleet(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-security-dashboard"); err != nil {
		return err
	}
	org := c.currentOrg(r)
	in := r.URL.Query()
	pg := &fleetSecurity{ThreatStatus: in.Get("status"), CanStatuses: c.HTTP.Permits(ctx, "list-security-status"),
		CanThreats: c.HTTP.Permits(ctx, "list-security-threats"), CanVulns: c.HTTP.Permits(ctx, "list-vulnerabilities")}
	if pg.ThreatStatus == "" {
		pg.ThreatStatus = security.ThreatActive
	}
	if !threatStatusTabs[pg.ThreatStatus] {
		return apperr.Invalid("status", "show active, quarantined or removed threats")
	}
	var err error
	if pg.Dashboard, err = c.Security.Dashboard(ctx, org); err != nil {
		return err
	}
	pg.ScoreTile = riskTiles[pg.Dashboard.RiskBand]
	if pg.CanStatuses {
		for _, state := range []string{security.StateUnprotected, security.StateAtRisk} {
			list, _, _, err := c.Security.ListStatuses(ctx, security.StatusFilter{OrgID: org, State: state}, store.Page{Limit: attentionListSize})
			if err != nil {
				return err
			}
			pg.Attention = append(pg.Attention, list...)
		}
	}
	if pg.CanThreats {
		list, next, _, err := c.Security.ListThreats(ctx, security.ThreatFilter{OrgID: org, Status: pg.ThreatStatus},
			store.Page{Limit: threatPageSize, Cursor: in.Get("cursor")})
		if err != nil {
			return err
		}
		if pg.Threats, err = c.threatRows(ctx, list, true); err != nil {
			return err
		}
		pg.Next = nextPage(r, next)
	}
	return c.render(w, r, http.StatusOK, "security", "", view{Title: "Security", Section: "security", Data: securityPage{Fleet: pg}})
}

// deviceSecurityPage is a device's security status (or that it is still awaited), its score's
// factors, its scans and its threats.
func (c *Console) deviceSecurityPage(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "get-security-status"); err != nil {
		return err
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.renderDeviceSecurity(w, r, d, targeted(r, "device-security"))
}

// renderDeviceSecurity reads a device's security page and writes it, or its fragment.
func (c *Console) renderDeviceSecurity(w http.ResponseWriter, r *http.Request, d devices.Device, fragment string) error {
	ctx := r.Context()
	pg := &deviceSecurity{DeviceID: d.ID, Device: d.Name(), Online: d.Status == devices.StatusOnline,
		CanVulns: c.HTTP.Permits(ctx, "list-vulnerabilities"), CanScan: c.HTTP.Permits(ctx, "start-security-scan"),
		Self: "/devices/" + d.ID + "/security"}
	st, err := c.Security.GetStatus(ctx, d.ID)
	switch {
	case err == nil && st.State == security.StatePending:
		pg.NextCollection = st.NextCollectionAt
	case err == nil:
		pg.Status = &st
		for _, p := range st.Details.ListeningPorts {
			if p.Exposed {
				pg.ExposedPorts = append(pg.ExposedPorts, p)
			}
		}
		if c.HTTP.Permits(ctx, "get-security-posture") {
			p, err := c.Security.Posture(ctx, d.ID)
			if err != nil {
				return err
			}
			pg.Posture = &p
			for _, f := range p.Factors {
				name := factorNames[f.Factor]
				if name == "" {
					name = f.Factor
				}
				pg.Factors = append(pg.Factors, factorRow{Name: name, Reason: f.Reason, Points: strconv.FormatFloat(f.Points, 'f', -1, 64),
					Weight: f.Weight, Short: f.Points < float64(f.Weight)})
			}
		}
	case apperr.IsCode(err, apperr.CodeNotFound):
		// The device in scope was decommissioned: it has no status.
	default:
		return err
	}
	if c.HTTP.Permits(ctx, "list-security-scans") {
		if pg.Scans, _, _, err = c.Security.ListScans(ctx, d.ID, store.Page{Limit: scanListSize}); err != nil {
			return err
		}
		for _, x := range pg.Scans {
			pg.Busy = pg.Busy || x.Status == security.ScanQueued || x.Status == security.ScanRunning
		}
	}
	if c.HTTP.Permits(ctx, "list-device-security-threats") {
		cursor := ""
		if fragment == "" {
			cursor = r.URL.Query().Get("cursor")
		}
		list, next, _, err := c.Security.ListThreats(ctx, security.ThreatFilter{DeviceID: d.ID}, store.Page{Limit: threatPageSize, Cursor: cursor})
		if err != nil {
			return err
		}
		if pg.Threats, err = c.threatRows(ctx, list, false); err != nil {
			return err
		}
		if next != "" {
			pg.Next = pg.Self + "?cursor=" + url.QueryEscape(next)
		}
		for _, t := range pg.Threats {
			pg.Busy = pg.Busy || t.Pending != ""
		}
	}
	pg.Trigger = securityChanged
	if pg.Busy {
		pg.Trigger = securityPoll + ", " + securityChanged
	}
	return c.render(w, r, http.StatusOK, "security", fragment, view{Title: "Security · " + pg.Device, Section: "devices",
		Data: securityPage{Device: pg}})
}

// startScan asks the device for a threat scan (and a fresh status), as POST
// /security/scan/{deviceId}: htmx gets the page's part again (it follows the scan), a plain
// form goes back to the page.
func (c *Console) startScan(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "start-security-scan"); err != nil {
		return err
	}
	in := security.SecurityScanInput{ScanType: r.PostFormValue("scanType")}
	if in.ScanType == "" {
		in.ScanType = agentproto.ScanQuick
	}
	for _, line := range strings.Split(r.PostFormValue("paths"), "\n") {
		if p := strings.TrimSpace(line); p != "" {
			in.Paths = append(in.Paths, p)
		}
	}
	x, err := c.Security.StartScan(ctx, r.PathValue("id"), in)
	if err != nil {
		return err
	}
	if r.Header.Get("HX-Request") == "" {
		http.Redirect(w, r, "/devices/"+x.DeviceID+"/security", http.StatusSeeOther)
		return nil
	}
	d, err := c.Devices.Get(ctx, x.DeviceID)
	if err != nil {
		return err
	}
	return c.renderDeviceSecurity(w, r, d, "device-security")
}

// threatAct quarantines, removes or restores a threat, as POST /security/threats/{id}/{action}:
// htmx gets the threat's row (its action now pending), a plain form goes to the device's page.
func (c *Console) threatAct(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	action := r.PathValue("action")
	op, ok := threatActions[action]
	if !ok {
		return apperr.Invalid("action", "quarantine, remove or restore a threat")
	}
	if err := c.allow(ctx, op); err != nil {
		return err
	}
	out, err := c.Security.Act(ctx, r.PathValue("id"), action)
	if err != nil {
		return err
	}
	if r.Header.Get("HX-Request") == "" {
		http.Redirect(w, r, "/devices/"+out.Threat.DeviceID+"/security", http.StatusSeeOther)
		return nil
	}
	rows, err := c.threatRows(ctx, []security.SecurityThreat{out.Threat}, r.PostFormValue("list") == "fleet")
	if err != nil {
		return err
	}
	w.Header().Set("HX-Trigger", "security-changed")
	return c.render(w, r, http.StatusOK, "security", "threat-row-fragment", view{Data: rows[0]})
}
