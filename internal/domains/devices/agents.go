package devices

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"

	"github.com/google/uuid"
)

// Agent token prefixes tell the main agent's token from the watchdog's before any lookup.
const (
	agentTokenPrefix    = "gale_at_"
	watchdogTokenPrefix = "gale_wt_"
)

// Agent is an authenticated agent connection: the device and which of its processes.
type Agent struct {
	DeviceID  string
	PartnerID string
	OrgID     string
	Role      string
}

var errBadAgentToken = apperr.Unauthorized("unknown or revoked agent token; the device may have been decommissioned: enroll again")

// AuthenticateAgent resolves an agent token to its device. The token of a decommissioned
// device fails with ErrDeviceDecommissioned, naming the device: the one answer that makes an
// agent stop for good, so it is given only to a caller holding the device's own token.
func (s *Service) AuthenticateAgent(ctx context.Context, token string) (Agent, error) {
	col, role := "agent_token_hash", agentproto.RoleAgent
	switch {
	case strings.HasPrefix(token, agentTokenPrefix):
	case strings.HasPrefix(token, watchdogTokenPrefix):
		col, role = "watchdog_token_hash", agentproto.RoleWatchdog
	default:
		return Agent{}, errBadAgentToken
	}
	a := Agent{Role: role}
	var decommissioned sql.NullTime
	err := s.db.QueryRowContext(ctx, `SELECT id, partner_id, org_id, decommissioned_at FROM devices WHERE `+col+` = $1`,
		secrets.Hash(token)).Scan(&a.DeviceID, &a.PartnerID, &a.OrgID, &decommissioned)
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, errBadAgentToken
	}
	if err != nil {
		return a, fmt.Errorf("look up agent token: %w", err)
	}
	if decommissioned.Valid {
		return Agent{}, errDecommissioned(a.DeviceID)
	}
	return a, nil
}

// errDecommissioned tells an agent, authenticated by its token, that its device is retired.
func errDecommissioned(deviceID string) error {
	return &apperr.Error{Kind: apperr.KindForbidden, Code: agentproto.ErrDeviceDecommissioned,
		Message: "this device was decommissioned; the agent stops (enroll again to manage this machine)",
		Details: []apperr.Detail{{Field: agentproto.DetailDeviceID, Message: deviceID}}}
}

// AgentContext marks ctx as acting for the agent, for the audit log.
func AgentContext(ctx context.Context, a Agent) context.Context {
	return access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorAgent, ID: a.DeviceID,
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: a.PartnerID, OrgID: a.OrgID}})
}

func validateEnroll(req *agentproto.EnrollRequest) error {
	req.Hostname = strings.TrimSpace(req.Hostname)
	switch {
	case req.EnrollmentKey == "":
		return apperr.Invalid("enrollmentKey", "enrollmentKey is required")
	case req.Hostname == "" || len(req.Hostname) > 255:
		return apperr.Invalid("hostname", "hostname must be 1 to 255 characters")
	case req.OSType != agentproto.OSLinux && req.OSType != agentproto.OSWindows && req.OSType != agentproto.OSMacOS:
		return apperr.Invalid("osType", "osType must be linux, windows or macos")
	case req.SiteID != "" && !store.ValidID(req.SiteID):
		return apperr.Invalid("siteId", "siteId is not a valid ID")
	}
	return nil
}

// Enroll turns a valid enrollment key into a device (or claims the provisioned device the
// key was minted for) and returns the agent's credentials, shown this once. The device stays
// pending, never seen, until its agent reports: the installer enrolling it says nothing of
// whether the agent runs.
func (s *Service) Enroll(ctx context.Context, req agentproto.EnrollRequest) (agentproto.EnrollResponse, error) {
	cleanEnroll(&req)
	if err := validateEnroll(&req); err != nil {
		return agentproto.EnrollResponse{}, err
	}
	agentToken, watchdogToken := secrets.Token(agentTokenPrefix, 32), secrets.Token(watchdogTokenPrefix, 32)
	var resp agentproto.EnrollResponse
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		key, err := s.keys.Claim(ctx, tx, req.EnrollmentKey, req.EnrollmentSecret, s.opts.EnrollmentSecret)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		hw := agentproto.Hardware{}
		if req.Hardware != nil {
			hw = *req.Hardware
		}
		id, siteID := key.DeviceID, key.SiteID
		if id != "" {
			res, err := tx.ExecContext(ctx, `UPDATE devices SET hostname = $1, os_type = $2, os_version = $3, architecture = $4,
				agent_version = $5, agent_token_hash = $6, watchdog_token_hash = $7, status = $8, enrolled_at = $9,
				updated_at = $9, enrollment_key_id = $10 WHERE id = $11 AND enrolled_at IS NULL
				AND decommissioned_at IS NULL`, req.Hostname, req.OSType, req.OSVersion, req.Architecture, req.AgentVersion,
				secrets.Hash(agentToken), secrets.Hash(watchdogToken), StatusPending, now, key.KeyID, id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return apperr.Unauthorized("the provisioned device of this key is already enrolled or was decommissioned")
			}
			if err := tx.QueryRowContext(ctx, `SELECT site_id FROM devices WHERE id = $1`, id).Scan(&siteID); err != nil {
				return err
			}
		} else {
			if siteID == "" {
				if siteID, err = pickSite(ctx, tx, key.OrgID, req.SiteID); err != nil {
					return err
				}
			}
			id = store.NewID()
			_, err = tx.ExecContext(ctx, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, os_type,
				os_version, architecture, agent_version, manufacturer, model, serial_number, cpu_model, cpu_cores, memory_bytes,
				agent_token_hash, watchdog_token_hash, enrollment_key_id, created_at, updated_at, enrolled_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $20, $20)`,
				id, key.PartnerID, key.OrgID, siteID, req.Hostname, StatusPending, req.OSType, req.OSVersion, req.Architecture,
				req.AgentVersion, hw.Manufacturer, hw.Model, hw.SerialNumber, hw.CPUModel, hw.CPUCores, int64(hw.MemoryBytes),
				secrets.Hash(agentToken), secrets.Hash(watchdogToken), key.KeyID, now)
			if err != nil {
				return err
			}
		}
		if err := s.changed(ctx, tx, id); err != nil {
			return err
		}
		if err := s.recordEvent(ctx, tx, EventEnrolled, id); err != nil {
			return err
		}
		resp = agentproto.EnrollResponse{AgentID: id, DeviceID: id, AuthToken: agentToken, WatchdogAuthToken: watchdogToken,
			OrgID: key.OrgID, SiteID: siteID, Config: s.opts.Agent}
		actx := AgentContext(ctx, Agent{DeviceID: id, PartnerID: key.PartnerID, OrgID: key.OrgID})
		return audit.Record(actx, tx, audit.Entry{Action: "device.enroll", ResourceType: "device", ResourceID: id,
			ResourceName: req.Hostname, PartnerID: key.PartnerID, OrgID: key.OrgID,
			Details: map[string]any{"enrollmentKeyId": key.KeyID, "osType": req.OSType, "agentVersion": req.AgentVersion,
				"provisioned": key.DeviceID != ""}})
	})
	if err != nil {
		return resp, fmt.Errorf("enroll a device: %w", err)
	}
	return resp, nil
}

// pickSite is the site an enrolling device lands in: the one it asked for (of the key's
// organization), else the organization's first site.
func pickSite(ctx context.Context, q store.Querier, orgID, wanted string) (string, error) {
	if wanted != "" {
		return wanted, siteOf(ctx, q, wanted, orgID)
	}
	id, ok, err := tenancy.FirstSite(ctx, q, orgID)
	if err == nil && !ok {
		return "", apperr.Invalid("siteId", "the organization has no site for devices to join; create one first")
	}
	return id, err
}

// ProvisionInput pre-creates a device.
type ProvisionInput struct {
	OrgID       string   `json:"orgId,omitempty" format:"uuid" doc:"Required except for organization callers."`
	SiteID      string   `json:"siteId,omitempty" format:"uuid" doc:"Default: the organization's first site."`
	Hostname    string   `json:"hostname" minLength:"1" maxLength:"255" doc:"Expected host name; the agent's real one replaces it on enrollment."`
	DisplayName string   `json:"displayName,omitempty" maxLength:"200"`
	Tags        []string `json:"tags,omitempty" maxItems:"50"`
}

// Provisioned is a pre-created device and the one-time payload that enrolls an agent into it.
type Provisioned struct {
	Device           Device    `json:"device"`
	EnrollmentKey    string    `json:"enrollmentKey" doc:"Single-use key bound to this device; shown once."`
	EnrollmentSecret string    `json:"enrollmentSecret" doc:"Shown once."`
	ExpiresAt        time.Time `json:"expiresAt"`
	ServerURL        string    `json:"serverUrl"`
	Command          string    `json:"command" doc:"The command line to run on the machine once gale-agent is installed."`
	InstallCommand   string    `json:"installCommand" doc:"One line that downloads, enrolls and installs the agent (Linux and macOS)."`
}

// Provision pre-creates a device record and mints the single-use key that claims it.
func (s *Service) Provision(ctx context.Context, in ProvisionInput) (Provisioned, error) {
	scope := access.ScopeFrom(ctx)
	tags, err := normalizeTags(in.Tags)
	if err != nil {
		return Provisioned{}, err
	}
	var out Provisioned
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "device"})
		if err != nil {
			return err
		}
		partnerID := at.PartnerID
		in.OrgID = at.OrgID
		siteID, err := pickSite(ctx, tx, in.OrgID, in.SiteID)
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.clock.Now()
		var createdBy any
		if p := access.PrincipalFrom(ctx); p != nil {
			createdBy = p.ID
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, display_name, status,
			created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`, id, partnerID, in.OrgID, siteID,
			strings.TrimSpace(in.Hostname), store.NullIfEmpty(strings.TrimSpace(in.DisplayName)), StatusPending, createdBy, now); err != nil {
			return err
		}
		if err := replaceTags(ctx, tx, id, partnerID, tags); err != nil {
			return err
		}
		key, secret, keyID, err := s.keys.MintForDevice(ctx, tx, partnerID, in.OrgID, siteID, id, s.opts.ProvisionTTL)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE devices SET enrollment_key_id = $1 WHERE id = $2`, keyID, id); err != nil {
			return err
		}
		if err := s.changed(ctx, tx, id); err != nil {
			return err
		}
		if out.Device, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		out.EnrollmentKey, out.EnrollmentSecret, out.ExpiresAt = key, secret, now.Add(s.opts.ProvisionTTL)
		out.ServerURL = s.opts.PublicURL
		out.Command = "gale-agent enroll " + key + " --server " + s.opts.PublicURL + " --enrollment-secret " + secret + " --quiet && gale-agent service install && gale-agent service start"
		out.InstallCommand = "curl -fsSL " + s.opts.PublicURL + "/api/v1/agents/install.sh | sudo sh -s -- --key " + key + " --secret " + secret
		return audit.Record(ctx, tx, audit.Entry{Action: "device.provision", ResourceType: "device", ResourceID: id,
			ResourceName: out.Device.Hostname, PartnerID: partnerID, OrgID: in.OrgID, Details: map[string]any{"enrollmentKeyId": keyID}})
	})
	if err != nil {
		return Provisioned{}, fmt.Errorf("provision a device: %w", err)
	}
	return out, nil
}

// Heartbeat records what an agent or its watchdog reports. For the main agent it also tells
// whether the device has commands or calls waiting: the channel that missed word of them (a
// node that lost its bus connection for a moment) delivers them now, and a heartbeat with
// nothing waiting costs no further query.
//
// A late heartbeat (SampledAt set, kept by the agent while the server was unreachable) files
// its sample in the metrics history at its own time and leaves the device's current state
// alone: only that the agent is alive now counts.
//
// Heartbeats arriving together are recorded together, in one transaction (see beats).
func (s *Service) Heartbeat(ctx context.Context, a Agent, hb agentproto.Heartbeat) (waiting bool, err error) {
	cleanHeartbeat(&hb)
	b := &beat{agent: a, hb: hb, done: make(chan struct{})}
	s.beats.add(b, s.commitBeats)
	select {
	case <-b.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if b.err != nil {
		return false, fmt.Errorf("record the heartbeat of device %s: %w", a.DeviceID, b.err)
	}
	return b.waiting, nil
}

// commitBeats records the waiting heartbeats, a group at a time, until none is left.
func (s *Service) commitBeats() {
	ctx := store.AgentWork(context.Background())
	for {
		group := s.beats.take()
		if group == nil {
			return
		}
		err := s.db.WriteUrgent(ctx, func(tx *sql.Tx) error { return s.recordBeats(ctx, tx, group) })
		if err != nil && len(group) > 1 {
			// One heartbeat the database refused must not cost the others theirs.
			for _, b := range group {
				b.waiting = false
				b.err = s.db.WriteUrgent(ctx, func(tx *sql.Tx) error { return s.recordBeats(ctx, tx, []*beat{b}) })
			}
		} else {
			for _, b := range group {
				b.err = err
			}
		}
		s.beats.done(group)
		for _, b := range group {
			if b.err != nil {
				b.waiting = false
			}
			close(b.done)
		}
	}
}

// recordBeats records a group of heartbeats, of distinct devices, in tx.
func (s *Service) recordBeats(ctx context.Context, tx *sql.Tx, group []*beat) error {
	now := s.clock.Now()
	var agents []*beat
	for _, b := range group {
		if b.agent.Role == agentproto.RoleWatchdog {
			if err := s.watchdogBeat(ctx, tx, b.agent, b.hb, now); err != nil {
				return err
			}
			continue
		}
		agents = append(agents, b)
	}
	if len(agents) == 0 {
		return nil
	}
	cameOnline, err := s.markOnline(ctx, tx, agents)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(agents))
	for _, b := range agents {
		if err := s.recordBeat(ctx, tx, b, now); err != nil {
			return err
		}
		ids = append(ids, b.agent.DeviceID)
	}
	for _, id := range cameOnline {
		if err := s.changed(ctx, tx, id); err != nil {
			return err
		}
		if err := s.recordEvent(ctx, tx, EventOnline, id); err != nil {
			return err
		}
	}
	for _, h := range s.hooks.heartbeat {
		if err := h(ctx, tx, ids); err != nil {
			return err
		}
	}
	return nil
}

// markOnline sets the group's devices online, returning those that were not.
func (s *Service) markOnline(ctx context.Context, tx *sql.Tx, group []*beat) ([]string, error) {
	rows := make([]map[string]string, len(group))
	for i, b := range group {
		rows[i] = map[string]string{"id": b.agent.DeviceID}
	}
	from, col := s.db.JSONRows("$2", "v", "id uuid")
	return store.QueryAll(ctx, tx, `UPDATE devices SET status = $1 WHERE id IN (SELECT `+col("id")+` FROM `+from+`)
		AND status <> $1 AND decommissioned_at IS NULL RETURNING id`, []any{StatusOnline, store.EncodeJSON(rows)}, store.ScanString)
}

// recordBeat records one main-agent heartbeat of the group.
func (s *Service) recordBeat(ctx context.Context, tx *sql.Tx, b *beat, now time.Time) error {
	a, hb := b.agent, b.hb
	sampledAt, late, keep := sampleTime(now, hb.SampledAt, s.opts.MetricsRetention)
	var metrics any
	if hb.Metrics != nil {
		metrics = store.EncodeJSON(hb.Metrics)
	}
	var err error
	if late {
		err = s.db.TxQueryRowContext(ctx, tx, `UPDATE devices SET last_seen_at = $1, updated_at = $1, main_agent_silent_since = NULL
			WHERE id = $2
			RETURNING EXISTS (SELECT 1 FROM device_commands WHERE device_id = $2 AND status = $3)
				OR EXISTS (SELECT 1 FROM agent_calls WHERE device_id = $2 AND status = $4 AND expires_at > $1)`,
			now, a.DeviceID, CommandQueued, callQueued).Scan(&b.waiting)
	} else {
		err = s.db.TxQueryRowContext(ctx, tx, `UPDATE devices SET last_seen_at = $1, updated_at = $1, agent_version = $2,
			uptime_seconds = $3, last_user = $4, pending_reboot = $5, metrics = COALESCE($6, metrics), main_agent_silent_since = NULL,
			live_channel = $10
			WHERE id = $7
			RETURNING EXISTS (SELECT 1 FROM device_commands WHERE device_id = $7 AND status = $8)
				OR EXISTS (SELECT 1 FROM agent_calls WHERE device_id = $7 AND status = $9 AND expires_at > $1)`,
			now, hb.AgentVersion, hb.UptimeSeconds, hb.LastUser, hb.PendingReboot, metrics, a.DeviceID, CommandQueued, callQueued,
			store.NullIfEmpty(hb.LiveChannel)).Scan(&b.waiting)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if hb.Metrics != nil && keep {
		if _, err := s.db.TxExecContext(ctx, tx, `INSERT INTO device_metrics (device_id, recorded_at, cpu_percent, ram_percent,
			disk_percent, sample) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, a.DeviceID, sampledAt, hb.Metrics.CPUPercent,
			hb.Metrics.RAMPercent, hb.Metrics.DiskPercent, metrics); err != nil {
			return err
		}
	}
	return nil
}

// LiveChannelComing reports whether the online device's agent said, in its last heartbeat, that
// its live channel is up or being opened: a request that needs the channel, not finding it,
// may then wait a moment for it. An agent that said nothing, or that the channel is down, is
// not waited for.
func (s *Service) LiveChannelComing(ctx context.Context, deviceID string) (bool, error) {
	var state sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT live_channel FROM devices WHERE id = $1 AND status = $2 AND decommissioned_at IS NULL`,
		deviceID, StatusOnline).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the live channel state of device %s: %w", deviceID, err)
	}
	return state.String == agentproto.LiveChannelUp || state.String == agentproto.LiveChannelConnecting, nil
}

// Bounds of a heartbeat's own sample time.
const (
	// sampleClockSkew is how far in the future a sample time may be (the agent's clock running
	// ahead) before the sample is refused; within it the sample counts as now.
	sampleClockSkew = time.Minute
	// lateSampleAfter is the age from which a sample is late: it no longer says how the device
	// is now, only how it was.
	lateSampleAfter = time.Minute
)

// sampleTime is when a heartbeat's sample goes into the metrics history, whether it is late,
// and whether it is kept at all: not when it is from the future or older than the history.
func sampleTime(now time.Time, sampledAt *time.Time, retention time.Duration) (at time.Time, late, keep bool) {
	if sampledAt == nil {
		return now, false, true
	}
	at = sampledAt.UTC().Truncate(time.Microsecond)
	switch {
	case at.After(now.Add(sampleClockSkew)):
		return now, false, false
	case at.After(now):
		return now, false, true
	case retention > 0 && at.Before(now.Add(-retention)):
		return at, true, false
	}
	return at, now.Sub(at) > lateSampleAfter, true
}

// watchdogBeat records the watchdog's state, and when the watchdog is alive while the main
// agent has been silent for longer than SilentAfter, marks since when the main agent is silent.
func (s *Service) watchdogBeat(ctx context.Context, tx *sql.Tx, a Agent, hb agentproto.Heartbeat, now time.Time) error {
	state, reason := WatchdogConnected, ""
	switch hb.WatchdogState {
	case WatchdogFailover:
		state = WatchdogFailover
	case WatchdogGaveUp:
		state, reason = WatchdogGaveUp, hb.WatchdogReason
	}
	if _, err := tx.ExecContext(ctx, `UPDATE devices SET watchdog_status = $1, watchdog_reason = $2, watchdog_seen_at = $3 WHERE id = $4`,
		state, store.NullIfEmpty(reason), now, a.DeviceID); err != nil {
		return err
	}
	// The silence mark is set by its own conditional update, so that the transition (and only
	// it) is known and published; on an ordinary beat it matches no row.
	res, err := tx.ExecContext(ctx, `UPDATE devices SET main_agent_silent_since = COALESCE(last_seen_at, enrolled_at)
		WHERE id = $1 AND main_agent_silent_since IS NULL AND COALESCE(last_seen_at, enrolled_at) < $2`,
		a.DeviceID, now.Add(-s.opts.SilentAfter))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return s.recordEvent(ctx, tx, EventMainAgentSilent, a.DeviceID)
	}
	return nil
}

// StoreInventory replaces a device's inventory as a whole and updates the device's summary
// fields from it.
func (s *Service) StoreInventory(ctx context.Context, a Agent, inv agentproto.Inventory) error {
	cleanInventory(&inv)
	if len(inv.Software) > maxSoftware {
		inv.Software = inv.Software[:maxSoftware]
		inv.Errors = append(inv.Errors, "software: list cut at 10000 packages")
	}
	now := s.clock.Now()
	if inv.CollectedAt.IsZero() {
		inv.CollectedAt = now
	}
	ip, mac := primaryAddress(inv.Network)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		hostname := strings.TrimSpace(inv.Hostname)
		res, err := tx.ExecContext(ctx, `UPDATE devices SET hostname = COALESCE(NULLIF($1, ''), hostname), os_type = COALESCE(NULLIF($2, ''), os_type),
			os_name = $3, os_version = $4, os_build = $5, architecture = COALESCE(NULLIF($6, ''), architecture), manufacturer = $7,
			model = $8, serial_number = $9, cpu_model = $10, cpu_cores = $11, memory_bytes = $12, ip_address = $13,
			mac_address = $14, uptime_seconds = $15, inventory_at = $16, updated_at = $16 WHERE id = $17 AND decommissioned_at IS NULL`,
			hostname, inv.OS.Type, inv.OS.Name, inv.OS.Version, inv.OS.Build, inv.OS.Architecture, inv.Hardware.Manufacturer,
			inv.Hardware.Model, inv.Hardware.SerialNumber, inv.Hardware.CPUModel, inv.Hardware.CPUCores, int64(inv.Hardware.MemoryBytes),
			ip, mac, inv.OS.UptimeSeconds, now, a.DeviceID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errBadAgentToken
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_inventory WHERE device_id = $1`, a.DeviceID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_inventory (device_id, os, hardware, disks, network, users, errors,
			software_count, collected_at, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, a.DeviceID,
			store.EncodeJSON(storedOS{inv.OS, inv.LastLogons}), store.EncodeJSON(inv.Hardware), store.EncodeJSON(jsonenc.NonNil(inv.Disks)), store.EncodeJSON(jsonenc.NonNil(inv.Network)),
			store.EncodeJSON(jsonenc.NonNil(inv.Users)), store.EncodeJSON(jsonenc.NonNil(inv.Errors)), len(inv.Software), inv.CollectedAt.UTC(), now); err != nil {
			return err
		}
		if err := replaceSoftware(ctx, tx, a.DeviceID, inv.Software); err != nil {
			return err
		}
		if err := storePosture(ctx, tx, a.DeviceID, inv.Posture, now); err != nil {
			return err
		}
		return s.changed(ctx, tx, a.DeviceID)
	})
	if err != nil {
		return fmt.Errorf("store the inventory of device %s: %w", a.DeviceID, err)
	}
	return nil
}

const maxSoftware = 10000

// primaryAddress picks the address technicians look for: the first IPv4 of an interface that
// is up and not a loopback, else the first IPv6 such address.
func primaryAddress(ifaces []agentproto.NetworkInterface) (ip, mac string) {
	var v6, v6mac string
	for _, n := range ifaces {
		if n.Loopback || !n.Up {
			continue
		}
		for _, addr := range n.Addresses {
			p, _, err := net.ParseCIDR(addr)
			if err != nil {
				p = net.ParseIP(addr)
			}
			if p == nil || p.IsLinkLocalUnicast() || p.IsLoopback() {
				continue
			}
			if p.To4() != nil {
				return p.String(), n.MACAddress
			}
			if v6 == "" {
				v6, v6mac = p.String(), n.MACAddress
			}
		}
	}
	return v6, v6mac
}

// replaceSoftware makes the device's software rows the reported list, by difference: a
// package keeps its row, and its ID, from one inventory to the next (softwareID), so links to
// /software/inventory/{deviceId}/{softwareId} stay valid; changed rows are updated, missing
// ones deleted, new ones inserted.
func replaceSoftware(ctx context.Context, tx *sql.Tx, deviceID string, sw []agentproto.Software) error {
	want := make(map[string]agentproto.Software, len(sw))
	order := make([]string, 0, len(sw))
	for _, p := range sw {
		id := softwareID(deviceID, p, func(id string) bool { _, taken := want[id]; return taken })
		want[id] = p
		order = append(order, id)
	}
	type stored struct {
		id string
		p  agentproto.Software
	}
	rows, err := store.QueryAll(ctx, tx, `SELECT id, name, version, publisher, architecture, install_date, size_bytes, source
		FROM device_software WHERE device_id = $1`, []any{deviceID}, func(row store.Scanner) (stored, error) {
		var r stored
		return r, row.Scan(&r.id, &r.p.Name, &r.p.Version, &r.p.Publisher, &r.p.Architecture, &r.p.InstallDate, &r.p.SizeBytes,
			&r.p.Source)
	})
	if err != nil {
		return fmt.Errorf("read the installed software of device %s: %w", deviceID, err)
	}
	have := make(map[string]agentproto.Software, len(rows))
	for _, r := range rows {
		have[r.id] = r.p
	}
	var gone []any
	for id := range have {
		if _, ok := want[id]; !ok {
			gone = append(gone, id)
		}
	}
	const batch = 200
	for start := 0; start < len(gone); start += batch {
		ids := gone[start:min(start+batch, len(gone))]
		var a store.Args
		a.Add(deviceID)
		marks := make([]string, len(ids))
		for i, id := range ids {
			marks[i] = a.Add(id)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_software WHERE device_id = $1 AND id IN (`+strings.Join(marks, ", ")+`)`,
			a.Values()...); err != nil {
			return err
		}
	}
	var added []string
	for _, id := range order {
		old, ok := have[id]
		switch {
		case !ok:
			added = append(added, id)
		case old != want[id]:
			p := want[id]
			if _, err := tx.ExecContext(ctx, `UPDATE device_software SET name = $1, version = $2, publisher = $3, architecture = $4,
				install_date = $5, size_bytes = $6, source = $7 WHERE id = $8`, p.Name, p.Version, p.Publisher, p.Architecture,
				p.InstallDate, p.SizeBytes, p.Source, id); err != nil {
				return err
			}
		}
	}
	for start := 0; start < len(added); start += batch {
		end := min(start+batch, len(added))
		var a store.Args
		values := make([]string, 0, end-start)
		for _, id := range added[start:end] {
			p := want[id]
			values = append(values, "("+strings.Join([]string{a.Add(id), a.Add(deviceID), a.Add(p.Name), a.Add(p.Version),
				a.Add(p.Publisher), a.Add(p.Architecture), a.Add(p.InstallDate), a.Add(p.SizeBytes), a.Add(p.Source)}, ", ")+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_software (id, device_id, name, version, publisher, architecture,
			install_date, size_bytes, source) VALUES `+strings.Join(values, ", "), a.Values()...); err != nil {
			return err
		}
	}
	return nil
}

// softwareNamespace seeds the IDs of software rows.
var softwareNamespace = uuid.MustParse("6f1d3c1e-5b0a-4c57-9a55-3f0e8f5b2d41")

// softwareID is the stable ID of a package on a device: derived from the device, the package's
// source, name and architecture, so the same package keeps its ID across inventories (a new
// version updates the row). A list naming one package twice (two versions side by side) tells
// them apart by version, then by position; taken reports IDs already given.
func softwareID(deviceID string, p agentproto.Software, taken func(string) bool) string {
	key := deviceID + "\x00" + p.Source + "\x00" + p.Name + "\x00" + p.Architecture
	id := uuid.NewSHA1(softwareNamespace, []byte(key)).String()
	if !taken(id) {
		return id
	}
	key += "\x00" + p.Version
	for n := 0; ; n++ {
		id = uuid.NewSHA1(softwareNamespace, []byte(key+"\x00"+strconv.Itoa(n))).String()
		if !taken(id) {
			return id
		}
	}
}

// RecordResult stores an agent's report on a command. A result for a command that already
// reached a final state (it timed out, or was cancelled) is ignored. A completed
// cancel_command ends the command it withdrew cancelled (see CancelConfirmed).
func (s *Service) RecordResult(ctx context.Context, a Agent, r agentproto.CommandResult) error {
	cleanResult(&r)
	status := CommandFailed
	switch r.Status {
	case agentproto.ResultCompleted:
		status = CommandCompleted
	case agentproto.ResultTimedOut:
		status = CommandTimedOut
	case agentproto.ResultCancelled:
		status = CommandCancelled
	}
	var result any
	if len(r.Result) > 0 {
		result = string(r.Result)
	}
	var exit any
	if r.ExitCode != nil {
		exit = *r.ExitCode
	}
	stdout, stdoutEncoding := storedOutput(r.Stdout, r.StdoutEncoding)
	stderr, stderrEncoding := storedOutput(r.Stderr, r.StderrEncoding)
	const update = `UPDATE device_commands SET status = $1, completed_at = $2, exit_code = $3, stdout = $4,
		stderr = $5, truncated = $6, duration_ms = $7, result = $8, error = $9, stdout_encoding = $14, stderr_encoding = $15
		WHERE id = $10 AND device_id = $11 AND status IN ($12, $13)`
	now := s.clock.Now()
	args := []any{status, now, exit, stdout, stderr, r.Truncated, r.DurationMs, result,
		store.NullIfEmpty(r.Error), r.CommandID, a.DeviceID, CommandQueued, CommandSent, stdoutEncoding, stderrEncoding}
	if len(s.hooks.commandFinished) == 0 && !s.anyOnResult {
		// One statement records most results; a cancel_command's, and one that changes
		// nothing (a late result), take the transaction below.
		res, err := s.db.ExecContext(ctx, update+` AND type <> '`+agentproto.CommandCancel+`'`, args...)
		if err != nil {
			return fmt.Errorf("store the result of command %s: %w", r.CommandID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
	}
	queued := &resultQueue{}
	ctx = context.WithValue(ctx, resultQueueKey{}, queued)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		queued.cmds, queued.after = nil, nil
		var kind, payload string
		err := s.db.TxQueryRowContext(ctx, tx, update+` RETURNING type, payload`, args...).Scan(&kind, &payload)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if kind == agentproto.CommandCancel && status == CommandCompleted {
			if err := confirmCancellation(ctx, tx, a.DeviceID, payload, now); err != nil {
				return err
			}
		}
		if on := s.kinds[kind].OnResult; on != nil {
			if err := on(ctx, tx, a.DeviceID, r); err != nil {
				return fmt.Errorf("record the result of %s command %s: %w", kind, r.CommandID, err)
			}
		}
		return runHooks(ctx, tx, a.DeviceID, s.hooks.commandFinished)
	})
	if err != nil {
		return fmt.Errorf("store the result of command %s: %w", r.CommandID, err)
	}
	s.Dispatch(ctx, queued.cmds)
	for _, fn := range queued.after {
		fn(ctx)
	}
	return nil
}

// storedOutput is what is stored of an output stream and its encoding: base64 output (bytes
// that are not text, kept exactly) re-encoded within the output cap, text within the cap with
// what text columns cannot hold cleaned. Output an older agent sent as text with a NUL loses
// only the NUL.
func storedOutput(s, encoding string) (out, enc any) {
	if s == "" {
		return nil, nil
	}
	if encoding == agentproto.OutputBase64 {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			if len(b) > DefaultOutputBytes {
				b = b[:DefaultOutputBytes]
			}
			return base64.StdEncoding.EncodeToString(b), agentproto.OutputBase64
		}
	}
	if len(s) > DefaultOutputBytes {
		s = s[:DefaultOutputBytes]
	}
	return strings.ToValidUTF8(cleanText(s), "\uFFFD"), nil
}

// Sweep marks devices offline whose agents went quiet, times out commands past their
// deadline, and trims the metrics history. It runs periodically on one node at a time.
func (s *Service) Sweep(ctx context.Context) error {
	now := s.clock.Now()
	quiet, err := store.QueryStrings(ctx, s.db, `SELECT id FROM devices WHERE status = $1 AND last_seen_at < $2`, StatusOnline,
		now.Add(-s.opts.OfflineAfter))
	if err != nil {
		return fmt.Errorf("find the devices gone quiet: %w", err)
	}
	for _, id := range quiet {
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE devices SET status = $1, updated_at = $2 WHERE id = $3 AND status = $4 AND last_seen_at < $5`,
				StatusOffline, now, id, StatusOnline, now.Add(-s.opts.OfflineAfter))
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil
			}
			if err := s.changed(ctx, tx, id); err != nil {
				return err
			}
			return s.recordEvent(ctx, tx, EventOffline, id)
		})
		if err != nil {
			return fmt.Errorf("mark device %s offline: %w", id, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE device_commands SET status = $1, completed_at = $2,
		error = CASE WHEN status = $3 THEN 'the device did not connect in time' ELSE 'the agent did not report a result in time' END
		WHERE status IN ($3, $4) AND expires_at < $2`, CommandTimedOut, now, CommandQueued, CommandSent); err != nil {
		return fmt.Errorf("time out overdue commands: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM device_metrics WHERE recorded_at < $1`, now.Add(-s.opts.MetricsRetention)); err != nil {
		return fmt.Errorf("trim the metrics history: %w", err)
	}
	if _, err = s.db.ExecContext(ctx, `DELETE FROM agent_calls WHERE expires_at < $1`, now.Add(-time.Minute)); err != nil {
		return fmt.Errorf("delete expired agent calls: %w", err)
	}
	return nil
}
