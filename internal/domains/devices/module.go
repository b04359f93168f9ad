package devices

import (
	"context"
	"database/sql"
	"time"

	"gale/internal/domains/enrollment"
	"gale/internal/platform/access"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
	"gale/internal/wire/agentproto"
)

// Module serves devices, their commands and the agents' HTTP protocol, and marks silent
// devices offline.
var Module = module.Module{Name: "devices", Build: func(k *module.Kernel) error {
	cfg := k.Config
	heartbeat := int(cfg.AgentHeartbeatInterval / time.Second)
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock, Keys: keyClaimer{module.Get[*enrollment.Service](k)},
		Limiter: k.Limiter}, Options{
		PublicURL: cfg.PublicURL, EnrollmentSecret: cfg.EnrollmentSecret,
		Agent: agentproto.Config{HeartbeatIntervalSeconds: heartbeat, MetricsCollectionIntervalSeconds: heartbeat,
			InventoryIntervalMinutes: 24 * 60},
		OfflineAfter: cfg.DeviceOfflineAfter, SilentAfter: cfg.AgentSilentAfter, MetricsRetention: cfg.DeviceMetricsRetention,
		ProvisionTTL: cfg.DeviceProvisionTTL, EnrollPerMinute: cfg.AgentEnrollPerMinute, ListCacheRows: cfg.ListCacheRows})
	s.Register(k.HTTP)
	k.Every("device-sweep", 30*time.Second, s.Sweep)
	k.OnReady(func(context.Context) error {
		if err := s.plug(module.Declared[CommandKind](k), module.Declared[ResultHook](k), module.Declared[Hooks](k),
			module.Declared[Notifier](k)); err != nil {
			return err
		}
		s.DocumentCommandKinds(k.HTTP.API.OpenAPI())
		return s.useGroups(module.Declared[Groups](k))
	})
	k.Provide(s)
	k.Declare(partnerexport.Export[Device]{Name: "devices", Scope: access.DevicesRead, Summary: "Export devices",
		Description: "Devices of the partner's organizations, decommissioned ones included (with their status). A heartbeat " +
			"changes a device (lastSeen), so with updatedSince every device that was online since then is exported.",
		Fetch: s.ExportDevices,
		Key:   func(d Device) (time.Time, []string) { return d.UpdatedAt, []string{d.ID} }})
	k.Declare(partnerexport.Export[InventoryRow]{Name: "device-inventory", Scope: access.InventoryRead,
		Summary: "Export device inventory", Description: "Each device's last reported inventory; updatedSince compares receivedAt.",
		Fetch: s.ExportInventory,
		Key:   func(r InventoryRow) (time.Time, []string) { return r.ReceivedAt, []string{r.DeviceID} }})
	k.Declare(partnerexport.Export[SoftwareRow]{Name: "device-software", Scope: access.InventoryRead, ByID: true,
		Summary: "Export installed software",
		Description: "Installed packages of every device. A package keeps its row ID from one inventory to the next. With " +
			"updatedSince the export holds the complete lists of the devices whose inventory arrived since then (replace " +
			"those devices' lists); rows stay in ID order.",
		Fetch: s.ExportSoftware,
		Key:   func(r SoftwareRow) (time.Time, []string) { return time.Time{}, []string{r.ID} }})
	return nil
}}

// keyClaimer lets the device service claim and mint enrollment keys.
type keyClaimer struct{ keys *enrollment.Service }

func (k keyClaimer) Claim(ctx context.Context, tx *sql.Tx, rawKey, rawSecret, globalSecret string) (ClaimedKey, error) {
	c, err := k.keys.Claim(ctx, tx, rawKey, rawSecret, globalSecret)
	return ClaimedKey{KeyID: c.KeyID, PartnerID: c.PartnerID, OrgID: c.OrgID, SiteID: c.SiteID, DeviceID: c.DeviceID}, err
}

func (k keyClaimer) MintForDevice(ctx context.Context, tx *sql.Tx, partnerID, orgID, siteID, deviceID string, ttl time.Duration) (string, string, string, error) {
	return k.keys.MintForDevice(ctx, tx, partnerID, orgID, siteID, deviceID, ttl)
}

func (k keyClaimer) RevokeForDevice(ctx context.Context, tx *sql.Tx, deviceID string, at time.Time) error {
	return k.keys.RevokeForDevice(ctx, tx, deviceID, at)
}
