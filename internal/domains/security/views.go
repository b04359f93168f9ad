package security

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// fleet reads every collected status in scope (of one organization when orgID is set) with
// what judges them.
func (s *Service) fleet(ctx context.Context, orgID string) ([]row, judge, error) {
	var a store.Args
	conds := statusFilter(access.ScopeFrom(ctx), &a)
	if orgID != "" {
		conds = append(conds, "s.org_id = "+a.Add(orgID))
	}
	rs, err := queryRows(ctx, s.db, `SELECT `+rowColumns+rowFrom+` WHERE `+store.Where(conds), a.Values()...)
	if err != nil {
		return nil, judge{}, err
	}
	j, err := s.judgeFor(ctx, s.db, rs)
	return rs, j, err
}

// SecurityDashboard sums up the security of the devices in scope.
type SecurityDashboard struct {
	TotalDevices       int            `json:"totalDevices" doc:"Devices with a collected status."`
	ByState            map[string]int `json:"byState"`
	Score              int            `json:"score" doc:"Average of the devices' scores (100 with no device)."`
	RiskBand           string         `json:"riskBand" enum:"low,medium,high,critical"`
	ByRiskBand         map[string]int `json:"byRiskBand"`
	ActiveThreats      int            `json:"activeThreats"`
	ThreatsBySeverity  map[string]int `json:"threatsBySeverity" doc:"Active threats by severity."`
	FirewallEnabled    int            `json:"firewallEnabled"`
	FullyEncrypted     int            `json:"fullyEncrypted"`
	AntivirusRunning   int            `json:"antivirusRunning"`
	RealTimeProtection int            `json:"realTimeProtection"`
}

// Dashboard sums up the devices in scope.
func (s *Service) Dashboard(ctx context.Context, orgID string) (SecurityDashboard, error) {
	rs, j, err := s.fleet(ctx, orgID)
	if err != nil {
		return SecurityDashboard{}, err
	}
	d := SecurityDashboard{TotalDevices: len(rs), ByState: map[string]int{StateProtected: 0, StateAtRisk: 0, StateUnprotected: 0, StateOffline: 0},
		ByRiskBand: map[string]int{"low": 0, "medium": 0, "high": 0, "critical": 0}, ThreatsBySeverity: map[string]int{"critical": 0, "high": 0,
			"medium": 0, "low": 0}}
	total := 0
	for _, r := range rs {
		d.ByState[r.State]++
		sc := j.points(r)
		total += sc.Score
		d.ByRiskBand[sc.RiskBand]++
		if r.Firewall {
			d.FirewallEnabled++
		}
		if r.Encryption == agentproto.EncryptionFull {
			d.FullyEncrypted++
		}
		if r.AVInstalled && r.AVRunning {
			d.AntivirusRunning++
		}
		if r.RTP {
			d.RealTimeProtection++
		}
	}
	d.Score = 100
	if len(rs) > 0 {
		d.Score = (total + len(rs)/2) / len(rs)
	}
	d.RiskBand = RiskBand(d.Score)
	var a store.Args
	conds := append(threatFilter(access.ScopeFrom(ctx), &a), "t.status = 'active'")
	if orgID != "" {
		conds = append(conds, "t.org_id = "+a.Add(orgID))
	}
	type severityCount struct {
		severity string
		n        int
	}
	counts, err := store.QueryAll(ctx, s.db, `SELECT t.severity, COUNT(*) FROM security_threats t WHERE `+store.Where(conds)+
		` GROUP BY t.severity`, a.Values(), func(r store.Scanner) (severityCount, error) {
		var c severityCount
		return c, r.Scan(&c.severity, &c.n)
	})
	if err != nil {
		return d, fmt.Errorf("count threats: %w", err)
	}
	for _, c := range counts {
		d.ThreatsBySeverity[c.severity] += c.n
		d.ActiveThreats += c.n
	}
	return d, nil
}

// SecurityScoreBreakdown is the fleet's score factor by factor.
type SecurityScoreBreakdown struct {
	Score    int                   `json:"score"`
	RiskBand string                `json:"riskBand" enum:"low,medium,high,critical"`
	Devices  int                   `json:"devices"`
	Factors  []SecurityScoreFactor `json:"factors" doc:"Each factor's weight, the average points the devices earn and how many fall short."`
}

// ScoreBreakdown averages each factor over the devices in scope.
func (s *Service) ScoreBreakdown(ctx context.Context, orgID string) (SecurityScoreBreakdown, error) {
	rs, j, err := s.fleet(ctx, orgID)
	if err != nil {
		return SecurityScoreBreakdown{}, err
	}
	out := SecurityScoreBreakdown{Devices: len(rs), Factors: make([]SecurityScoreFactor, len(factorWeights))}
	short := make([]int, len(factorWeights))
	total := 0
	for i, f := range factorWeights {
		out.Factors[i] = SecurityScoreFactor{Factor: f.Name, Weight: f.Weight}
	}
	for _, r := range rs {
		sc := j.score(r)
		total += sc.Score
		for i, f := range sc.Factors {
			out.Factors[i].Points += f.Points
			if int(f.Points) < f.Weight {
				short[i]++
			}
		}
	}
	for i := range out.Factors {
		if len(rs) == 0 {
			out.Factors[i].Points = float64(out.Factors[i].Weight)
			out.Factors[i].Reason = "no device has reported its status"
			continue
		}
		out.Factors[i].Points = float64(int(out.Factors[i].Points/float64(len(rs))*10+0.5)) / 10
		out.Factors[i].Reason = fmt.Sprintf("%d of %d devices fall short", short[i], len(rs))
	}
	out.Score = 100
	if len(rs) > 0 {
		out.Score = (total + len(rs)/2) / len(rs)
	}
	out.RiskBand = RiskBand(out.Score)
	return out, nil
}

// SecurityPosture is a device's score with its factors.
type SecurityPosture struct {
	DeviceID string                `json:"deviceId" format:"uuid"`
	OrgID    string                `json:"orgId" format:"uuid"`
	Hostname string                `json:"hostname"`
	State    string                `json:"state" enum:"protected,at_risk,unprotected,offline"`
	Score    int                   `json:"score"`
	RiskBand string                `json:"riskBand" enum:"low,medium,high,critical"`
	Factors  []SecurityScoreFactor `json:"factors"`
	// PolicyFailures are the requirements of the policy that applies which the device misses.
	PolicyFailures []string `json:"policyFailures"`
	PolicyID       string   `json:"policyId"`
}

func (j judge) posture(r row) SecurityPosture {
	sc := j.score(r)
	p := j.policies.forOrg(r.PartnerID, r.OrgID)
	f := policyFailures(r, p)
	if f == nil {
		f = []string{}
	}
	return SecurityPosture{DeviceID: r.DeviceID, OrgID: r.OrgID, Hostname: r.Hostname, State: r.State, Score: sc.Score, RiskBand: sc.RiskBand,
		Factors: sc.Factors, PolicyFailures: f, PolicyID: p.ID}
}

// pageRows lists a page of collected statuses in scope with a filter.
func (s *Service) pageRows(ctx context.Context, orgID string, extra []string, extraArgs func(a *store.Args) []string, page store.Page) ([]row, judge, string, *int, error) {
	var a store.Args
	conds := statusFilter(access.ScopeFrom(ctx), &a)
	if orgID != "" {
		conds = append(conds, "s.org_id = "+a.Add(orgID))
	}
	conds = append(conds, extra...)
	if extraArgs != nil {
		conds = append(conds, extraArgs(&a)...)
	}
	rs, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: rowColumns, From: rowFrom, Conds: conds, Args: &a,
		SortKey: "s.device_id", SortID: "s.device_id"}, page, scanRow, func(r row) (string, string) { return r.DeviceID, r.DeviceID })
	if err != nil {
		return nil, judge{}, "", nil, err
	}
	j, err := s.judgeFor(ctx, s.db, rs)
	return rs, j, next, total, err
}

// Postures lists devices' scores in scope.
func (s *Service) Postures(ctx context.Context, orgID string, page store.Page) ([]SecurityPosture, string, *int, error) {
	rs, j, next, total, err := s.pageRows(ctx, orgID, nil, nil, page)
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]SecurityPosture, len(rs))
	for i, r := range rs {
		out[i] = j.posture(r)
	}
	return out, next, total, nil
}

// Posture is one device's score.
func (s *Service) Posture(ctx context.Context, deviceID string) (SecurityPosture, error) {
	r, err := getRow(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if err != nil {
		return SecurityPosture{}, err
	}
	j, err := s.judgeFor(ctx, s.db, []row{r})
	return j.posture(r), err
}

// snapshots reads the stored snapshots of the rows (JSON) by device.
func (s *Service) snapshots(ctx context.Context, ids []string) (map[string]agentproto.SecurityStatus, error) {
	out := map[string]agentproto.SecurityStatus{}
	if len(ids) == 0 {
		return out, nil
	}
	type snapshot struct {
		deviceID string
		status   agentproto.SecurityStatus
	}
	var a store.Args
	snaps, err := store.QueryAll(ctx, s.db, `SELECT device_id, snapshot FROM security_device_status WHERE device_id IN `+a.In(ids), a.Values(),
		func(r store.Scanner) (snapshot, error) {
			var sn snapshot
			var raw string
			if err := r.Scan(&sn.deviceID, &raw); err != nil {
				return sn, err
			}
			if err := json.Unmarshal([]byte(raw), &sn.status); err != nil {
				return sn, fmt.Errorf("read snapshot of %s: %w", sn.deviceID, err)
			}
			return sn, nil
		})
	if err != nil {
		return nil, fmt.Errorf("read snapshots: %w", err)
	}
	for _, sn := range snaps {
		out[sn.deviceID] = sn.status
	}
	return out, nil
}

func ids(rs []row) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.DeviceID
	}
	return out
}

// SecurityFirewallRow is a device's firewall.
type SecurityFirewallRow struct {
	DeviceID string `json:"deviceId" format:"uuid"`
	OrgID    string `json:"orgId" format:"uuid"`
	Hostname string `json:"hostname"`
	agentproto.FirewallState
}

func boolCond(col, v string) []string {
	switch v {
	case "true":
		return []string{col}
	case "false":
		return []string{"NOT " + col}
	}
	return nil
}

// Firewalls lists devices' firewalls.
func (s *Service) Firewalls(ctx context.Context, orgID, enabled string, page store.Page) ([]SecurityFirewallRow, string, *int, error) {
	rs, _, next, total, err := s.pageRows(ctx, orgID, boolCond("s.firewall_enabled", enabled), nil, page)
	if err != nil {
		return nil, "", nil, err
	}
	snaps, err := s.snapshots(ctx, ids(rs))
	out := make([]SecurityFirewallRow, len(rs))
	for i, r := range rs {
		out[i] = SecurityFirewallRow{DeviceID: r.DeviceID, OrgID: r.OrgID, Hostname: r.Hostname, FirewallState: snaps[r.DeviceID].Firewall}
	}
	return out, next, total, err
}

// SecurityEncryptionRow is a device's disk encryption.
type SecurityEncryptionRow struct {
	DeviceID string `json:"deviceId" format:"uuid"`
	OrgID    string `json:"orgId" format:"uuid"`
	Hostname string `json:"hostname"`
	agentproto.EncryptionState
}

// Encryption lists devices' disk encryption.
func (s *Service) Encryption(ctx context.Context, orgID, status string, page store.Page) ([]SecurityEncryptionRow, string, *int, error) {
	var extra func(a *store.Args) []string
	if status != "" {
		extra = func(a *store.Args) []string { return []string{"s.encryption_status = " + a.Add(status)} }
	}
	rs, _, next, total, err := s.pageRows(ctx, orgID, nil, extra, page)
	if err != nil {
		return nil, "", nil, err
	}
	snaps, err := s.snapshots(ctx, ids(rs))
	out := make([]SecurityEncryptionRow, len(rs))
	for i, r := range rs {
		e := snaps[r.DeviceID].Encryption
		e.Status = r.Encryption
		if e.Volumes == nil {
			e.Volumes = []agentproto.EncryptedVolume{}
		}
		out[i] = SecurityEncryptionRow{DeviceID: r.DeviceID, OrgID: r.OrgID, Hostname: r.Hostname, EncryptionState: e}
	}
	return out, next, total, err
}

// SecurityPasswordPolicyRow is a device's password policy judged against the policy that
// applies.
type SecurityPasswordPolicyRow struct {
	DeviceID string `json:"deviceId" format:"uuid"`
	OrgID    string `json:"orgId" format:"uuid"`
	Hostname string `json:"hostname"`
	agentproto.PasswordPolicy
	RequiredMinLength int      `json:"requiredMinLength" doc:"The minimum length of the policy that applies (0: not judged)."`
	Compliant         bool     `json:"compliant"`
	Issues            []string `json:"issues"`
}

// PasswordPolicies lists devices' password policies.
func (s *Service) PasswordPolicies(ctx context.Context, orgID string, page store.Page) ([]SecurityPasswordPolicyRow, string, *int, error) {
	rs, j, next, total, err := s.pageRows(ctx, orgID, nil, nil, page)
	if err != nil {
		return nil, "", nil, err
	}
	snaps, err := s.snapshots(ctx, ids(rs))
	out := make([]SecurityPasswordPolicyRow, len(rs))
	for i, r := range rs {
		p := j.policies.forOrg(r.PartnerID, r.OrgID)
		pp := snaps[r.DeviceID].PasswordPolicy
		issues := passwordIssues(pp, p)
		out[i] = SecurityPasswordPolicyRow{DeviceID: r.DeviceID, OrgID: r.OrgID, Hostname: r.Hostname, PasswordPolicy: pp,
			RequiredMinLength: p.MinPasswordLength, Compliant: len(issues) == 0, Issues: issues}
	}
	return out, next, total, err
}

func passwordIssues(pp agentproto.PasswordPolicy, p SecurityPolicy) []string {
	issues := []string{}
	if p.MinPasswordLength > 0 && pp.MinLength < p.MinPasswordLength {
		issues = append(issues, fmt.Sprintf("minimum length %d is below the required %d", pp.MinLength, p.MinPasswordLength))
	}
	if pp.MaxDays <= 0 || pp.MaxDays >= 99999 {
		issues = append(issues, "passwords never expire")
	}
	return issues
}

// defaultAccounts are names that come with systems and images, and are guessed first.
var defaultAccounts = []string{"admin", "administrator", "user", "test", "guest", "ubuntu", "pi", "debian", "centos", "ec2-user",
	"oracle", "vagrant", "support", "demo"}

// SecurityAdminFinding is one finding of the administrator audit.
type SecurityAdminFinding struct {
	Kind    string `json:"kind" enum:"default_account,stale_account,extra_root,weak_policy,too_many_admins"`
	Account string `json:"account,omitempty"`
	Detail  string `json:"detail"`
}

// SecurityAdminAuditRow is a device's administrators with the audit's findings.
type SecurityAdminAuditRow struct {
	DeviceID       string                    `json:"deviceId" format:"uuid"`
	OrgID          string                    `json:"orgId" format:"uuid"`
	Hostname       string                    `json:"hostname"`
	Administrators []agentproto.AdminAccount `json:"administrators"`
	Findings       []SecurityAdminFinding    `json:"findings"`
}

// staleAfter is how long an administrator may go without signing in before the audit calls
// the account stale.
const staleAfter = 90 * 24 * time.Hour

// AdminAudit audits devices' administrators: default account names that can sign in, stale
// accounts (locked, or without a login shell, or not signed in for 90 days, yet still
// administrators), other accounts with uid 0, more administrators than the policy allows, and
// a weak password policy.
func (s *Service) AdminAudit(ctx context.Context, orgID string, page store.Page) ([]SecurityAdminAuditRow, string, *int, error) {
	rs, j, next, total, err := s.pageRows(ctx, orgID, nil, nil, page)
	if err != nil {
		return nil, "", nil, err
	}
	snaps, err := s.snapshots(ctx, ids(rs))
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]SecurityAdminAuditRow, len(rs))
	now := s.now()
	for i, r := range rs {
		snap := snaps[r.DeviceID]
		p := j.policies.forOrg(r.PartnerID, r.OrgID)
		row := SecurityAdminAuditRow{DeviceID: r.DeviceID, OrgID: r.OrgID, Hostname: r.Hostname, Administrators: snap.Administrators,
			Findings: []SecurityAdminFinding{}}
		if row.Administrators == nil {
			row.Administrators = []agentproto.AdminAccount{}
		}
		for _, a := range snap.Administrators {
			switch {
			case a.UID == 0 && a.Name != "root":
				row.Findings = append(row.Findings, SecurityAdminFinding{Kind: "extra_root", Account: a.Name, Detail: "uid 0 gives it root's powers"})
			case a.Name != "root" && (a.Locked || strings.HasSuffix(a.Shell, "nologin") || strings.HasSuffix(a.Shell, "/false")):
				row.Findings = append(row.Findings, SecurityAdminFinding{Kind: "stale_account", Account: a.Name,
					Detail: "cannot sign in yet keeps administrator rights through " + a.Via})
			case a.Name != "root" && a.LastLogin != nil && now.Sub(*a.LastLogin) > staleAfter:
				row.Findings = append(row.Findings, SecurityAdminFinding{Kind: "stale_account", Account: a.Name,
					Detail: fmt.Sprintf("has not signed in for %d days yet keeps administrator rights through %s",
						int(now.Sub(*a.LastLogin).Hours()/24), a.Via)})
			}
			if !a.Locked && slices.Contains(defaultAccounts, strings.ToLower(a.Name)) {
				row.Findings = append(row.Findings, SecurityAdminFinding{Kind: "default_account", Account: a.Name,
					Detail: "a well-known default account name with administrator rights"})
			}
		}
		if p.MaxAdministrators > 0 && r.Admins > p.MaxAdministrators {
			row.Findings = append(row.Findings, SecurityAdminFinding{Kind: "too_many_admins",
				Detail: fmt.Sprintf("%d administrators can sign in, the policy allows %d", r.Admins, p.MaxAdministrators)})
		}
		for _, issue := range passwordIssues(snap.PasswordPolicy, p) {
			row.Findings = append(row.Findings, SecurityAdminFinding{Kind: "weak_policy", Detail: issue})
		}
		out[i] = row
	}
	return out, next, total, nil
}

// SecurityTrendPoint is one day's snapshot (summed over the organizations in scope).
type SecurityTrendPoint struct {
	Day           string `json:"day" doc:"YYYY-MM-DD (UTC)."`
	Score         int    `json:"score" doc:"Device-weighted average of the organizations' scores."`
	Devices       int    `json:"devices"`
	Protected     int    `json:"protected"`
	AtRisk        int    `json:"atRisk"`
	Unprotected   int    `json:"unprotected"`
	Offline       int    `json:"offline"`
	ActiveThreats int    `json:"activeThreats"`
}

// Trends returns the daily snapshots of the last days (today included), oldest first.
func (s *Service) Trends(ctx context.Context, orgID string, days int) ([]SecurityTrendPoint, error) {
	from := s.now().AddDate(0, 0, -(days - 1)).Format(time.DateOnly)
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "n.org_id", "n.partner_id"), tenancy.LiveOrg("n.org_id"), "n.day >= " + a.Add(from)}
	if orgID != "" {
		conds = append(conds, "n.org_id = "+a.Add(orgID))
	}
	out, err := store.QueryAll(ctx, s.db, `SELECT n.day, SUM(n.score * n.devices), SUM(n.devices), SUM(n.protected), SUM(n.at_risk),
		SUM(n.unprotected), SUM(n.offline), SUM(n.active_threats), COUNT(*), SUM(n.score) FROM security_snapshots n WHERE `+store.Where(conds)+
		` GROUP BY n.day ORDER BY n.day`, a.Values(), func(r store.Scanner) (SecurityTrendPoint, error) {
		var p SecurityTrendPoint
		var weighted, orgs, plain int
		if err := r.Scan(&p.Day, &weighted, &p.Devices, &p.Protected, &p.AtRisk, &p.Unprotected, &p.Offline, &p.ActiveThreats, &orgs,
			&plain); err != nil {
			return p, err
		}
		if p.Devices > 0 {
			p.Score = (weighted + p.Devices/2) / p.Devices
		} else if orgs > 0 {
			p.Score = plain / orgs
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read trends: %w", err)
	}
	return out, nil
}

// Snapshot records today's snapshot of every organization with collected statuses, once a
// day each (a second run the same day changes nothing).
func (s *Service) Snapshot(ctx context.Context) error {
	ctx = systemCtx(ctx)
	rs, j, err := s.fleet(ctx, "")
	if err != nil {
		return err
	}
	type agg struct {
		partner                                 string
		total, n, prot, risk, unprot, off, thrt int
	}
	byOrg := map[string]*agg{}
	for _, r := range rs {
		g := byOrg[r.OrgID]
		if g == nil {
			g = &agg{partner: r.PartnerID}
			byOrg[r.OrgID] = g
		}
		g.n++
		g.total += j.points(r).Score
		g.thrt += r.Threats
		switch r.State {
		case StateProtected:
			g.prot++
		case StateAtRisk:
			g.risk++
		case StateUnprotected:
			g.unprot++
		case StateOffline:
			g.off++
		}
	}
	now := s.now()
	day := now.Format(time.DateOnly)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		for org, g := range byOrg {
			if _, err := tx.ExecContext(ctx, `INSERT INTO security_snapshots (org_id, day, partner_id, score, devices, protected, at_risk,
				unprotected, offline, active_threats, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
				ON CONFLICT (org_id, day) DO NOTHING`, org, day, g.partner, (g.total+g.n/2)/g.n, g.n, g.prot, g.risk, g.unprot, g.off, g.thrt,
				now); err != nil {
				return fmt.Errorf("record security snapshot of %s: %w", org, err)
			}
		}
		return nil
	})
}

// checkOrg answers 404 for an orgId filter outside the caller's scope? Lists simply filter;
// this is for writes that name an organization.
func (s *Service) checkOrg(ctx context.Context, q store.Querier, orgID string) (string, error) {
	partner, ok, err := tenancy.OrgInScope(ctx, q, access.ScopeFrom(ctx), orgID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", apperr.NotFound("organization")
	}
	return partner, nil
}
