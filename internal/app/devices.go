package app

import (
	"context"
	"database/sql"
	"time"

	"gale/internal/agenthub"
	"gale/internal/agentproto"
	"gale/internal/devices"
	"gale/internal/enrollment"
	"gale/internal/systemtools"
)

// buildDevices wires enrollment keys, devices, the agent hub and the system tools.
func (a *App) buildDevices(ctx context.Context) {
	cfg := a.Config
	a.Enrollment = enrollment.New(a.DB, a.Logger, enrollment.Options{DefaultTTL: cfg.EnrollmentKeyDefaultTTL})
	a.Enrollment.Register(a.HTTP)
	heartbeat := int(cfg.AgentHeartbeatInterval / time.Second)
	a.Devices = devices.New(a.DB, a.Logger, keyClaimer{a.Enrollment}, a.Limiter, devices.Options{
		PublicURL: cfg.PublicURL, EnrollmentSecret: cfg.EnrollmentSecret,
		Agent: agentproto.Config{HeartbeatIntervalSeconds: heartbeat, MetricsCollectionIntervalSeconds: heartbeat,
			InventoryIntervalMinutes: 24 * 60},
		OfflineAfter: cfg.DeviceOfflineAfter, SilentAfter: cfg.AgentSilentAfter, MetricsRetention: cfg.DeviceMetricsRetention,
		ProvisionTTL: cfg.DeviceProvisionTTL, EnrollPerMinute: cfg.AgentEnrollPerMinute, ListCacheRows: cfg.ListCacheRows})
	a.Agents = agenthub.New(a.Devices, a.bus, a.Logger, a.HTTP.Registry(), agenthub.Options{PingInterval: cfg.AgentPingInterval,
		Workers: a.DB.Conns})
	a.Devices.SetNotifier(a.Agents)
	a.Devices.Register(a.HTTP)
	a.HTTP.Handle("GET /api/v1"+agentproto.PathWebSocket, a.Agents)
	systemtools.New(a.Devices, a.Agents, a.Audit).Register(a.HTTP)
}

// keyClaimer lets the device service claim and mint enrollment keys.
type keyClaimer struct{ keys *enrollment.Service }

func (k keyClaimer) Claim(ctx context.Context, tx *sql.Tx, rawKey, rawSecret, globalSecret string) (devices.ClaimedKey, error) {
	c, err := k.keys.Claim(ctx, tx, rawKey, rawSecret, globalSecret)
	return devices.ClaimedKey{KeyID: c.KeyID, PartnerID: c.PartnerID, OrgID: c.OrgID, SiteID: c.SiteID, DeviceID: c.DeviceID}, err
}

func (k keyClaimer) MintForDevice(ctx context.Context, tx *sql.Tx, partnerID, orgID, siteID, deviceID string, ttl time.Duration) (string, string, string, error) {
	return k.keys.MintForDevice(ctx, tx, partnerID, orgID, siteID, deviceID, ttl)
}
