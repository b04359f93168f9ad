package snmp

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Caller asks a device's agent over its live channel and waits for the answer (the agent
// hub).
type Caller interface {
	// LiveChannel reports whether the agent holds its live channel on any node: calls travel
	// only over it.
	LiveChannel(ctx context.Context, deviceID string) (bool, error)
	Call(ctx context.Context, deviceID, method string, args any, timeout time.Duration) (json.RawMessage, error)
}

// Service keeps SNMP devices, templates, metrics and thresholds, and polls.
type Service struct {
	db        *store.DB
	logger    *slog.Logger
	box       *secrets.Box
	clock     clock.Clock
	devices   *devices.Service
	alerts    *alerts.Service
	agents    Caller
	retention time.Duration
}

// Deps are what the SNMP service works with.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Box seals the devices' credentials.
	Box *secrets.Box
	// Clock is the time polls are scheduled on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	Alerts  *alerts.Service
	Agents  Caller
}

// Options are the SNMP settings of the server configuration.
type Options struct {
	// Retention is how long metric samples are kept.
	Retention time.Duration
}

// New returns the SNMP service.
func New(d Deps, opts Options) *Service {
	return &Service{db: d.DB, logger: d.Logger, box: d.Box, clock: clock.Or(d.Clock), devices: d.Devices, alerts: d.Alerts,
		agents: d.Agents, retention: opts.Retention}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const deviceColumns = `d.id, d.partner_id, d.org_id, d.site_id, d.probe_device_id, d.name, d.ip_address, d.port, d.version,
	d.username, d.auth_protocol, d.priv_protocol, d.template_id, d.interval_seconds, d.enabled, d.status, d.consecutive_failures,
	d.last_poll_at, d.last_success_at, d.last_error, d.next_poll_at, d.created_by, d.created_at, d.updated_at, d.credentials`

// device is a stored device with its sealed credentials.
type device struct {
	SNMPDevice
	sealed string
}

func scanDevice(row store.Scanner) (device, error) {
	var d device
	var probe, user, auth, priv, lastErr, by sql.NullString
	var lastPoll, lastOK sql.NullTime
	if err := row.Scan(&d.ID, &d.PartnerID, &d.OrgID, &d.SiteID, &probe, &d.Name, &d.IPAddress, &d.Port, &d.Version, &user, &auth, &priv,
		&d.TemplateID, &d.IntervalSeconds, &d.Enabled, &d.Status, &d.ConsecutiveFailures, &lastPoll, &lastOK, &lastErr, &d.NextPollAt,
		&by, &d.CreatedAt, &d.UpdatedAt, &d.sealed); err != nil {
		return d, err
	}
	d.ProbeDeviceID, d.Username, d.AuthProtocol, d.PrivProtocol = store.StringPtr(probe), store.StringPtr(user), store.StringPtr(auth), store.StringPtr(priv)
	d.LastPollAt, d.LastSuccessAt, d.LastError, d.CreatedBy = store.TimePtr(lastPoll), store.TimePtr(lastOK), store.StringPtr(lastErr), store.StringPtr(by)
	d.NextPollAt, d.CreatedAt, d.UpdatedAt = d.NextPollAt.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	d.HasCredentials = d.sealed != ""
	return d, nil
}

// deviceFilter keeps the devices (alias d) in scope, of live organizations.
func deviceFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "d.org_id", "d.partner_id"), tenancy.LiveOrg("d.org_id")}
}

func (s *Service) getDevice(ctx context.Context, q store.Querier, scope access.Scope, id string) (device, error) {
	var a store.Args
	return store.ByID(ctx, q, "SNMP device", `SELECT `+deviceColumns+` FROM snmp_devices d`, "d.id", id, &a, deviceFilter(scope, &a), scanDevice)
}

// GetDevice returns a device in scope.
func (s *Service) GetDevice(ctx context.Context, id string) (SNMPDevice, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), id)
	return d.SNMPDevice, err
}

// DeviceFilter narrows a list of devices.
type DeviceFilter struct {
	OrgID, SiteID, Status, Search string
}

// ListDevices lists the devices in scope, newest first.
func (s *Service) ListDevices(ctx context.Context, f DeviceFilter, page store.Page) ([]SNMPDevice, string, *int, error) {
	var a store.Args
	conds := deviceFilter(access.ScopeFrom(ctx), &a)
	if f.OrgID != "" {
		conds = append(conds, "d.org_id = "+a.Add(f.OrgID))
	}
	if f.SiteID != "" {
		conds = append(conds, "d.site_id = "+a.Add(f.SiteID))
	}
	if f.Status != "" {
		conds = append(conds, "d.status = "+a.Add(f.Status))
	}
	if q := strings.ToLower(strings.TrimSpace(f.Search)); q != "" {
		conds = append(conds, store.Contains(&a, q, "d.name", "d.ip_address"))
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: deviceColumns, From: " FROM snmp_devices d", Conds: conds,
		Args: &a, SortKey: "d.id", SortID: "d.id", Desc: true}, page, scanDevice, func(d device) (string, string) { return d.ID, d.ID })
	out := make([]SNMPDevice, len(rows))
	for i, d := range rows {
		out[i] = d.SNMPDevice
	}
	if err != nil {
		return out, next, total, fmt.Errorf("list SNMP devices: %w", err)
	}
	return out, next, total, nil
}

// CreateDevice adds a device (POST /snmp/devices).
func (s *Service) CreateDevice(ctx context.Context, in SNMPDeviceInput) (SNMPDevice, error) {
	var d SNMPDevice
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		d, err = s.CreateIn(ctx, tx, in)
		return err
	})
	if err != nil {
		return d, fmt.Errorf("create SNMP device: %w", err)
	}
	return d, nil
}

// CreateIn adds a device inside the caller's transaction, in the scope of ctx, with the
// validation of POST /snmp/devices.
func (s *Service) CreateIn(ctx context.Context, tx *sql.Tx, in DeviceInput) (SNMPDevice, error) {
	var c checker
	name := strings.TrimSpace(in.Name)
	if name == "" || len(name) > 200 {
		c.fail("name", "1 to 200 characters")
	}
	ip := checkAddress(&c, "ipAddress", in.IPAddress)
	// Zero is an omitted port or interval: the API's schema refuses an explicit 0.
	port := in.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 1 || port > 65535 {
		c.fail("port", "1 to 65535")
	}
	interval := in.IntervalSeconds
	if interval == 0 {
		interval = DefaultInterval
	}
	if interval < MinInterval || interval > MaxInterval {
		c.fail("intervalSeconds", "%d to %d", MinInterval, MaxInterval)
	}
	checkCredentials(&c, in.Version, &in.Credentials)
	if !store.ValidID(in.SiteID) {
		c.fail("siteId", "a site of the organization is required")
	}
	if err := c.err(); err != nil {
		return SNMPDevice{}, err
	}
	scope := access.ScopeFrom(ctx)
	at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "SNMP device"})
	if err != nil {
		return SNMPDevice{}, fmt.Errorf("place SNMP device: %w", err)
	}
	if err := s.checkPlace(ctx, tx, at.OrgID, in.SiteID, in.ProbeDeviceID); err != nil {
		return SNMPDevice{}, err
	}
	if err := s.useTemplate(ctx, tx, at.OrgID, in.TemplateID, 1); err != nil {
		return SNMPDevice{}, err
	}
	sealed, err := s.seal(in.Credentials)
	if err != nil {
		return SNMPDevice{}, err
	}
	id, now := store.NewID(), s.now()
	user, auth, priv := v3Shown(in.Version, in.Credentials)
	if _, err := tx.ExecContext(ctx, `INSERT INTO snmp_devices (id, partner_id, org_id, site_id, probe_device_id, name, ip_address, port,
		version, credentials, username, auth_protocol, priv_protocol, template_id, interval_seconds, enabled, status, next_poll_at,
		created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
		$20, $20)`, id, at.PartnerID, at.OrgID, in.SiteID, store.NullIfEmpty(in.ProbeDeviceID), name, ip, port, in.Version, sealed,
		user, auth, priv, in.TemplateID, interval, in.Enabled == nil || *in.Enabled, StatusUnknown, now, access.ActorName(ctx), now); err != nil {
		if store.IsUniqueViolation(err) {
			return SNMPDevice{}, apperr.ConflictCode(CodeDeviceExists, fmt.Sprintf("the organization has an SNMP device at %s port %d already", ip, port))
		}
		return SNMPDevice{}, fmt.Errorf("insert SNMP device: %w", err)
	}
	d, err := s.getDevice(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return SNMPDevice{}, err
	}
	return d.SNMPDevice, audit.Record(ctx, tx, audit.Entry{Action: "snmp_device.create", ResourceType: "snmp_device", ResourceID: id,
		ResourceName: d.Name, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: auditView(d.SNMPDevice)})
}

func auditView(d SNMPDevice) map[string]any {
	return map[string]any{"ipAddress": d.IPAddress, "port": d.Port, "version": d.Version, "siteId": d.SiteID, "templateId": d.TemplateID,
		"intervalSeconds": d.IntervalSeconds, "enabled": d.Enabled, "probeDeviceId": d.ProbeDeviceID}
}

// v3Shown is what of v3 credentials the API shows: the user and the protocols.
func v3Shown(version string, c SNMPCredentials) (user, auth, priv any) {
	if version != agentproto.SNMPv3 {
		return nil, nil, nil
	}
	return c.Username, store.NullIfEmpty(c.AuthProtocol), store.NullIfEmpty(c.PrivProtocol)
}

func (s *Service) seal(c SNMPCredentials) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("seal SNMP credentials: %w", err)
	}
	return s.box.Seal(string(b)), nil
}

// target is how the agent asks a device: its address and decrypted credentials.
func (s *Service) target(d device) (agentproto.SNMPTarget, error) {
	raw, err := s.box.Open(d.sealed)
	if err != nil {
		return agentproto.SNMPTarget{}, fmt.Errorf("open the credentials of SNMP device %s: %w", d.ID, err)
	}
	var c SNMPCredentials
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return agentproto.SNMPTarget{}, fmt.Errorf("read the credentials of SNMP device %s: %w", d.ID, err)
	}
	return toTarget(d.IPAddress, d.Port, d.Version, c), nil
}

func toTarget(ip string, port int, version string, c SNMPCredentials) agentproto.SNMPTarget {
	t := agentproto.SNMPTarget{Host: ip, Port: port, Version: version}
	if version == agentproto.SNMPv3 {
		t.V3 = &agentproto.SNMPv3Auth{Username: c.Username, AuthProtocol: c.AuthProtocol, AuthPassword: c.AuthPassword,
			PrivProtocol: c.PrivProtocol, PrivPassword: c.PrivPassword}
	} else {
		t.Community = c.Community
	}
	return t
}

// checkPlace makes sure the site, and the probe device when named, are of the organization
// (the probe of the site).
func (s *Service) checkPlace(ctx context.Context, q store.Querier, orgID, siteID, probeID string) error {
	sites, err := tenancy.SiteOwners(ctx, q, []string{siteID})
	if err != nil {
		return fmt.Errorf("check site: %w", err)
	}
	if o, ok := sites[siteID]; !ok || o.OrgID != orgID {
		return apperr.Invalid("siteId", "no such site in the organization")
	}
	if probeID == "" {
		return nil
	}
	if !store.ValidID(probeID) {
		return apperr.Invalid("probeDeviceId", "no such device in the site")
	}
	owners, err := devices.Owners(ctx, q, []string{probeID})
	if err != nil {
		return fmt.Errorf("check probe device: %w", err)
	}
	site, err := devices.Sites(ctx, q, []string{probeID})
	if err != nil {
		return fmt.Errorf("check probe device: %w", err)
	}
	if o, ok := owners[probeID]; !ok || o.OrgID != orgID || site[probeID] != siteID {
		return apperr.Invalid("probeDeviceId", "no such device in the site")
	}
	return nil
}

// UpdateDevice changes a device (PATCH).
func (s *Service) UpdateDevice(ctx context.Context, id string, in SNMPDeviceUpdate) (SNMPDevice, error) {
	var out SNMPDevice
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		d, err := s.getDevice(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		var c checker
		ch := store.NewChanges(s.now())
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			if name == "" || len(name) > 200 {
				c.fail("name", "1 to 200 characters")
			}
			ch.Set("name", name)
		}
		if in.IPAddress != nil {
			ch.Set("ip_address", checkAddress(&c, "ipAddress", *in.IPAddress))
		}
		if in.Port != nil {
			if *in.Port < 1 || *in.Port > 65535 {
				c.fail("port", "1 to 65535")
			}
			ch.Set("port", *in.Port)
		}
		if in.IntervalSeconds != nil {
			if *in.IntervalSeconds < MinInterval || *in.IntervalSeconds > MaxInterval {
				c.fail("intervalSeconds", "%d to %d", MinInterval, MaxInterval)
			}
			ch.Set("interval_seconds", *in.IntervalSeconds)
		}
		if in.Version != nil && *in.Version != d.Version && in.Credentials == nil {
			c.fail("credentials", "changing the version needs credentials for it")
		}
		if in.Credentials != nil {
			version := d.Version
			if in.Version != nil {
				version = *in.Version
			}
			checkCredentials(&c, version, in.Credentials)
			sealed, err := s.seal(*in.Credentials)
			if err != nil {
				return err
			}
			user, auth, priv := v3Shown(version, *in.Credentials)
			ch.Set("version", version)
			ch.Set("credentials", sealed)
			ch.Set("username", user)
			ch.Set("auth_protocol", auth)
			ch.Set("priv_protocol", priv)
		}
		if err := c.err(); err != nil {
			return err
		}
		site, probe := d.SiteID, store.Deref(d.ProbeDeviceID)
		if in.SiteID != nil {
			site = *in.SiteID
			ch.Set("site_id", site)
		}
		if in.ProbeDeviceID != nil {
			probe = *in.ProbeDeviceID
			ch.Set("probe_device_id", store.NullIfEmpty(probe))
		}
		if in.SiteID != nil || in.ProbeDeviceID != nil {
			if in.SiteID != nil && in.ProbeDeviceID == nil && probe != "" {
				probe = ""
				ch.Set("probe_device_id", nil)
			}
			if err := s.checkPlace(ctx, tx, d.OrgID, site, probe); err != nil {
				return err
			}
		}
		if in.TemplateID != nil && *in.TemplateID != d.TemplateID {
			if err := s.useTemplate(ctx, tx, d.OrgID, *in.TemplateID, 1); err != nil {
				return err
			}
			if err := s.useTemplate(ctx, tx, d.OrgID, d.TemplateID, -1); err != nil {
				return err
			}
			ch.Set("template_id", *in.TemplateID)
		}
		if in.Enabled != nil && *in.Enabled != d.Enabled {
			if err := s.setEnabled(ctx, tx, d, *in.Enabled, ch); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE snmp_devices SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(d.ID), ch.Args.Values()...); err != nil {
			if store.IsUniqueViolation(err) {
				return apperr.ConflictCode(CodeDeviceExists, "the organization has an SNMP device at this address and port already")
			}
			return fmt.Errorf("update SNMP device %s: %w", d.ID, err)
		}
		after, err := s.getDevice(ctx, tx, access.SystemScope(), d.ID)
		if err != nil {
			return err
		}
		out = after.SNMPDevice
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_device.update", ResourceType: "snmp_device", ResourceID: d.ID,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: map[string]any{"before": auditView(d.SNMPDevice),
				"after": auditView(out), "credentialsChanged": in.Credentials != nil}})
	})
	if err != nil {
		return out, fmt.Errorf("update SNMP device: %w", err)
	}
	return out, nil
}

// setEnabled adds to ch what enabling or disabling d changes: a device enabled is due now;
// one disabled has its alerts resolved.
func (s *Service) setEnabled(ctx context.Context, tx *sql.Tx, d device, enabled bool, ch *store.Changes) error {
	ch.Set("enabled", enabled)
	if enabled {
		ch.Set("next_poll_at", s.now())
		ch.Set("status", StatusUnknown)
		ch.Set("consecutive_failures", 0)
		return nil
	}
	return s.alerts.ResolveFrom(ctx, tx, source(d.SNMPDevice), "", "the SNMP device was disabled")
}

// SetEnabledIn enables or disables a device inside the caller's transaction, in the scope of
// ctx.
func (s *Service) SetEnabledIn(ctx context.Context, tx *sql.Tx, id string, enabled bool) error {
	d, err := s.getDevice(ctx, tx, access.ScopeFrom(ctx), id)
	if err != nil || d.Enabled == enabled {
		return err
	}
	ch := store.NewChanges(s.now())
	if err := s.setEnabled(ctx, tx, d, enabled, ch); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE snmp_devices SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(d.ID), ch.Args.Values()...); err != nil {
		return fmt.Errorf("enable SNMP device: %w", err)
	}
	action := "snmp_device.disable"
	if enabled {
		action = "snmp_device.enable"
	}
	return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "snmp_device", ResourceID: d.ID, ResourceName: d.Name,
		PartnerID: d.PartnerID, OrgID: d.OrgID})
}

// DeleteDevice removes a device with its metrics and thresholds, resolving its alerts.
func (s *Service) DeleteDevice(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		d, err := s.getDevice(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if err := s.alerts.ResolveFrom(ctx, tx, source(d.SNMPDevice), "", "the SNMP device was deleted"); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM snmp_metrics WHERE device_id = $1`, `DELETE FROM snmp_rollups WHERE device_id = $1`, `DELETE FROM snmp_polls WHERE device_id = $1`,
			`DELETE FROM snmp_latest WHERE device_id = $1`, `DELETE FROM snmp_thresholds WHERE device_id = $1`,
			`DELETE FROM snmp_devices WHERE id = $1`} {
			if _, err := tx.ExecContext(ctx, q, d.ID); err != nil {
				return fmt.Errorf("delete SNMP device %s: %w", d.ID, err)
			}
		}
		if err := s.useTemplate(ctx, tx, d.OrgID, d.TemplateID, -1); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_device.delete", ResourceType: "snmp_device", ResourceID: d.ID,
			ResourceName: d.Name, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: auditView(d.SNMPDevice)})
	})
}

// source is the alerts' name for a device.
func source(d SNMPDevice) alerts.Source {
	return alerts.Source{Type: alerts.SourceSNMPDevice, ID: d.ID, PartnerID: d.PartnerID, OrgID: d.OrgID, SiteID: d.SiteID}
}

// observed is the source of an alert that a poll by probe's agent saw: a maintenance window
// over the device that polled holds it back, as one over the SNMP device's site does.
func observed(d SNMPDevice, probe string) alerts.Source {
	src := source(d)
	src.ProbeID = probe
	return src
}
