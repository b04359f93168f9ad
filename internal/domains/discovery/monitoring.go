package discovery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"gale/internal/domains/audit"
	"gale/internal/domains/monitors"
	"gale/internal/domains/snmp"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Monitors is what discovery needs of the monitors service: monitors made and switched in
// the caller's transaction.
type Monitors interface {
	CreateIn(ctx context.Context, tx *sql.Tx, in monitors.MonitorInput) (monitors.Monitor, error)
	SetEnabledIn(ctx context.Context, tx *sql.Tx, id string, enabled bool) error
}

// SNMPDevices is what discovery needs of the SNMP service: devices made and switched in the
// caller's transaction.
type SNMPDevices interface {
	CreateIn(ctx context.Context, tx *sql.Tx, in snmp.DeviceInput) (snmp.SNMPDevice, error)
	SetEnabledIn(ctx context.Context, tx *sql.Tx, id string, enabled bool) error
}

// The monitor types an asset can have.
var assetMonitorTypes = []string{"icmp_ping", "tcp_port", "http_check"}

// DiscoveryMonitoringSNMP is the SNMP device to make of an asset.
type DiscoveryMonitoringSNMP struct {
	TemplateID      string               `json:"templateId" format:"uuid" doc:"A built-in SNMP template or one of the organization."`
	Version         string               `json:"version" enum:"v1,v2c,v3"`
	Port            int                  `json:"port,omitempty" doc:"Default 161."`
	Credentials     snmp.SNMPCredentials `json:"credentials"`
	IntervalSeconds int                  `json:"intervalSeconds,omitempty" doc:"30 to 86400; default 300."`
}

// DiscoveryMonitorSpec is a monitor to make of an asset; its target is the asset's address.
type DiscoveryMonitorSpec struct {
	Type   string                    `json:"type" enum:"icmp_ping,tcp_port,http_check"`
	Config *agentproto.MonitorConfig `json:"config,omitempty" doc:"tcp_port: config.port defaults to the asset's first open port."`
	// IntervalSeconds: 10 to 86400; default 60.
	IntervalSeconds *int `json:"intervalSeconds,omitempty" doc:"10 to 86400; default 60."`
}

// DiscoveryMonitoringRequest turns monitoring of an asset on: an SNMP device, monitors, or both.
type DiscoveryMonitoringRequest struct {
	SNMP     *DiscoveryMonitoringSNMP `json:"snmp,omitempty"`
	Monitors []DiscoveryMonitorSpec   `json:"monitors,omitempty" maxItems:"3"`
}

// DiscoveryMonitoringUpdate changes an asset's monitoring (PATCH): enabled switches all of it;
// addMonitors makes monitors of types it lacks; removeMonitorTypes turns those monitors off and
// forgets them.
type DiscoveryMonitoringUpdate struct {
	Enabled            *bool                  `json:"enabled,omitempty"`
	AddMonitors        []DiscoveryMonitorSpec `json:"addMonitors,omitempty" maxItems:"3"`
	RemoveMonitorTypes []string               `json:"removeMonitorTypes,omitempty" maxItems:"3"`
}

// DiscoveryAssetMonitor is a monitor made for an asset.
type DiscoveryAssetMonitor struct {
	ID   string `json:"id" format:"uuid"`
	Type string `json:"type"`
}

// DiscoveryMonitoring is what monitors an asset.
type DiscoveryMonitoring struct {
	AssetID      string                  `json:"assetId" format:"uuid"`
	Enabled      bool                    `json:"enabled"`
	SNMPDeviceID *string                 `json:"snmpDeviceId" format:"uuid"`
	Monitors     []DiscoveryAssetMonitor `json:"monitors"`
}

type monitoringRow struct {
	DiscoveryMonitoring
	asset DiscoveryAsset
}

func (s *Service) getMonitoring(ctx context.Context, q store.Querier, id string) (monitoringRow, error) {
	x, err := s.getAsset(ctx, q, access.ScopeFrom(ctx), id)
	if err != nil {
		return monitoringRow{}, err
	}
	m := monitoringRow{asset: x, DiscoveryMonitoring: DiscoveryMonitoring{AssetID: x.ID}}
	var snmpID sql.NullString
	var raw string
	if err := q.QueryRowContext(ctx, `SELECT monitoring_enabled, snmp_device_id, monitor_ids FROM discovery_assets WHERE id = $1`, x.ID).
		Scan(&m.Enabled, &snmpID, &raw); err != nil {
		return m, fmt.Errorf("load the monitoring of asset %s: %w", x.ID, err)
	}
	m.SNMPDeviceID = store.StringPtr(snmpID)
	m.Monitors = []DiscoveryAssetMonitor{}
	if err := json.Unmarshal([]byte(raw), &m.Monitors); err != nil {
		return m, fmt.Errorf("read the monitors of asset %s: %w", x.ID, err)
	}
	return m, nil
}

func (m *monitoringRow) has(typ string) bool {
	return slices.ContainsFunc(m.Monitors, func(am DiscoveryAssetMonitor) bool { return am.Type == typ })
}

// addMonitors makes the monitors of specs that m lacks, in tx.
func (s *Service) addMonitors(ctx context.Context, tx *sql.Tx, m *monitoringRow, specs []DiscoveryMonitorSpec) error {
	for i, sp := range specs {
		field := fmt.Sprintf("monitors[%d]", i)
		if !slices.Contains(assetMonitorTypes, sp.Type) {
			return apperr.Invalid(field+".type", "icmp_ping, tcp_port or http_check")
		}
		if m.has(sp.Type) {
			return apperr.Invalid(field+".type", "the asset has a "+sp.Type+" monitor already")
		}
		cfg := agentproto.MonitorConfig{}
		if sp.Config != nil {
			cfg = *sp.Config
		}
		target := m.asset.IP
		switch sp.Type {
		case "tcp_port":
			if cfg.Port == 0 && len(m.asset.OpenPorts) > 0 {
				cfg.Port = m.asset.OpenPorts[0]
			}
			if cfg.Port == 0 {
				return apperr.Invalid(field+".config.port", "the asset has no open port seen: name the port")
			}
		case "http_check":
			scheme, port := "http", 80
			if slices.Contains(m.asset.OpenPorts, 443) && !slices.Contains(m.asset.OpenPorts, 80) {
				scheme, port = "https", 443
			}
			target = scheme + "://" + m.asset.IP + ":" + strconv.Itoa(port) + "/"
		}
		mon, err := s.monitors.CreateIn(ctx, tx, monitors.MonitorInput{OrgID: m.asset.OrgID, SiteID: m.asset.SiteID,
			Name: label(m.asset) + " " + sp.Type, Type: sp.Type, Target: target, Config: &cfg, IntervalSeconds: sp.IntervalSeconds})
		if err != nil {
			return fmt.Errorf("create the %s monitor of asset %s: %w", sp.Type, m.AssetID, err)
		}
		m.Monitors = append(m.Monitors, DiscoveryAssetMonitor{ID: mon.ID, Type: sp.Type})
	}
	return nil
}

func label(x DiscoveryAsset) string {
	if x.Hostname != "" {
		return x.Hostname
	}
	if x.SysName != "" {
		return x.SysName
	}
	return x.IP
}

func (s *Service) saveMonitoring(ctx context.Context, tx *sql.Tx, m monitoringRow) error {
	if _, err := tx.ExecContext(ctx, `UPDATE discovery_assets SET snmp_device_id = $1, monitor_ids = $2, updated_at = $3 WHERE id = $4`,
		m.SNMPDeviceID, store.EncodeJSON(m.Monitors), s.now(), m.AssetID); err != nil {
		return fmt.Errorf("save the monitoring of asset %s: %w", m.AssetID, err)
	}
	return nil
}

// setAll switches the asset's SNMP device and monitors; one deleted meanwhile is skipped.
func (s *Service) setAll(ctx context.Context, tx *sql.Tx, m monitoringRow, enabled bool) error {
	if m.SNMPDeviceID != nil {
		if err := s.snmp.SetEnabledIn(ctx, tx, *m.SNMPDeviceID, enabled); err != nil && !apperr.IsCode(err, apperr.CodeNotFound) {
			return fmt.Errorf("switch SNMP device %s of asset %s: %w", *m.SNMPDeviceID, m.AssetID, err)
		}
	}
	for _, am := range m.Monitors {
		if err := s.monitors.SetEnabledIn(ctx, tx, am.ID, enabled); err != nil && !apperr.IsCode(err, apperr.CodeNotFound) {
			return fmt.Errorf("switch monitor %s of asset %s: %w", am.ID, m.AssetID, err)
		}
	}
	return nil
}

// EnableMonitoring turns monitoring of an asset on: the SNMP device and monitors the request
// names are made (those made before and turned off are turned on again). Already on: 409
// MONITORING_ALREADY_ENABLED; the winner among concurrent calls is decided by a conditional
// UPDATE of the asset in the transaction that makes them.
func (s *Service) EnableMonitoring(ctx context.Context, id string, in DiscoveryMonitoringRequest) (DiscoveryMonitoring, error) {
	if in.SNMP == nil && len(in.Monitors) == 0 {
		return DiscoveryMonitoring{}, apperr.Invalid("monitors", "name an SNMP device, monitors, or both")
	}
	if err := mayMonitor(ctx, in.SNMP != nil, len(in.Monitors) > 0); err != nil {
		return DiscoveryMonitoring{}, err
	}
	var m monitoringRow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if m, err = s.getMonitoring(ctx, tx, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE discovery_assets SET monitoring_enabled = TRUE WHERE id = $1 AND NOT monitoring_enabled`, m.AssetID)
		if err != nil {
			return fmt.Errorf("turn the monitoring of asset %s on: %w", m.AssetID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, apperr.ConflictCode(CodeMonitoringOn, "the asset's monitoring is on already"))
		}
		if err := s.setAll(ctx, tx, m, true); err != nil {
			return err
		}
		if in.SNMP != nil && m.SNMPDeviceID == nil {
			d, err := s.snmp.CreateIn(ctx, tx, snmp.DeviceInput{OrgID: m.asset.OrgID, SiteID: m.asset.SiteID, Name: label(m.asset),
				IPAddress: m.asset.IP, Port: in.SNMP.Port, Version: in.SNMP.Version, Credentials: in.SNMP.Credentials,
				TemplateID: in.SNMP.TemplateID, IntervalSeconds: in.SNMP.IntervalSeconds})
			if err != nil {
				return prefixed(err, "snmp.")
			}
			m.SNMPDeviceID = &d.ID
		}
		if err := s.addMonitors(ctx, tx, &m, in.Monitors); err != nil {
			return err
		}
		m.Enabled = true
		if err := s.saveMonitoring(ctx, tx, m); err != nil {
			return err
		}
		return s.auditMonitoring(ctx, tx, m, "discovery_asset.enable_monitoring")
	})
	if err != nil {
		return m.DiscoveryMonitoring, fmt.Errorf("enable asset monitoring: %w", err)
	}
	return m.DiscoveryMonitoring, nil
}

// prefixed names the fields of a validation failure of another domain's input as fields of
// the request's part that carried it.
func prefixed(err error, prefix string) error {
	ae, ok := apperr.As(err)
	if !ok || len(ae.Details) == 0 {
		return err
	}
	out := *ae
	out.Details = make([]apperr.Detail, len(ae.Details))
	for i, d := range ae.Details {
		out.Details[i] = apperr.Detail{Field: prefix + d.Field, Message: d.Message}
	}
	return &out
}

func (s *Service) auditMonitoring(ctx context.Context, tx *sql.Tx, m monitoringRow, action string) error {
	return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "discovery_asset", ResourceID: m.AssetID, ResourceName: m.asset.IP,
		PartnerID: m.asset.PartnerID, OrgID: m.asset.OrgID, Details: map[string]any{"snmpDeviceId": m.SNMPDeviceID, "monitors": m.Monitors}})
}

// DisableMonitoring turns an asset's SNMP device and monitors off. Not on: 404
// MONITORING_NOT_ENABLED.
func (s *Service) DisableMonitoring(ctx context.Context, id string) (DiscoveryMonitoring, error) {
	var m monitoringRow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if m, err = s.getMonitoring(ctx, tx, id); err != nil {
			return err
		}
		if err := mayMonitor(ctx, m.SNMPDeviceID != nil, len(m.Monitors) > 0); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE discovery_assets SET monitoring_enabled = FALSE WHERE id = $1 AND monitoring_enabled`, m.AssetID)
		if err != nil {
			return fmt.Errorf("turn the monitoring of asset %s off: %w", m.AssetID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, errNotOn())
		}
		if err := s.setAll(ctx, tx, m, false); err != nil {
			return err
		}
		m.Enabled = false
		return s.auditMonitoring(ctx, tx, m, "discovery_asset.disable_monitoring")
	})
	if err != nil {
		return m.DiscoveryMonitoring, fmt.Errorf("disable asset monitoring: %w", err)
	}
	return m.DiscoveryMonitoring, nil
}

func errNotOn() error {
	return &apperr.Error{Kind: apperr.KindNotFound, Code: CodeMonitoringNotOn, Message: "the asset's monitoring is not on"}
}

// GetMonitoring returns what monitors an asset.
func (s *Service) GetMonitoring(ctx context.Context, id string) (DiscoveryMonitoring, error) {
	m, err := s.getMonitoring(ctx, s.db, id)
	return m.DiscoveryMonitoring, err
}

// UpdateMonitoring changes an asset's monitoring (PATCH). An asset that never had monitoring
// on: 404 MONITORING_NOT_ENABLED (enable it first).
func (s *Service) UpdateMonitoring(ctx context.Context, id string, in DiscoveryMonitoringUpdate) (DiscoveryMonitoring, error) {
	var m monitoringRow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if m, err = s.getMonitoring(ctx, tx, id); err != nil {
			return err
		}
		if m.SNMPDeviceID == nil && len(m.Monitors) == 0 {
			return errNotOn()
		}
		if err := mayMonitor(ctx, in.Enabled != nil && m.SNMPDeviceID != nil,
			in.Enabled != nil || len(in.AddMonitors) > 0 || len(in.RemoveMonitorTypes) > 0); err != nil {
			return err
		}
		for i, typ := range in.RemoveMonitorTypes {
			if !m.has(typ) {
				return apperr.Invalid(fmt.Sprintf("removeMonitorTypes[%d]", i), "the asset has no "+typ+" monitor")
			}
		}
		keep := m.Monitors[:0:0]
		for _, am := range m.Monitors {
			if slices.Contains(in.RemoveMonitorTypes, am.Type) {
				if err := s.monitors.SetEnabledIn(ctx, tx, am.ID, false); err != nil && !apperr.IsCode(err, apperr.CodeNotFound) {
					return fmt.Errorf("switch monitor %s of asset %s off: %w", am.ID, m.AssetID, err)
				}
				continue
			}
			keep = append(keep, am)
		}
		m.Monitors = keep
		if err := s.addMonitors(ctx, tx, &m, in.AddMonitors); err != nil {
			return prefixed(err, "add")
		}
		if in.Enabled != nil && *in.Enabled != m.Enabled {
			m.Enabled = *in.Enabled
			if _, err := tx.ExecContext(ctx, `UPDATE discovery_assets SET monitoring_enabled = $1 WHERE id = $2`, m.Enabled, m.AssetID); err != nil {
				return fmt.Errorf("switch the monitoring of asset %s: %w", m.AssetID, err)
			}
			if err := s.setAll(ctx, tx, m, m.Enabled); err != nil {
				return err
			}
		} else if !m.Enabled && len(in.AddMonitors) > 0 {
			if err := s.setAll(ctx, tx, m, false); err != nil {
				return err
			}
		}
		if err := s.saveMonitoring(ctx, tx, m); err != nil {
			return err
		}
		return s.auditMonitoring(ctx, tx, m, "discovery_asset.update_monitoring")
	})
	if err != nil {
		return m.DiscoveryMonitoring, fmt.Errorf("update asset monitoring: %w", err)
	}
	return m.DiscoveryMonitoring, nil
}

type discoveryMonitoringOutput struct{ Body DiscoveryMonitoring }

type discoveryEnableInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DiscoveryMonitoringRequest
}

type discoveryMonitoringUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DiscoveryMonitoringUpdate
}

func (s *Service) registerMonitoring(api *httpapi.Server, tag string) {
	conflict := []int{http.StatusNotFound, http.StatusConflict}
	httpapi.Register(api, httpapi.Route{ID: "enable-discovery-asset-monitoring", Method: http.MethodPost,
		Path: "/discovery/assets/{id}/enable-monitoring", Tag: tag, Permission: access.DiscoveryWrite, Status: http.StatusCreated,
		Summary: "Turn monitoring of an asset on",
		Description: "Makes an SNMP device of the asset, monitors of its address (icmp_ping, tcp_port, http_check), or both. On " +
			"already: 409 " + CodeMonitoringOn + ".", Errors: conflict},
		func(ctx context.Context, in *discoveryEnableInput) (*discoveryMonitoringOutput, error) {
			m, err := s.EnableMonitoring(ctx, in.ID, in.Body)
			return &discoveryMonitoringOutput{m}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "disable-discovery-asset-monitoring", Method: http.MethodPost,
		Path: "/discovery/assets/{id}/disable-monitoring", Tag: tag, Permission: access.DiscoveryWrite,
		Summary: "Turn monitoring of an asset off", Description: "Its SNMP device and monitors are turned off, not deleted. Not on: 404 " +
			CodeMonitoringNotOn + ".", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *discoveryIDPath) (*discoveryMonitoringOutput, error) {
			m, err := s.DisableMonitoring(ctx, in.ID)
			return &discoveryMonitoringOutput{m}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-discovery-asset-monitoring", Method: http.MethodGet, Path: "/discovery/assets/{id}/monitoring",
		Tag: tag, Permission: access.DiscoveryRead, Summary: "An asset's monitoring", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *discoveryIDPath) (*discoveryMonitoringOutput, error) {
			m, err := s.GetMonitoring(ctx, in.ID)
			return &discoveryMonitoringOutput{m}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-discovery-asset-monitoring", Method: http.MethodPatch,
		Path: "/discovery/assets/{id}/monitoring", Tag: tag, Permission: access.DiscoveryWrite, Summary: "Change an asset's monitoring",
		Description: "enabled switches it all; addMonitors and removeMonitorTypes change its monitors. Never enabled: 404 " +
			CodeMonitoringNotOn + ".", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *discoveryMonitoringUpdateInput) (*discoveryMonitoringOutput, error) {
			m, err := s.UpdateMonitoring(ctx, in.ID, in.Body)
			return &discoveryMonitoringOutput{m}, err
		})
}

// mayMonitor refuses callers who may not create or change what an asset's monitoring
// touches: SNMP devices need snmp:write, monitors monitors:write, beside discovery:write.
func mayMonitor(ctx context.Context, snmpDevice, monitors bool) error {
	p := access.PrincipalFrom(ctx)
	if snmpDevice && !p.Can(access.SNMPWrite) {
		return apperr.Forbidden("changing an asset's SNMP monitoring needs the permission snmp:write")
	}
	if monitors && !p.Can(access.MonitorsWrite) {
		return apperr.Forbidden("changing an asset's monitors needs the permission monitors:write")
	}
	return nil
}
