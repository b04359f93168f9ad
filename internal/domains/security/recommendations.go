package security

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Recommendation statuses.
const (
	RecOpen      = "open"
	RecCompleted = "completed"
	RecDismissed = "dismissed"
)

// SecurityRecommendation is advice derived from an organization's current statuses. Its ID is
// "<key>:<orgId>"; complete and dismiss are kept per organization.
type SecurityRecommendation struct {
	ID        string     `json:"id" doc:"<key>:<orgId>, stable while the advice applies."`
	Key       string     `json:"key" enum:"active-threats,firewall-disabled,encryption-missing,antivirus-missing,security-patches-pending,password-policy-weak,admin-exposure,exposed-ports,automatic-updates-off"`
	OrgID     string     `json:"orgId" format:"uuid"`
	Title     string     `json:"title"`
	Priority  string     `json:"priority" enum:"critical,high,medium,low"`
	Devices   int        `json:"devices" doc:"Devices the advice concerns."`
	DeviceIDs []string   `json:"deviceIds" doc:"Up to 50 of them."`
	Steps     []string   `json:"steps"`
	Status    string     `json:"status" enum:"open,completed,dismissed"`
	StatusBy  *string    `json:"statusBy"`
	StatusAt  *time.Time `json:"statusAt"`
}

type recDef struct {
	key, priority, title string
	applies              func(r row, p SecurityPolicy, sc Score) bool
	steps                []string
}

var recDefs = []recDef{
	{"active-threats", "critical", "Deal with active threats on %d devices", func(r row, _ SecurityPolicy, _ Score) bool { return r.Threats > 0 },
		[]string{"Open the threats list filtered by status active.", "Quarantine each threat, then review the file.",
			"Remove the files confirmed malicious; restore false positives.", "Run a full scan on the devices afterwards."}},
	{"firewall-disabled", "high", "Enable the firewall on %d devices", func(r row, _ SecurityPolicy, _ Score) bool { return !r.Firewall },
		[]string{"Choose the firewall of the distribution (ufw on Debian and Ubuntu, firewalld on RHEL and Fedora).",
			"Allow the services the device must offer (e.g. ufw allow OpenSSH).", "Enable it (ufw enable, or systemctl enable --now firewalld).",
			"Refresh the device's security status to confirm."}},
	{"encryption-missing", "high", "Encrypt the disks of %d devices", func(r row, p SecurityPolicy, _ Score) bool {
		return r.Encryption != "encrypted" && (p.RequireEncryption || r.Encryption == "unencrypted")
	}, []string{"Back up the device.", "Reinstall or migrate onto LUKS-encrypted volumes (swap included).",
		"Store the recovery passphrase in the documentation vault.", "Refresh the device's security status to confirm."}},
	{"antivirus-missing", "medium", "Install and run an antivirus on %d devices", func(r row, p SecurityPolicy, _ Score) bool {
		return !(r.AVInstalled && r.AVRunning)
	}, []string{"Install ClamAV (clamav, clamav-daemon).", "Enable freshclam to keep signatures current.",
		"Enable and start clamav-daemon (and clamav-clamonacc for on-access scanning).", "Run a quick scan to confirm."}},
	{"security-patches-pending", "high", "Install pending security patches on %d devices", func(r row, _ SecurityPolicy, _ Score) bool {
		return r.SecurityPatches > 0
	}, []string{"Open patch approvals and approve the pending security patches.", "Schedule an install job inside a maintenance window.",
		"Reboot the devices that ask for it."}},
	{"password-policy-weak", "medium", "Strengthen the password policy on %d devices", func(r row, p SecurityPolicy, _ Score) bool {
		return len(passwordIssuesRow(r, p)) > 0
	}, []string{"Set PASS_MAX_DAYS in /etc/login.defs (e.g. 365 or less).", "Set minlen (and minclass) in /etc/security/pwquality.conf.",
		"Apply the change to existing accounts with chage."}},
	{"admin-exposure", "medium", "Reduce administrator accounts on %d devices", func(r row, _ SecurityPolicy, sc Score) bool {
		return factorShort(sc, FactorAdminExposure)
	}, []string{"Review the administrator audit.", "Remove unneeded accounts from the sudo, wheel and admin groups.",
		"Give no account but root uid 0."}},
	{"exposed-ports", "low", "Close unneeded listening ports on %d devices", func(r row, _ SecurityPolicy, _ Score) bool { return r.ExposedPorts > 5 },
		[]string{"List the device's listening ports in its security status.", "Stop the services that need not listen beyond the loopback.",
			"Filter the rest with the firewall."}},
	{"automatic-updates-off", "low", "Turn on automatic updates on %d devices", func(r row, _ SecurityPolicy, _ Score) bool { return !r.AutoUpdates },
		[]string{"Install unattended-upgrades (Debian, Ubuntu) or dnf-automatic (RHEL, Fedora).", "Enable it for security updates.",
			"Refresh the device's security status to confirm."}},
}

func factorShort(sc Score, name string) bool {
	for _, f := range sc.Factors {
		if f.Factor == name {
			return int(f.Points) < f.Weight
		}
	}
	return false
}

func passwordIssuesRow(r row, p SecurityPolicy) []string {
	var out []string
	if p.MinPasswordLength > 0 && r.PassMinLength < p.MinPasswordLength {
		out = append(out, "short")
	}
	if r.PassMaxDays <= 0 || r.PassMaxDays >= 99999 {
		out = append(out, "never expires")
	}
	return out
}

func recIndex(key string) int {
	for i, d := range recDefs {
		if d.key == key {
			return i
		}
	}
	return -1
}

type recState struct {
	status string
	by     *string
	at     time.Time
}

// Recommendations derives the advice for the organizations in scope (one when orgID is set),
// by priority; dismissed advice is left out unless includeDismissed.
func (s *Service) Recommendations(ctx context.Context, orgID string, includeDismissed bool) ([]SecurityRecommendation, error) {
	rs, j, err := s.fleet(ctx, orgID)
	if err != nil {
		return nil, err
	}
	type key struct{ org, rec string }
	found := map[key]*SecurityRecommendation{}
	for _, r := range rs {
		p := j.policies.forOrg(r.PartnerID, r.OrgID)
		sc := j.score(r)
		for _, d := range recDefs {
			if !d.applies(r, p, sc) {
				continue
			}
			k := key{r.OrgID, d.key}
			rec := found[k]
			if rec == nil {
				rec = &SecurityRecommendation{ID: d.key + ":" + r.OrgID, Key: d.key, OrgID: r.OrgID, Priority: d.priority, Steps: d.steps,
					DeviceIDs: []string{}, Status: RecOpen}
				found[k] = rec
			}
			rec.Devices++
			if len(rec.DeviceIDs) < 50 {
				rec.DeviceIDs = append(rec.DeviceIDs, r.DeviceID)
			}
		}
	}
	states, err := s.recStates(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := []SecurityRecommendation{}
	for k, rec := range found {
		rec.Title = fmt.Sprintf(recDefs[recIndex(k.rec)].title, rec.Devices)
		if st, ok := states[k.org+"|"+k.rec]; ok {
			at := st.at
			rec.Status, rec.StatusBy, rec.StatusAt = st.status, st.by, &at
		}
		if rec.Status == RecDismissed && !includeDismissed {
			continue
		}
		out = append(out, *rec)
	}
	rank := map[string]int{"critical": 0, "high": 1, "medium": 2, "low": 3}
	sort.Slice(out, func(a, b int) bool {
		if rank[out[a].Priority] != rank[out[b].Priority] {
			return rank[out[a].Priority] < rank[out[b].Priority]
		}
		if out[a].Devices != out[b].Devices {
			return out[a].Devices > out[b].Devices
		}
		return out[a].ID < out[b].ID
	})
	return out, nil
}

func (s *Service) recStates(ctx context.Context, orgID string) (map[string]recState, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "r.org_id", "r.partner_id")}
	if orgID != "" {
		conds = append(conds, "r.org_id = "+a.Add(orgID))
	}
	type keyed struct {
		key   string // organization|recommendation
		state recState
	}
	states, err := store.QueryAll(ctx, s.db, `SELECT r.org_id, r.rec_key, r.status, r.changed_by, r.changed_at
		FROM security_recommendation_states r WHERE `+store.Where(conds), a.Values(), func(r store.Scanner) (keyed, error) {
		var org, key string
		var st recState
		var by sql.NullString
		err := r.Scan(&org, &key, &st.status, &by, &st.at)
		st.by, st.at = store.StringPtr(by), st.at.UTC()
		return keyed{org + "|" + key, st}, err
	})
	if err != nil {
		return nil, fmt.Errorf("read recommendation states: %w", err)
	}
	out := make(map[string]recState, len(states))
	for _, k := range states {
		out[k.key] = k.state
	}
	return out, nil
}

// SetRecommendation completes or dismisses a recommendation of an organization. The write is
// conditional: completing a completed one (or dismissing a dismissed one) is 409
// RECOMMENDATION_UNCHANGED. An unknown key or an organization out of scope is 404.
func (s *Service) SetRecommendation(ctx context.Context, id, status string) (SecurityRecommendation, error) {
	key, orgID, ok := strings.Cut(id, ":")
	if !ok || recIndex(key) < 0 || !store.ValidID(orgID) {
		return SecurityRecommendation{}, apperr.NotFound("recommendation")
	}
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		partner, ok, err := tenancy.OrgInScope(ctx, tx, access.ScopeFrom(ctx), orgID)
		if err != nil {
			return err
		}
		if !ok {
			return apperr.NotFound("recommendation")
		}
		var got string
		err = tx.QueryRowContext(ctx, `INSERT INTO security_recommendation_states (org_id, rec_key, partner_id, status, changed_by, changed_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (org_id, rec_key) DO UPDATE SET status = excluded.status,
			changed_by = excluded.changed_by, changed_at = excluded.changed_at WHERE security_recommendation_states.status <> excluded.status
			RETURNING rec_key`, orgID, key, partner, status, access.ActorName(ctx), s.now()).Scan(&got)
		if err == sql.ErrNoRows {
			return apperr.ConflictCode("RECOMMENDATION_UNCHANGED", "the recommendation is "+status+" already")
		}
		if err != nil {
			return fmt.Errorf("record recommendation %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "security_recommendation." + map[string]string{RecCompleted: "complete", RecDismissed: "dismiss"}[status], ResourceType: "security_recommendation",
			ResourceID: id, ResourceName: key, PartnerID: partner, OrgID: orgID})
	})
	if err != nil {
		return SecurityRecommendation{}, fmt.Errorf("set security recommendation: %w", err)
	}
	recs, err := s.Recommendations(ctx, orgID, true)
	if err != nil {
		return SecurityRecommendation{}, err
	}
	for _, r := range recs {
		if r.ID == id {
			return r, nil
		}
	}
	// The advice no longer applies (nothing to do now): answer its recorded state.
	d := recDefs[recIndex(key)]
	return SecurityRecommendation{ID: id, Key: key, OrgID: orgID, Title: fmt.Sprintf(d.title, 0), Priority: d.priority, DeviceIDs: []string{},
		Steps: d.steps, Status: status}, nil
}
