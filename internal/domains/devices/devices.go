// Package devices holds the managed endpoints: enrollment of agents, the device API (list,
// detail, move, decommission), heartbeats and inventory reported by agents, and the durable
// commands technicians send them. The live channel itself lives in agenthub; this package
// decides and persists.
package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/events"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Device event types, recorded on transitions only (never on every heartbeat).
const (
	EventEnrolled        = "device.enrolled"
	EventOnline          = "device.online"
	EventOffline         = "device.offline"
	EventMainAgentSilent = "device.main_agent_silent"
	EventDecommissioned  = "device.decommissioned"
)

// recordEvent records a device event in tx; its data is the device as GET /devices/{id}
// shows it, read inside the changing transaction.
func (s *Service) recordEvent(ctx context.Context, tx *sql.Tx, typ, id string) error {
	d, err := s.get(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return err
	}
	_, err = events.Record(ctx, tx, events.Event{Type: typ, PartnerID: d.PartnerID, OrgID: d.OrgID, ResourceType: "device",
		ResourceID: id}, d)
	return err
}

// Device statuses.
const (
	StatusPending        = "pending"
	StatusOnline         = "online"
	StatusOffline        = "offline"
	StatusDecommissioned = "decommissioned"
)

// Watchdog statuses shown on devices.
const (
	WatchdogConnected = "connected"
	WatchdogFailover  = "failover"
	WatchdogOffline   = "offline"
	// WatchdogGaveUp: the watchdog stopped restarting a main agent that kept failing at start
	// (WatchdogReason says why); it retries when the configuration changes, or within an hour.
	WatchdogGaveUp = "gave_up"
)

// Device is the API view of a device, in lists and in detail.
type Device struct {
	ID            string  `json:"id" format:"uuid"`
	PartnerID     string  `json:"partnerId" format:"uuid"`
	OrgID         string  `json:"orgId" format:"uuid"`
	SiteID        string  `json:"siteId" format:"uuid"`
	Hostname      string  `json:"hostname"`
	DisplayName   *string `json:"displayName"`
	Status        string  `json:"status" enum:"pending,online,offline,decommissioned"`
	OSType        string  `json:"osType" doc:"linux, windows or macos; empty until the agent enrolls."`
	OSName        string  `json:"osName"`
	OSVersion     string  `json:"osVersion"`
	OSBuild       string  `json:"osBuild"`
	Architecture  string  `json:"architecture"`
	AgentVersion  string  `json:"agentVersion"`
	Manufacturer  string  `json:"manufacturer"`
	Model         string  `json:"model"`
	SerialNumber  string  `json:"serialNumber"`
	CPUModel      string  `json:"cpuModel"`
	CPUCores      int     `json:"cpuCores"`
	MemoryBytes   int64   `json:"memoryBytes"`
	IPAddress     string  `json:"ipAddress"`
	MACAddress    string  `json:"macAddress"`
	LastUser      string  `json:"lastUser"`
	UptimeSeconds int64   `json:"uptimeSeconds"`
	PendingReboot bool    `json:"pendingReboot"`
	// Metrics is the last sample the agent sent.
	Metrics *agentproto.Metrics `json:"metrics"`
	Tags    []string            `json:"tags"`
	// WatchdogStatus is connected, failover or gave_up as the watchdog last reported, offline
	// when the watchdog has gone quiet, null when no watchdog ever reported.
	WatchdogStatus *string `json:"watchdogStatus" enum:"connected,failover,gave_up,offline"`
	// WatchdogReason says why the watchdog gave up on the main agent; null otherwise.
	WatchdogReason *string `json:"watchdogReason"`
	// MainAgentSilentSince is set while the watchdog is alive but the main agent has been silent
	// for longer than the silence threshold: the time of the main agent's last contact.
	MainAgentSilentSince *time.Time `json:"mainAgentSilentSince"`
	LastSeen             *time.Time `json:"lastSeen"`
	Enrolled             *time.Time `json:"enrolled" doc:"When the agent enrolled; null for a provisioned device no agent has claimed yet."`
	InventoryAt          *time.Time `json:"inventoryAt"`
	DecommissionedAt     *time.Time `json:"decommissionedAt"`
	CreatedAt            time.Time  `json:"createdAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
	// watchdogSeen is the watchdog's last report, from which WatchdogStatus was worked out.
	watchdogSeen time.Time
	// encoded is the device's JSON, kept with a row of the list cache (see cacheRow).
	encoded []byte
}

// Name is what people call the device: its display name, else its hostname.
func (d *Device) Name() string {
	if d.DisplayName != nil && *d.DisplayName != "" {
		return *d.DisplayName
	}
	return d.Hostname
}

var deviceColumns = `d.id, d.partner_id, d.org_id, d.site_id, d.hostname, d.display_name, d.status, d.os_type, d.os_name,
	d.os_version, d.os_build, d.architecture, d.agent_version, d.manufacturer, d.model, d.serial_number, d.cpu_model,
	d.cpu_cores, d.memory_bytes, d.ip_address, d.mac_address, d.last_user, d.uptime_seconds, d.pending_reboot, d.metrics,
	d.watchdog_status, d.watchdog_reason, ` + store.TimeColumns("d.watchdog_seen_at", "d.main_agent_silent_since", "d.last_seen_at", "d.enrolled_at",
	"d.inventory_at", "d.decommissioned_at", "d.created_at", "d.updated_at") +
	// Tags never hold a comma (tagPattern), so they travel as one list in the row; they are
	// sorted after reading (an ordered aggregate costs SQLite a sort per row).
	`, (SELECT string_agg(t.tag, ',') FROM device_tags t WHERE t.device_id = d.id)`

// selectDevices reads devices with deviceColumns.
var selectDevices = `SELECT ` + deviceColumns + ` FROM devices d`

// scanner reads device rows; watchdogQuiet is how long a watchdog may stay silent before
// it shows as offline, by clock.
type scanner struct {
	watchdogQuiet time.Duration
	clock         clock.Clock
}

func (sc scanner) scan(row store.Scanner) (Device, error) {
	var d Device
	// One allocation for everything Scan needs addresses of; the times the device points to
	// live in it.
	v := new(struct {
		display, metrics, wdStatus, wdReason, tags                   sql.NullString
		wdSeen, silent, seen, enrolled, inv, decom, created, updated store.NullTime
	})
	err := row.Scan(&d.ID, &d.PartnerID, &d.OrgID, &d.SiteID, &d.Hostname, &v.display, &d.Status, &d.OSType, &d.OSName,
		&d.OSVersion, &d.OSBuild, &d.Architecture, &d.AgentVersion, &d.Manufacturer, &d.Model, &d.SerialNumber, &d.CPUModel,
		&d.CPUCores, &d.MemoryBytes, &d.IPAddress, &d.MACAddress, &d.LastUser, &d.UptimeSeconds, &d.PendingReboot, &v.metrics,
		&v.wdStatus, &v.wdReason, &v.wdSeen, &v.silent, &v.seen, &v.enrolled, &v.inv, &v.decom, &v.created, &v.updated, &v.tags)
	if err != nil {
		return d, err
	}
	d.CreatedAt, d.UpdatedAt = v.created.Time, v.updated.Time
	d.DisplayName = store.StringPtr(v.display)
	if v.metrics.Valid && v.metrics.String != "" {
		m, ok := parseMetrics(v.metrics.String)
		if ok || json.Unmarshal([]byte(v.metrics.String), &m) == nil {
			d.Metrics = &m
		}
	}
	if v.wdStatus.Valid {
		st := v.wdStatus.String
		if v.wdSeen.Valid && sc.clock.Now().Sub(v.wdSeen.Time) > sc.watchdogQuiet {
			st = WatchdogOffline
		}
		d.WatchdogStatus, d.watchdogSeen = &st, v.wdSeen.Time
		if st == WatchdogGaveUp {
			d.WatchdogReason = store.StringPtr(v.wdReason)
		}
	}
	d.MainAgentSilentSince, d.LastSeen, d.Enrolled = v.silent.Ptr(), v.seen.Ptr(), v.enrolled.Ptr()
	d.InventoryAt, d.DecommissionedAt = v.inv.Ptr(), v.decom.Ptr()
	d.Tags = []string{}
	if v.tags.String != "" {
		d.Tags = strings.Split(v.tags.String, ",")
		slices.Sort(d.Tags)
	}
	return d, nil
}

// cacheRow readies a device row for the list cache: with its encoding, which the lists that
// take it from the cache then copy, and until when it stays right without changing: a
// watchdog that stops reporting shows offline by time alone.
func (sc scanner) cacheRow(d *Device) (*Device, time.Time) {
	if b, err := d.AppendJSON(nil); err == nil {
		d.encoded = b
	}
	if d.WatchdogStatus == nil || *d.WatchdogStatus == WatchdogOffline || d.watchdogSeen.IsZero() {
		return d, time.Time{}
	}
	return d, d.watchdogSeen.Add(sc.watchdogQuiet)
}

// Hooks let other domains react to device changes inside the changing transaction. A domain
// declares its hooks on the module kernel (k.Declare); nil fields add nothing, and hooks of each
// kind run in module order.
type Hooks struct {
	// Changed runs after a device's attributes, status or tags changed (dynamic groups).
	Changed func(ctx context.Context, tx *sql.Tx, deviceID string) error
	// LeftOrg runs when a device leaves its organization (moved or decommissioned).
	LeftOrg func(ctx context.Context, tx *sql.Tx, deviceID, reason string) error
	// Moved runs when a device moved to organization orgID, once its row says so and before
	// Changed runs (custom values of the organization it left).
	Moved func(ctx context.Context, tx *sql.Tx, deviceID, orgID string) error
	// Heartbeat runs in the transaction that records main-agent heartbeats, after their
	// metrics are stored (alert evaluation), with the devices whose heartbeats it records.
	Heartbeat func(ctx context.Context, tx *sql.Tx, deviceIDs []string) error
	// CommandFinished runs in the transaction that records an agent's result of a command.
	CommandFinished func(ctx context.Context, tx *sql.Tx, deviceID string) error
}

// Notifier tells the agent channel that a device has work waiting or must stop. The agent
// channel declares itself on the module kernel; without one (a service built alone, in a test)
// nothing is told.
type Notifier interface {
	// Work says the device has pending commands or calls.
	Work(ctx context.Context, deviceID string)
	// Stop says the device was decommissioned: close its connection.
	Stop(ctx context.Context, deviceID string)
	// Connected reports whether this node holds the device's live connection.
	Connected(deviceID string) bool
	// Deliver hands this node's connection of the device a command already recorded as sent;
	// false when the node no longer holds one.
	Deliver(deviceID string, cmd agentproto.Command) bool
}

type nopNotifier struct{}

func (nopNotifier) Work(context.Context, string)            {}
func (nopNotifier) Stop(context.Context, string)            {}
func (nopNotifier) Connected(string) bool                   { return false }
func (nopNotifier) Deliver(string, agentproto.Command) bool { return false }

// Options are the device settings of the server configuration.
type Options struct {
	// PublicURL is the address agents reach the server at (provisioning payloads name it).
	PublicURL string
	// EnrollmentSecret is the global AGENT_ENROLLMENT_SECRET.
	EnrollmentSecret string
	Agent            agentproto.Config
	// OfflineAfter marks a device offline when no heartbeat arrived for this long.
	OfflineAfter time.Duration
	// SilentAfter is how long the main agent may be silent while its watchdog still reports
	// before mainAgentSilentSince is set.
	SilentAfter time.Duration
	// MetricsRetention is how long the per-device metrics history is kept.
	MetricsRetention time.Duration
	// ProvisionTTL is the lifetime of the enrollment payload of a provisioned device.
	ProvisionTTL time.Duration
	// EnrollPerMinute limits enrollments per client address; 0 turns the limit off.
	EnrollPerMinute int
	// ListCacheRows is how many device rows lists keep cached on this node (0: none).
	ListCacheRows int
}

// Service is the device domain.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	opts    Options
	keys    KeyClaimer
	limiter *ratelimit.Limiter
	hooks   hookLists
	// kinds are the registered command kinds, by name.
	kinds map[string]CommandKind
	// anyOnResult is set once a kind handles its results: results are then recorded in a
	// transaction.
	anyOnResult bool
	notifier    Notifier
	sc          scanner
	// listRows caches device rows for lists (nil: none).
	listRows *store.RowCache[*Device]
	// groups renders the device list's group filter and finds the owners of targeted groups.
	groups Groups
	// beats are the heartbeats waiting to be recorded together.
	beats beats
}

// KeyClaimer is the part of the enrollment-key service that enrollment, provisioning and
// decommissioning use.
type KeyClaimer interface {
	Claim(ctx context.Context, tx *sql.Tx, rawKey, rawSecret, globalSecret string) (ClaimedKey, error)
	MintForDevice(ctx context.Context, tx *sql.Tx, partnerID, orgID, siteID, deviceID string, ttl time.Duration) (rawKey, rawSecret, keyID string, err error)
	// RevokeForDevice revokes, as of at, the keys bound to the device that are not revoked yet.
	RevokeForDevice(ctx context.Context, tx *sql.Tx, deviceID string, at time.Time) error
}

// ClaimedKey is what a successfully claimed enrollment key grants.
type ClaimedKey struct {
	KeyID, PartnerID, OrgID, SiteID, DeviceID string
}

// Deps are what the device service works with.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time heartbeats, commands and sweeps are stamped and judged by (nil: the
	// system clock).
	Clock clock.Clock
	// Keys claims and mints enrollment keys.
	Keys KeyClaimer
	// Limiter limits enrollments per client address (nil: no limit).
	Limiter *ratelimit.Limiter
}

// New returns the device service.
func New(d Deps, opts Options) *Service {
	clk := clock.Or(d.Clock)
	sc := scanner{watchdogQuiet: opts.OfflineAfter, clock: clk}
	s := &Service{db: d.DB, logger: d.Logger, clock: clk, opts: opts, keys: d.Keys, limiter: d.Limiter, notifier: nopNotifier{},
		sc: sc, kinds: map[string]CommandKind{}, listRows: store.NewRowCache(opts.ListCacheRows, sc.cacheRow),
		beats: beats{committers: d.DB.AgentWriters()}}
	for _, k := range builtInCommandKinds() {
		if err := s.addCommandKind(k); err != nil {
			panic(err)
		}
	}
	return s
}

// plug takes in what other modules declared for devices, once every module is built: their
// command kinds, then the handlers of their results, their hooks on device changes, and the
// agent channel.
func (s *Service) plug(kinds []CommandKind, results []ResultHook, hooks []Hooks, channels []Notifier) error {
	for _, k := range kinds {
		if err := s.addCommandKind(k); err != nil {
			return err
		}
	}
	for _, r := range results {
		if err := s.addResultHook(r); err != nil {
			return err
		}
	}
	for _, h := range hooks {
		s.addHooks(h)
	}
	switch len(channels) {
	case 0:
	case 1:
		s.notifier = channels[0]
	default:
		return fmt.Errorf("%d agent channels declared; there is one", len(channels))
	}
	return nil
}

func (s *Service) addHooks(h Hooks) {
	if h.Changed != nil {
		s.hooks.changed = append(s.hooks.changed, h.Changed)
	}
	if h.LeftOrg != nil {
		s.hooks.leftOrg = append(s.hooks.leftOrg, h.LeftOrg)
	}
	if h.Moved != nil {
		s.hooks.moved = append(s.hooks.moved, h.Moved)
	}
	if h.Heartbeat != nil {
		s.hooks.heartbeat = append(s.hooks.heartbeat, h.Heartbeat)
	}
	if h.CommandFinished != nil {
		s.hooks.commandFinished = append(s.hooks.commandFinished, h.CommandFinished)
	}
}

// hookLists are the hooks other domains declared.
type hookLists struct {
	changed, commandFinished []func(ctx context.Context, tx *sql.Tx, deviceID string) error
	heartbeat                []func(ctx context.Context, tx *sql.Tx, deviceIDs []string) error
	leftOrg                  []func(ctx context.Context, tx *sql.Tx, deviceID, reason string) error
	moved                    []func(ctx context.Context, tx *sql.Tx, deviceID, orgID string) error
}

// runHooks runs each hook in turn, stopping at the first error.
func runHooks(ctx context.Context, tx *sql.Tx, deviceID string, hooks []func(context.Context, *sql.Tx, string) error) error {
	for _, h := range hooks {
		if err := h(ctx, tx, deviceID); err != nil {
			return err
		}
	}
	return nil
}

// runHooksWith is runHooks for hooks that take one more argument.
func runHooksWith(ctx context.Context, tx *sql.Tx, deviceID, arg string, hooks []func(context.Context, *sql.Tx, string, string) error) error {
	for _, h := range hooks {
		if err := h(ctx, tx, deviceID, arg); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) changed(ctx context.Context, tx *sql.Tx, deviceID string) error {
	return runHooks(ctx, tx, deviceID, s.hooks.changed)
}

func (s *Service) leftOrg(ctx context.Context, tx *sql.Tx, deviceID, reason string) error {
	return runHooksWith(ctx, tx, deviceID, reason, s.hooks.leftOrg)
}

func (s *Service) moved(ctx context.Context, tx *sql.Tx, deviceID, orgID string) error {
	return runHooksWith(ctx, tx, deviceID, orgID, s.hooks.moved)
}

// AgentConfig is the configuration every agent gets.
func (s *Service) AgentConfig() agentproto.Config { return s.opts.Agent }
