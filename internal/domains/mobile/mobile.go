// Package mobile serves the /mobile routes of the phone app: push-token registration, a
// compact device list and detail, an alert inbox, acknowledge and resolve (through the alerts
// service, so the same 409 contract holds), device actions (through the device command
// system, so the same permission and ALREADY_PENDING rules hold) and a summary. Every route
// is for signed-in users; API keys get 403.
package mobile

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/notifications"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Devices is what mobile needs of the device domain.
type Devices interface {
	GetDetail(ctx context.Context, id string) (devices.Detail, error)
	SendCommand(ctx context.Context, deviceID string, in devices.CommandInput) (devices.DeviceCommand, error)
}

// Alerts is what mobile needs of the alerts domain.
type Alerts interface {
	List(ctx context.Context, f alerts.ListFilter, page store.Page) ([]alerts.Alert, string, *int, error)
	Act(ctx context.Context, id, action string, in alerts.ActionInput) (alerts.Alert, error)
	Summarize(ctx context.Context, orgID string) (alerts.Summary, error)
}

// Notifications is what mobile needs of the notifications domain.
type Notifications interface {
	RegisterToken(ctx context.Context, in notifications.TokenInput) (notifications.PushToken, error)
	UnregisterToken(ctx context.Context, token string) (bool, error)
	UnreadFor(ctx context.Context) (int, error)
}

// Service is the mobile API.
type Service struct {
	db            *store.DB
	logger        *slog.Logger
	devices       Devices
	alerts        Alerts
	notifications Notifications
	tenancy       *tenancy.Service
}

// Deps are what the mobile API works with.
type Deps struct {
	DB            *store.DB
	Logger        *slog.Logger
	Devices       Devices
	Alerts        Alerts
	Notifications Notifications
	// Tenancy names a device's organization and site.
	Tenancy *tenancy.Service
}

// New returns the mobile service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger, devices: d.Devices, alerts: d.Alerts, notifications: d.Notifications, tenancy: d.Tenancy}
}

// openStatuses are the non-terminal alert statuses.
var openStatuses = []string{alerts.StatusActive, alerts.StatusAcknowledged, alerts.StatusSuppressed}

// Actions a phone may run on a device, each a device command of the same type.
var Actions = []string{"reboot", "shutdown", "refresh_inventory", "run_script"}

// user checks that the caller is a signed-in user holding perm ("" for none).
func user(ctx context.Context, perm access.Perm) error {
	p := access.PrincipalFrom(ctx)
	if p == nil || p.Kind != access.ActorUser {
		return apperr.Forbidden("the mobile API is for signed-in users; API keys cannot use it")
	}
	if perm != "" && !p.Can(perm) {
		return apperr.Forbidden("missing permission " + string(perm))
	}
	return nil
}

// DeviceRow is a device row for a phone.
type DeviceRow struct {
	ID             string     `json:"id" format:"uuid"`
	Hostname       string     `json:"hostname"`
	DisplayName    *string    `json:"displayName"`
	Status         string     `json:"status"`
	OSType         string     `json:"osType"`
	LastSeen       *time.Time `json:"lastSeen"`
	OrgID          string     `json:"orgId" format:"uuid"`
	OrgName        string     `json:"orgName"`
	OpenAlertCount int        `json:"openAlertCount" doc:"Active, acknowledged and suppressed alerts of the device."`
}

// DeviceFilter narrows the mobile device list.
type DeviceFilter struct {
	Search string
	Status string
	OrgID  string
}

var deviceStatuses = []string{"pending", "online", "offline", "maintenance", "quarantined", "updating"}

// ListDevices lists the devices in scope (not decommissioned) by hostname.
func (s *Service) ListDevices(ctx context.Context, f DeviceFilter, page store.Page) ([]DeviceRow, string, *int, error) {
	if err := user(ctx, access.DevicesRead); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id")}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "d.hostname", "d.display_name"))
	}
	if f.Status != "" {
		if !slices.Contains(deviceStatuses, f.Status) {
			return nil, "", nil, apperr.Invalid("status", "unknown device status")
		}
		conds = append(conds, "d.status = "+a.Add(f.Status))
	}
	if f.OrgID != "" {
		if !store.ValidID(f.OrgID) {
			return nil, "", nil, apperr.Invalid("orgId", "not a valid ID")
		}
		conds = append(conds, "d.org_id = "+a.Add(f.OrgID))
	}
	cols := `d.id, d.hostname, d.display_name, d.status, d.os_type, d.last_seen_at, d.org_id, o.name, ` + alerts.OpenCount(&a, "d.id")
	return store.List(ctx, s.db, devices.ListLive(cols, tenancy.JoinOrg("o", "d.org_id"), conds, &a), page, scanDevice,
		func(d DeviceRow) (string, string) { return d.Hostname, d.ID })
}

func scanDevice(row store.Scanner) (DeviceRow, error) {
	var d DeviceRow
	var display sql.NullString
	var seen sql.NullTime
	err := row.Scan(&d.ID, &d.Hostname, &display, &d.Status, &d.OSType, &seen, &d.OrgID, &d.OrgName, &d.OpenAlertCount)
	d.DisplayName = store.StringPtr(display)
	if seen.Valid {
		t := seen.Time.UTC()
		d.LastSeen = &t
	}
	return d, err
}

// DeviceDetail is a device for a phone: the device, its recent metrics and open alerts.
type DeviceDetail struct {
	Device        devices.Device        `json:"device"`
	OrgName       string                `json:"orgName"`
	SiteName      string                `json:"siteName"`
	RecentMetrics []devices.MetricPoint `json:"recentMetrics" doc:"The last hour, oldest first."`
	OpenAlerts    []alerts.Alert        `json:"openAlerts" doc:"Non-terminal alerts of the device, newest first (up to 50); empty without alerts:read."`
}

// GetDevice returns a device in scope with its metrics and open alerts.
func (s *Service) GetDevice(ctx context.Context, id string) (DeviceDetail, error) {
	if err := user(ctx, access.DevicesRead); err != nil {
		return DeviceDetail{}, err
	}
	d, err := s.devices.GetDetail(ctx, id)
	if err != nil {
		return DeviceDetail{}, err
	}
	out := DeviceDetail{Device: d.Device, RecentMetrics: d.RecentMetrics, OpenAlerts: []alerts.Alert{}}
	if out.RecentMetrics == nil {
		out.RecentMetrics = []devices.MetricPoint{}
	}
	if out.OrgName, out.SiteName, err = s.tenancy.Names(ctx, d.OrgID, d.SiteID); err != nil {
		return out, fmt.Errorf("read the names of device %s's organization and site: %w", id, err)
	}
	if access.PrincipalFrom(ctx).Can(access.AlertsRead) {
		rows, _, _, err := s.alerts.List(ctx, alerts.ListFilter{Statuses: openStatuses, DeviceID: id}, store.Page{Limit: 50})
		if err != nil {
			return out, err
		}
		out.OpenAlerts = append(out.OpenAlerts, rows...)
	}
	return out, nil
}

// DeviceSettings says what the caller may do with a device and where it sits.
type DeviceSettings struct {
	DeviceID       string   `json:"deviceId" format:"uuid"`
	Hostname       string   `json:"hostname"`
	Status         string   `json:"status"`
	OrgID          string   `json:"orgId" format:"uuid"`
	OrgName        string   `json:"orgName"`
	SiteID         string   `json:"siteId" format:"uuid"`
	SiteName       string   `json:"siteName"`
	AgentVersion   string   `json:"agentVersion"`
	WatchdogStatus *string  `json:"watchdogStatus" enum:"connected,failover,offline"`
	Actions        []string `json:"actions" doc:"Actions the caller may run (POST /mobile/devices/{id}/actions): reboot, shutdown, refresh_inventory, run_script; empty without devices:execute or on a decommissioned device."`
	Permissions    struct {
		Execute          bool `json:"execute" doc:"devices:execute"`
		ReadAlerts       bool `json:"readAlerts" doc:"alerts:read"`
		AcknowledgeAlert bool `json:"acknowledgeAlerts" doc:"alerts:acknowledge"`
		ResolveAlerts    bool `json:"resolveAlerts" doc:"alerts:write"`
	} `json:"permissions"`
}

// Settings returns the settings view of a device in scope.
func (s *Service) Settings(ctx context.Context, id string) (DeviceSettings, error) {
	if err := user(ctx, access.DevicesRead); err != nil {
		return DeviceSettings{}, err
	}
	d, err := s.devices.GetDetail(ctx, id)
	if err != nil {
		return DeviceSettings{}, err
	}
	out := DeviceSettings{DeviceID: d.ID, Hostname: d.Hostname, Status: d.Status, OrgID: d.OrgID, SiteID: d.SiteID,
		AgentVersion: d.AgentVersion, WatchdogStatus: d.WatchdogStatus, Actions: []string{}}
	if out.OrgName, out.SiteName, err = s.tenancy.Names(ctx, d.OrgID, d.SiteID); err != nil {
		return out, fmt.Errorf("read the names of device %s's organization and site: %w", id, err)
	}
	p := access.PrincipalFrom(ctx)
	out.Permissions.Execute = p.Can(access.DevicesExecute)
	out.Permissions.ReadAlerts = p.Can(access.AlertsRead)
	out.Permissions.AcknowledgeAlert = p.Can(access.AlertsAcknowledge)
	out.Permissions.ResolveAlerts = p.Can(access.AlertsWrite)
	if out.Permissions.Execute && d.DecommissionedAt == nil {
		out.Actions = slices.Clone(Actions)
	}
	return out, nil
}

// Inbox lists the non-terminal alerts in scope, newest first.
func (s *Service) Inbox(ctx context.Context, page store.Page) ([]alerts.Alert, string, *int, error) {
	if err := user(ctx, access.AlertsRead); err != nil {
		return nil, "", nil, err
	}
	return s.alerts.List(ctx, alerts.ListFilter{Statuses: openStatuses}, page)
}

// Acknowledge acknowledges an alert through the alerts service (409 unless active).
func (s *Service) Acknowledge(ctx context.Context, id string) (alerts.Alert, error) {
	if err := user(ctx, alerts.ActionPermission(alerts.ActionAcknowledge)); err != nil {
		return alerts.Alert{}, err
	}
	return s.alerts.Act(ctx, id, alerts.ActionAcknowledge, alerts.ActionInput{})
}

// Resolve resolves an alert through the alerts service (409 when terminal).
func (s *Service) Resolve(ctx context.Context, id string, note *string) (alerts.Alert, error) {
	if err := user(ctx, alerts.ActionPermission(alerts.ActionResolve)); err != nil {
		return alerts.Alert{}, err
	}
	return s.alerts.Act(ctx, id, alerts.ActionResolve, alerts.ActionInput{Note: note})
}

// DeviceAction is a device action from a phone.
type DeviceAction struct {
	Action  string          `json:"action" enum:"reboot,shutdown,refresh_inventory,run_script"`
	Payload json.RawMessage `json:"payload,omitempty" doc:"As the command payload of POST /devices/{id}/commands: run_script {language, script, args?, env?}; reboot and shutdown {delaySeconds?}."`
}

// Act queues the device command of the action (devices:execute; a second refresh_inventory
// while one is pending is 409 ALREADY_PENDING).
func (s *Service) Act(ctx context.Context, deviceID string, in DeviceAction) (devices.DeviceCommand, error) {
	if err := user(ctx, access.DevicesExecute); err != nil {
		return devices.DeviceCommand{}, err
	}
	if !slices.Contains(Actions, in.Action) {
		return devices.DeviceCommand{}, apperr.Invalid("action", "use reboot, shutdown, refresh_inventory or run_script")
	}
	return s.devices.SendCommand(ctx, deviceID, devices.CommandInput{Type: in.Action, Payload: in.Payload})
}

// HomeSummary is the phone's home screen.
type HomeSummary struct {
	Devices struct {
		Total   int `json:"total" doc:"Devices in scope, decommissioned ones excluded."`
		Online  int `json:"online"`
		Offline int `json:"offline"`
	} `json:"devices"`
	Alerts struct {
		Total      int            `json:"total" doc:"Open (non-terminal) alerts."`
		BySeverity map[string]int `json:"bySeverity"`
	} `json:"alerts" doc:"Zero without alerts:read."`
	UnreadNotifications int `json:"unreadNotifications"`
}

// GetSummary counts the caller's devices, open alerts and unread notifications.
func (s *Service) GetSummary(ctx context.Context) (HomeSummary, error) {
	var out HomeSummary
	if err := user(ctx, access.DevicesRead); err != nil {
		return out, err
	}
	var a store.Args
	err := s.db.QueryRowContext(ctx, devices.SelectLive(`COUNT(*), COALESCE(SUM(CASE WHEN d.status = 'online' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN d.status = 'offline' THEN 1 ELSE 0 END), 0)`, "", access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id")),
		a.Values()...).
		Scan(&out.Devices.Total, &out.Devices.Online, &out.Devices.Offline)
	if err != nil {
		return out, fmt.Errorf("count devices: %w", err)
	}
	out.Alerts.BySeverity = map[string]int{"critical": 0, "high": 0, "medium": 0, "low": 0, "info": 0}
	if access.PrincipalFrom(ctx).Can(access.AlertsRead) {
		sum, err := s.alerts.Summarize(ctx, "")
		if err != nil {
			return out, err
		}
		out.Alerts.Total, out.Alerts.BySeverity = sum.Total, sum.BySeverity
	}
	out.UnreadNotifications, err = s.notifications.UnreadFor(ctx)
	return out, err
}
