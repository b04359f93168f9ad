// Package security keeps the security state of devices (what their agents report of the
// firewall, disk encryption, password policy, administrators, listening ports, antivirus and
// automatic updates), the threats scans find and the actions on them, security policies,
// a security score with its breakdown and daily trend, recommendations and the
// administrator audit.
package security

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Device states.
const (
	StateProtected   = "protected"
	StateAtRisk      = "at_risk"
	StateUnprotected = "unprotected"
	StateOffline     = "offline"
	// StatePending: no status was collected yet (a device's own status only; lists hold
	// collected statuses).
	StatePending = "pending"
)

// Service keeps the security domain's data.
type Service struct {
	db       *store.DB
	logger   *slog.Logger
	clock    clock.Clock
	devices  *devices.Service
	interval time.Duration
	wake     func()
}

// Deps are what a Service needs.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Wake is called once events were committed; nil for none.
	Wake func()
	// Devices sends the status and scan commands and reads the devices' inventory.
	Devices *devices.Service
}

// Options are the settings of a Service.
type Options struct {
	// StatusInterval is how old a status may grow before it is asked for again (default 6 h).
	StatusInterval time.Duration
}

// New returns the security service.
func New(d Deps, o Options) *Service {
	logger, wake := d.Logger, d.Wake
	if logger == nil {
		logger = slog.Default()
	}
	if wake == nil {
		wake = func() {}
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = 6 * time.Hour
	}
	return &Service{db: d.DB, logger: logger, clock: clock.Or(d.Clock), devices: d.Devices, interval: o.StatusInterval, wake: wake}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// systemCtx is the context of the domain's own work (jobs, result handling).
func systemCtx(ctx context.Context) context.Context {
	return access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, ID: "security", Name: "security",
		Scope: access.SystemScope()})
}

// SecurityDeviceStatus is a device's security status as its agent last reported it.
type SecurityDeviceStatus struct {
	DeviceID              string     `json:"deviceId" format:"uuid"`
	OrgID                 string     `json:"orgId" format:"uuid"`
	SiteID                *string    `json:"siteId" format:"uuid"`
	Hostname              string     `json:"hostname"`
	State                 string     `json:"state" enum:"protected,at_risk,unprotected,offline,pending"`
	Provider              string     `json:"provider" doc:"The antivirus found (clamav), empty when none is installed."`
	RealTimeProtection    bool       `json:"realTimeProtection"`
	ThreatCount           int        `json:"threatCount" doc:"Active threats (neither quarantined nor removed)."`
	FirewallEnabled       bool       `json:"firewallEnabled"`
	EncryptionStatus      string     `json:"encryptionStatus" enum:"encrypted,partial,unencrypted,unknown"`
	PasswordPolicySummary string     `json:"passwordPolicySummary"`
	LastScan              *time.Time `json:"lastScan" doc:"When the last threat scan completed."`
	CollectedAt           *time.Time `json:"collectedAt" doc:"Null while pending."`
	Score                 *int       `json:"score" minimum:"0" maximum:"100" doc:"Null while pending."`
	RiskBand              *string    `json:"riskBand" enum:"low,medium,high,critical" doc:"Null while pending."`
}

// SecurityStatusDetail is a device's status with everything its agent reported, or, while
// pending, when it is due.
type SecurityStatusDetail struct {
	SecurityDeviceStatus
	Details *agentproto.SecurityStatus `json:"details" doc:"Null while pending."`
	// RequestedAt is when the server last asked the agent for its status.
	RequestedAt *time.Time `json:"requestedAt" doc:"When the server last asked the agent for its status; null if never."`
	// NextCollectionAt is when the server asks next, at the latest.
	NextCollectionAt *time.Time `json:"nextCollectionAt" doc:"When the server asks the agent for its status next, at the latest; null while the device cannot be asked (not online, not Linux)."`
}

// row is a security_device_status row with the patch summary joined.
type row struct {
	DeviceID, PartnerID, OrgID, SiteID    string
	Hostname, OSName, OSVersion           string
	Online                                bool
	State, Provider                       string
	AVInstalled, AVRunning, RTP           bool
	SignaturesAt                          *time.Time
	Firewall                              bool
	FirewallBackend, Encryption, Password string
	PassMaxDays, PassMinLength, Admins    int
	ExtraRoot                             bool
	ExposedPorts                          int
	AutoUpdates                           bool
	Threats                               int
	LastScan, CollectedAt                 *time.Time
	SecurityPatches                       int
	Reboot                                bool
}

const rowColumns = `s.device_id, s.partner_id, s.org_id, s.site_id, s.hostname, s.os_name, s.os_version, s.online, s.state,
	s.provider, s.av_installed, s.av_running, s.real_time_protection, s.signatures_at, s.firewall_enabled, s.firewall_backend,
	s.encryption_status, s.password_summary, s.password_max_days, s.password_min_length, s.admin_count, s.extra_root,
	s.exposed_ports, s.auto_updates, s.threat_count, s.last_scan_at, s.collected_at, ` + patches.SecuritySummaryColumns

var rowFrom = " FROM security_device_status s" + patches.SecuritySummaryJoin("s.device_id")

func utcPtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

func scanRow(sc store.Scanner) (row, error) {
	var r row
	var site sql.NullString
	var sig, scan, coll sql.NullTime
	err := sc.Scan(&r.DeviceID, &r.PartnerID, &r.OrgID, &site, &r.Hostname, &r.OSName, &r.OSVersion, &r.Online, &r.State,
		&r.Provider, &r.AVInstalled, &r.AVRunning, &r.RTP, &sig, &r.Firewall, &r.FirewallBackend, &r.Encryption, &r.Password,
		&r.PassMaxDays, &r.PassMinLength, &r.Admins, &r.ExtraRoot, &r.ExposedPorts, &r.AutoUpdates, &r.Threats, &scan, &coll,
		&r.SecurityPatches, &r.Reboot)
	r.SiteID = site.String
	r.SignaturesAt, r.LastScan, r.CollectedAt = utcPtr(sig), utcPtr(scan), utcPtr(coll)
	return r, err
}

// statusFilter keeps collected statuses in scope, of live organizations.
func statusFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "s.org_id", "s.partner_id"), tenancy.LiveOrg("s.org_id"), "s.collected_at IS NOT NULL"}
}

// Judge is what a request needs to score and judge rows: the policies and the newest OS
// versions of the organizations concerned.
type judge struct {
	policies *policySet
	newest   map[string]string // org|osName -> newest version
}

func (j judge) score(r row) Score {
	return scoreOf(r, j.policies.forOrg(r.PartnerID, r.OrgID), j.newest[r.OrgID+"|"+r.OSName], false)
}

// points is score without factors and reasons (totals over many devices).
func (j judge) points(r row) Score {
	return scoreOf(r, j.policies.forOrg(r.PartnerID, r.OrgID), j.newest[r.OrgID+"|"+r.OSName], true)
}

func (j judge) status(r row) SecurityDeviceStatus {
	sc := j.points(r)
	st := SecurityDeviceStatus{DeviceID: r.DeviceID, OrgID: r.OrgID, Hostname: r.Hostname, State: r.State, Provider: r.Provider,
		RealTimeProtection: r.RTP, ThreatCount: r.Threats, FirewallEnabled: r.Firewall, EncryptionStatus: r.Encryption,
		PasswordPolicySummary: r.Password, LastScan: r.LastScan, CollectedAt: r.CollectedAt, Score: &sc.Score, RiskBand: &sc.RiskBand}
	if r.SiteID != "" {
		site := r.SiteID
		st.SiteID = &site
	}
	return st
}

// judgeFor loads the policies and newest OS versions of the rows' organizations.
func (s *Service) judgeFor(ctx context.Context, q store.Querier, rows []row) (judge, error) {
	orgs, partners := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		orgs[r.OrgID], partners[r.PartnerID] = true, true
	}
	ps, err := loadPolicies(ctx, q, keys(partners))
	if err != nil {
		return judge{}, err
	}
	newest, err := newestVersions(ctx, q, keys(orgs))
	if err != nil {
		return judge{}, err
	}
	return judge{policies: ps, newest: newest}, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// maxParams bounds the IDs of one IN list.
const maxParams = 500

// osVersion is an OS version seen in an organization.
type osVersion struct{ org, name, version string }

// newestVersions returns the newest OS version of each organization's devices per OS name.
func newestVersions(ctx context.Context, q store.Querier, orgs []string) (map[string]string, error) {
	out := map[string]string{}
	for first := 0; first < len(orgs); first += maxParams {
		var a store.Args
		versions, err := store.QueryAll(ctx, q, `SELECT org_id, os_name, os_version FROM security_device_status WHERE org_id IN `+
			a.In(orgs[first:min(first+maxParams, len(orgs))])+` AND collected_at IS NOT NULL GROUP BY org_id, os_name, os_version`, a.Values(),
			func(r store.Scanner) (osVersion, error) {
				var v osVersion
				return v, r.Scan(&v.org, &v.name, &v.version)
			})
		if err != nil {
			return nil, fmt.Errorf("read os versions: %w", err)
		}
		for _, v := range versions {
			k := v.org + "|" + v.name
			if cur, ok := out[k]; !ok || compareVersions(v.version, cur) > 0 {
				out[k] = v.version
			}
		}
	}
	return out, nil
}

// getRow reads one device's collected status in scope.
func getRow(ctx context.Context, q store.Querier, scope access.Scope, deviceID string) (row, error) {
	if !store.ValidID(deviceID) {
		return row{}, apperr.NotFound("device security status")
	}
	var a store.Args
	conds := append([]string{"s.device_id = " + a.Add(deviceID)}, statusFilter(scope, &a)...)
	r, err := scanRow(q.QueryRowContext(ctx, `SELECT `+rowColumns+rowFrom+` WHERE `+store.Where(conds), a.Values()...))
	if errors.Is(err, sql.ErrNoRows) {
		return r, apperr.NotFound("device security status")
	}
	if err != nil {
		return r, fmt.Errorf("load security status of %s: %w", deviceID, err)
	}
	return r, nil
}

// deviceInScope checks that a device exists in the caller's scope (404 otherwise).
func (s *Service) deviceInScope(ctx context.Context, deviceID string) (devices.Device, error) {
	if !store.ValidID(deviceID) {
		return devices.Device{}, apperr.NotFound("device")
	}
	return s.devices.Get(ctx, deviceID)
}

// StatusFilter narrows the status list.
type StatusFilter struct {
	OrgID, SiteID, State string
}

// ListStatuses lists the collected statuses in scope, by device ID.
func (s *Service) ListStatuses(ctx context.Context, f StatusFilter, page store.Page) ([]SecurityDeviceStatus, string, *int, error) {
	var a store.Args
	conds := statusFilter(access.ScopeFrom(ctx), &a)
	for col, v := range map[string]string{"s.org_id": f.OrgID, "s.site_id": f.SiteID, "s.state": f.State} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: rowColumns, From: rowFrom, Conds: conds, Args: &a,
		SortKey: "s.device_id", SortID: "s.device_id"}, page, scanRow, func(r row) (string, string) { return r.DeviceID, r.DeviceID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list security statuses: %w", err)
	}
	j, err := s.judgeFor(ctx, s.db, rows)
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]SecurityDeviceStatus, len(rows))
	for i, r := range rows {
		out[i] = j.status(r)
	}
	return out, next, total, nil
}

// GetStatus returns a device's status with its details. A device in scope whose agent has not
// reported its status yet is pending, with when it is due; one out of scope, or
// decommissioned, is 404.
func (s *Service) GetStatus(ctx context.Context, deviceID string) (SecurityStatusDetail, error) {
	r, err := getRow(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return s.pendingStatus(ctx, deviceID)
	}
	if err != nil {
		return SecurityStatusDetail{}, err
	}
	j, err := s.judgeFor(ctx, s.db, []row{r})
	if err != nil {
		return SecurityStatusDetail{}, err
	}
	out := SecurityStatusDetail{SecurityDeviceStatus: j.status(r)}
	var raw string
	var requested sql.NullTime
	if err := s.db.QueryRowContext(ctx, `SELECT snapshot, requested_at FROM security_device_status WHERE device_id = $1`, deviceID).Scan(&raw, &requested); err != nil {
		return out, fmt.Errorf("load snapshot of %s: %w", deviceID, err)
	}
	out.Details = &agentproto.SecurityStatus{}
	if err := json.Unmarshal([]byte(raw), out.Details); err != nil {
		return out, fmt.Errorf("read snapshot of %s: %w", deviceID, err)
	}
	out.RequestedAt = utcPtr(requested)
	if r.Online {
		out.NextCollectionAt = s.nextCollection(out.RequestedAt, r.CollectedAt)
	}
	return out, nil
}

// pendingStatus is the status of a device in scope that has not reported one yet.
func (s *Service) pendingStatus(ctx context.Context, deviceID string) (SecurityStatusDetail, error) {
	d, err := s.deviceInScope(ctx, deviceID)
	if err != nil {
		return SecurityStatusDetail{}, err
	}
	if d.DecommissionedAt != nil {
		return SecurityStatusDetail{}, apperr.NotFound("device security status")
	}
	out := SecurityStatusDetail{SecurityDeviceStatus: SecurityDeviceStatus{DeviceID: d.ID, OrgID: d.OrgID, Hostname: d.Hostname,
		State: StatePending, EncryptionStatus: agentproto.EncryptionUnknown}}
	if d.SiteID != "" {
		out.SiteID = &d.SiteID
	}
	var requested sql.NullTime
	err = s.db.QueryRowContext(ctx, `SELECT requested_at FROM security_device_status WHERE device_id = $1`,
		deviceID).Scan(&requested)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return out, fmt.Errorf("read the status request of %s: %w", deviceID, err)
	}
	out.RequestedAt = utcPtr(requested)
	if d.Status == devices.StatusOnline && (d.OSType == "" || d.OSType == agentproto.OSLinux) {
		out.NextCollectionAt = s.nextCollection(out.RequestedAt, nil)
	}
	return out, nil
}

// nextCollection is when the status job asks an online device for its status next, at the
// latest: it asks a device whose status, and last request for it, are older than the interval,
// at its next round.
func (s *Service) nextCollection(requested, collected *time.Time) *time.Time {
	due := s.now()
	for _, t := range []*time.Time{requested, collected} {
		if t != nil && t.Add(s.interval).After(due) {
			due = t.Add(s.interval)
		}
	}
	next := due.Add(RefreshEvery)
	return &next
}

// ensureRow makes sure a device has a status row (placed in its organization), so that a
// request for its status can be recorded before the first answer.
func (s *Service) ensureRow(ctx context.Context, tx *sql.Tx, d devices.Device) error {
	now := s.now()
	_, err := s.db.TxExecContext(ctx, tx, `INSERT INTO security_device_status (device_id, partner_id, org_id, site_id, hostname,
		os_name, os_version, online, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (device_id) DO UPDATE SET partner_id = excluded.partner_id, org_id = excluded.org_id, site_id = excluded.site_id,
		hostname = excluded.hostname, os_name = excluded.os_name, os_version = excluded.os_version, online = excluded.online`,
		d.ID, d.PartnerID, d.OrgID, store.NullIfEmpty(d.SiteID), d.Hostname, d.OSName, d.OSVersion, d.Status == devices.StatusOnline, now)
	if err != nil {
		return fmt.Errorf("record security status row of %s: %w", d.ID, err)
	}
	return nil
}

// onStatus stores a security_status result in the result's transaction.
func (s *Service) onStatus(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	if r.Status != agentproto.ResultCompleted || len(r.Result) == 0 {
		return nil
	}
	var st agentproto.SecurityStatus
	if err := json.Unmarshal(r.Result, &st); err != nil {
		s.logger.WarnContext(ctx, "unreadable security status", "deviceId", deviceID, "error", err)
		return nil
	}
	d, err := s.devices.Get(systemCtx(ctx), deviceID)
	if err != nil {
		return err
	}
	if err := s.ensureRow(ctx, tx, d); err != nil {
		return err
	}
	admins, extraRoot := adminExposure(st.Administrators)
	exposed := 0
	for _, p := range st.ListeningPorts {
		if p.Exposed {
			exposed++
		}
	}
	if st.Administrators == nil {
		st.Administrators = []agentproto.AdminAccount{}
	}
	if st.ListeningPorts == nil {
		st.ListeningPorts = []agentproto.ListeningPort{}
	}
	if st.Encryption.Volumes == nil {
		st.Encryption.Volumes = []agentproto.EncryptedVolume{}
	}
	enc := st.Encryption.Status
	switch enc {
	case agentproto.EncryptionFull, agentproto.EncryptionPartial, agentproto.EncryptionNone:
	default:
		enc = agentproto.EncryptionUnknown
	}
	var sig any
	if st.Antivirus.SignaturesUpdatedAt != nil {
		sig = st.Antivirus.SignaturesUpdatedAt.UTC()
	}
	now := s.now()
	if _, err := s.db.TxExecContext(ctx, tx, `UPDATE security_device_status SET provider = $1, av_installed = $2, av_running = $3,
		real_time_protection = $4, signatures_at = $5, firewall_enabled = $6, firewall_backend = $7, encryption_status = $8,
		password_summary = $9, password_max_days = $10, password_min_length = $11, admin_count = $12, extra_root = $13,
		exposed_ports = $14, auto_updates = $15, snapshot = $16, collected_at = $17, updated_at = $17 WHERE device_id = $18`,
		st.Antivirus.Provider, st.Antivirus.Installed, st.Antivirus.DaemonRunning, st.Antivirus.RealTimeProtection, sig,
		st.Firewall.Enabled, st.Firewall.Backend, enc, st.PasswordPolicy.Summary, st.PasswordPolicy.MaxDays, st.PasswordPolicy.MinLength,
		admins, extraRoot, exposed, st.AutomaticUpdates.Enabled, store.EncodeJSON(st), now, deviceID); err != nil {
		return fmt.Errorf("store security status of %s: %w", deviceID, err)
	}
	return s.restate(ctx, tx, deviceID)
}

// adminExposure counts the administrators that can sign in, root aside, and reports another
// account with uid 0.
func adminExposure(as []agentproto.AdminAccount) (int, bool) {
	n, extra := 0, false
	for _, a := range as {
		if a.UID == 0 && a.Name != "root" {
			extra = true
		}
		if a.Name != "root" && !a.Locked {
			n++
		}
	}
	return n, extra
}

// restate recounts a device's active threats and judges its state again.
func (s *Service) restate(ctx context.Context, tx *sql.Tx, deviceID string) error {
	if _, err := s.db.TxExecContext(ctx, tx, `UPDATE security_device_status SET threat_count = (SELECT COUNT(*) FROM security_threats t
		WHERE t.device_id = $1 AND t.status = 'active') WHERE device_id = $1`, deviceID); err != nil {
		return fmt.Errorf("count threats of %s: %w", deviceID, err)
	}
	r, err := getRow(ctx, tx, access.SystemScope(), deviceID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return nil // not collected yet
	}
	if err != nil {
		return err
	}
	ps, err := loadPolicies(ctx, tx, []string{r.PartnerID})
	if err != nil {
		return err
	}
	state := stateOf(r, ps.forOrg(r.PartnerID, r.OrgID))
	if state != r.State {
		if _, err := s.db.TxExecContext(ctx, tx, `UPDATE security_device_status SET state = $1 WHERE device_id = $2`, state, deviceID); err != nil {
			return fmt.Errorf("judge security state of %s: %w", deviceID, err)
		}
	}
	return nil
}

// restateOrgs judges every device of the organizations again (a policy changed). partnerID
// alone (orgIDs empty) means every organization of the partner.
func (s *Service) restateOrgs(ctx context.Context, tx *sql.Tx, partnerID string, orgIDs []string) error {
	var a store.Args
	conds := []string{"s.partner_id = " + a.Add(partnerID), "s.collected_at IS NOT NULL"}
	if len(orgIDs) > 0 {
		conds = append(conds, "s.org_id IN "+a.In(orgIDs))
	}
	rs, err := queryRows(ctx, tx, `SELECT `+rowColumns+rowFrom+` WHERE `+store.Where(conds), a.Values()...)
	if err != nil {
		return err
	}
	ps, err := loadPolicies(ctx, tx, []string{partnerID})
	if err != nil {
		return err
	}
	for _, r := range rs {
		if state := stateOf(r, ps.forOrg(r.PartnerID, r.OrgID)); state != r.State {
			if _, err := tx.ExecContext(ctx, `UPDATE security_device_status SET state = $1 WHERE device_id = $2`, state, r.DeviceID); err != nil {
				return fmt.Errorf("judge security state of %s: %w", r.DeviceID, err)
			}
		}
	}
	return nil
}

func queryRows(ctx context.Context, q store.Querier, query string, args ...any) ([]row, error) {
	out, err := store.QueryAll(ctx, q, query, args, scanRow)
	if err != nil {
		return nil, fmt.Errorf("read security statuses: %w", err)
	}
	return out, nil
}

// stateOf judges a device: offline when its device is; unprotected with an active threat or
// with neither a firewall nor a running antivirus; at risk when the policy is not met;
// protected otherwise.
func stateOf(r row, p SecurityPolicy) string {
	switch {
	case !r.Online:
		return StateOffline
	case r.Threats > 0 || (!r.Firewall && !(r.AVInstalled && r.AVRunning)):
		return StateUnprotected
	case len(policyFailures(r, p)) > 0:
		return StateAtRisk
	}
	return StateProtected
}

// policyFailures says which of the policy's requirements the device misses.
func policyFailures(r row, p SecurityPolicy) []string {
	var out []string
	if p.RequireFirewall && !r.Firewall {
		out = append(out, "the firewall is off")
	}
	if p.RequireEncryption && r.Encryption != agentproto.EncryptionFull {
		out = append(out, "the disks are not fully encrypted")
	}
	if p.RequireAntivirus && !(r.AVInstalled && r.AVRunning) {
		out = append(out, "no antivirus runs")
	}
	if p.MinPasswordLength > 0 && r.PassMinLength < p.MinPasswordLength {
		out = append(out, fmt.Sprintf("passwords may be shorter than %d characters", p.MinPasswordLength))
	}
	if p.MaxAdministrators > 0 && r.Admins > p.MaxAdministrators {
		out = append(out, fmt.Sprintf("%d administrators, more than %d", r.Admins, p.MaxAdministrators))
	}
	if r.ExtraRoot {
		out = append(out, "an account other than root has uid 0")
	}
	return out
}

// deviceChanged mirrors a device's online status into its row (a devices hook, in the
// device's transaction).
func (s *Service) deviceChanged(ctx context.Context, tx *sql.Tx, deviceID string) error {
	var online bool
	err := tx.QueryRowContext(ctx, `SELECT online FROM security_device_status WHERE device_id = $1`, deviceID).Scan(&online)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read security status row of %s: %w", deviceID, err)
	}
	on, err := devices.OnlineAmong(ctx, tx, []string{deviceID})
	if err != nil {
		return err
	}
	if now := len(on) == 1; now == online {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE security_device_status SET online = $1 WHERE device_id = $2`, !online, deviceID); err != nil {
		return fmt.Errorf("mirror device status of %s: %w", deviceID, err)
	}
	return s.restate(ctx, tx, deviceID)
}

// deviceLeftOrg forgets a device's status when it leaves its organization (moved or
// decommissioned); a moved device reports again in its new organization. Its threats and
// scans stay with the organization they were found in.
func (s *Service) deviceLeftOrg(ctx context.Context, tx *sql.Tx, deviceID, _ string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM security_device_status WHERE device_id = $1`, deviceID); err != nil {
		return fmt.Errorf("forget security status of %s: %w", deviceID, err)
	}
	return nil
}
