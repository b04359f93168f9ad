package discovery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

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

// Tenancy is what discovery needs of the tenancy service, in the caller's scope: an
// organization whose topology is asked for, and a site for its organization and time zone.
type Tenancy interface {
	GetOrganization(ctx context.Context, id string) (tenancy.Organization, error)
	GetSite(ctx context.Context, id string) (tenancy.Site, error)
}

// Service keeps discovery profiles, jobs and assets.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	box     *secrets.Box
	devices *devices.Service
	tenancy Tenancy
	// monitors and snmp turn monitoring of assets on and off.
	monitors Monitors
	snmp     SNMPDevices
}

// Deps are what discovery works with.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time scans are scheduled on; nil: the system clock.
	Clock clock.Clock
	// Box seals the profiles' SNMP credentials.
	Box      *secrets.Box
	Devices  *devices.Service
	Tenancy  Tenancy
	Monitors Monitors
	SNMP     SNMPDevices
}

// New returns the discovery service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), box: d.Box, devices: d.Devices, tenancy: d.Tenancy,
		monitors: d.Monitors, snmp: d.SNMP}
}

// commandKind is the network_scan command kind, whose results discovery's jobs record.
func (s *Service) commandKind() devices.CommandKind {
	return devices.CommandKind{Name: agentproto.CommandNetworkScan, DefaultTimeout: scanTimeout, MaxTimeout: scanTimeout,
		Validate: validateScan, OnResult: s.onScanResult, CancelSent: devices.CancelStops,
		PayloadDoc: "{subnets, excludes, methods, ports, snmp?, timeoutMs, concurrency}: scan networks; started by discovery scans " +
			"(POST /discovery/scan), whose jobs record the result."}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const profileColumns = `p.id, p.partner_id, p.org_id, p.site_id, p.name, p.subnets, p.excludes, p.methods, p.ports, p.snmp, p.deep_scan,
	p.schedule, p.timeout_ms, p.concurrency, p.agent_device_id, p.next_run_at, p.last_run_at, p.created_by, p.created_at, p.updated_at`

// profileRow is a stored profile with its sealed credentials.
type profileRow struct {
	DiscoveryProfile
	sealed string
}

func scanProfile(row store.Scanner) (profileRow, error) {
	var p profileRow
	var subnets, excludes, methods, ports, schedule string
	var sealed, agent, by sql.NullString
	var next, last sql.NullTime
	if err := row.Scan(&p.ID, &p.PartnerID, &p.OrgID, &p.SiteID, &p.Name, &subnets, &excludes, &methods, &ports, &sealed, &p.DeepScan,
		&schedule, &p.TimeoutMs, &p.Concurrency, &agent, &next, &last, &by, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return p, err
	}
	p.sealed, p.AgentDeviceID, p.CreatedBy = sealed.String, store.StringPtr(agent), store.StringPtr(by)
	p.NextRunAt, p.LastRunAt = store.TimePtr(next), store.TimePtr(last)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	err := errors.Join(json.Unmarshal([]byte(subnets), &p.Subnets), json.Unmarshal([]byte(excludes), &p.ExcludeIPs),
		json.Unmarshal([]byte(methods), &p.Methods), json.Unmarshal([]byte(ports), &p.Ports), json.Unmarshal([]byte(schedule), &p.Schedule))
	if err != nil {
		return p, fmt.Errorf("read discovery profile %s: %w", p.ID, err)
	}
	p.Addresses = addressCount(p.Subnets)
	return p, nil
}

// credentials opens a profile's sealed SNMP credentials; nil without any.
func (s *Service) credentials(p profileRow) (*DiscoverySNMPCredentials, error) {
	if p.sealed == "" {
		return nil, nil
	}
	plain, err := s.box.Open(p.sealed)
	if err != nil {
		return nil, fmt.Errorf("open the SNMP credentials of profile %s: %w", p.ID, err)
	}
	var c DiscoverySNMPCredentials
	if err := json.Unmarshal([]byte(plain), &c); err != nil {
		return nil, fmt.Errorf("read the SNMP credentials of profile %s: %w", p.ID, err)
	}
	return &c, nil
}

func summary(c *DiscoverySNMPCredentials) *DiscoverySNMPSummary {
	if c == nil {
		return nil
	}
	return &DiscoverySNMPSummary{Version: c.Version, Port: c.Port, Username: c.Username}
}

// view is the API view of a stored profile.
func (s *Service) view(p profileRow) (DiscoveryProfile, error) {
	c, err := s.credentials(p)
	if err != nil {
		return DiscoveryProfile{}, err
	}
	v := p.DiscoveryProfile
	v.SNMP = summary(c)
	return v, nil
}

// profileFilter keeps the profiles (alias p) in scope, of live organizations.
func profileFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "p.org_id", "p.partner_id"), tenancy.LiveOrg("p.org_id")}
}

func (s *Service) getProfile(ctx context.Context, q store.Querier, scope access.Scope, id string) (profileRow, error) {
	var a store.Args
	return store.ByID(ctx, q, "discovery profile", `SELECT `+profileColumns+` FROM discovery_profiles p`, "p.id", id, &a, profileFilter(scope, &a), scanProfile)
}

// GetProfile returns a profile in scope.
func (s *Service) GetProfile(ctx context.Context, id string) (DiscoveryProfile, error) {
	p, err := s.getProfile(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return DiscoveryProfile{}, err
	}
	return s.view(p)
}

// ProfileFilter narrows a list of profiles.
type ProfileFilter struct {
	OrgID  string
	SiteID string
}

// ListProfiles lists the profiles in scope by name.
func (s *Service) ListProfiles(ctx context.Context, f ProfileFilter, page store.Page) ([]DiscoveryProfile, string, *int, error) {
	var a store.Args
	conds := profileFilter(access.ScopeFrom(ctx), &a)
	conds = equal(conds, &a, "p.org_id", f.OrgID, "p.site_id", f.SiteID)
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: profileColumns, From: " FROM discovery_profiles p", Conds: conds,
		Args: &a, SortKey: "p.name", SortID: "p.id"}, page, scanProfile, func(p profileRow) (string, string) { return p.Name, p.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list discovery profiles: %w", err)
	}
	out := make([]DiscoveryProfile, len(rows))
	for i, p := range rows {
		if out[i], err = s.view(p); err != nil {
			return nil, "", nil, err
		}
	}
	return out, next, total, nil
}

// siteOf returns the site of a profile to be, in the caller's scope; a site out of reach is
// a validation failure of siteId.
func (s *Service) siteOf(ctx context.Context, siteID string) (tenancy.Site, error) {
	if !store.ValidID(siteID) {
		return tenancy.Site{}, apperr.Invalid("siteId", "no such site")
	}
	st, err := s.tenancy.GetSite(ctx, siteID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return st, apperr.Invalid("siteId", "no such site")
	}
	if err != nil {
		return st, fmt.Errorf("load site %s: %w", siteID, err)
	}
	return st, nil
}

// checkAgent makes sure a named agent is a device of the site.
func checkAgent(ctx context.Context, q store.Querier, siteID, deviceID string) error {
	if deviceID == "" {
		return nil
	}
	if store.ValidID(deviceID) {
		sites, err := devices.Sites(ctx, q, []string{deviceID})
		if err != nil {
			return fmt.Errorf("read the site of device %s: %w", deviceID, err)
		}
		if sites[deviceID] == siteID {
			return nil
		}
	}
	return apperr.Invalid("agentDeviceId", "no such device in the profile's site")
}

func (s *Service) seal(c *DiscoverySNMPCredentials) any {
	if c == nil {
		return nil
	}
	return s.box.Seal(store.EncodeJSON(c))
}

func isUniqueName(err error) error {
	if store.IsUniqueViolation(err) {
		return apperr.ConflictCode("NAME_TAKEN", "the site has a discovery profile of that name")
	}
	return err
}

// CreateProfile adds a profile to a site in scope.
func (s *Service) CreateProfile(ctx context.Context, in DiscoveryProfileInput) (DiscoveryProfile, error) {
	if err := checkName(in.Name); err != nil {
		return DiscoveryProfile{}, err
	}
	d := definition{Subnets: in.Subnets, Excludes: in.ExcludeIPs, Methods: in.Methods, Ports: in.Ports, SNMP: in.SNMP, DeepScan: in.DeepScan,
		Schedule: DiscoverySchedule{Type: ScheduleManual}, TimeoutMs: DefaultTimeoutMs, Concurrency: DefaultConcurrency}
	if in.Schedule != nil {
		d.Schedule = *in.Schedule
	}
	if in.TimeoutMs != nil {
		d.TimeoutMs = *in.TimeoutMs
	}
	if in.Concurrency != nil {
		d.Concurrency = *in.Concurrency
	}
	var c checker
	d.check(&c)
	if err := c.err(); err != nil {
		return DiscoveryProfile{}, err
	}
	st, err := s.siteOf(ctx, in.SiteID)
	if err != nil {
		return DiscoveryProfile{}, err
	}
	now := s.now()
	next, err := d.Schedule.nextRun(now, st.Timezone)
	if err != nil {
		return DiscoveryProfile{}, err
	}
	scope := access.ScopeFrom(ctx)
	var out DiscoveryProfile
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, st.OrgID, tenancy.PlaceOptions{Noun: "discovery profile"})
		if err != nil {
			return fmt.Errorf("place discovery profile: %w", err)
		}
		if err := checkAgent(ctx, tx, st.ID, in.AgentDeviceID); err != nil {
			return err
		}
		id := store.NewID()
		if _, err := tx.ExecContext(ctx, `INSERT INTO discovery_profiles (id, partner_id, org_id, site_id, name, subnets, excludes, methods,
			ports, snmp, deep_scan, schedule, timeout_ms, concurrency, agent_device_id, next_run_at, created_by, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18)`, id, at.PartnerID, at.OrgID, st.ID,
			in.Name, store.EncodeJSON(d.Subnets), store.EncodeJSON(d.Excludes), store.EncodeJSON(d.Methods), store.EncodeJSON(d.Ports), s.seal(d.SNMP), d.DeepScan,
			store.EncodeJSON(d.Schedule), d.TimeoutMs, d.Concurrency, store.NullIfEmpty(in.AgentDeviceID), next, access.ActorName(ctx), now); err != nil {
			return isUniqueName(fmt.Errorf("insert discovery profile: %w", err))
		}
		p, err := s.getProfile(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		if out, err = s.view(p); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "discovery_profile.create", ResourceType: "discovery_profile", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: auditView(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create discovery profile: %w", err)
	}
	return out, nil
}

func auditView(p DiscoveryProfile) map[string]any {
	return map[string]any{"siteId": p.SiteID, "subnets": p.Subnets, "excludeIps": p.ExcludeIPs, "methods": p.Methods, "ports": len(p.Ports),
		"deepScan": p.DeepScan, "schedule": p.Schedule, "snmp": p.SNMP != nil}
}

// UpdateProfile changes a profile (PATCH); a changed schedule has its next run computed anew.
func (s *Service) UpdateProfile(ctx context.Context, id string, in DiscoveryProfileUpdate) (DiscoveryProfile, error) {
	if in.ClearSNMP && in.SNMP != nil {
		return DiscoveryProfile{}, apperr.Invalid("clearSnmp", "either snmp or clearSnmp")
	}
	if in.Name != nil {
		if err := checkName(*in.Name); err != nil {
			return DiscoveryProfile{}, err
		}
	}
	scope := access.ScopeFrom(ctx)
	// The site (for its time zone) is read first; a profile's site never changes.
	found, err := s.getProfile(ctx, s.db, scope, id)
	if err != nil {
		return DiscoveryProfile{}, err
	}
	st, err := s.siteOf(ctx, found.SiteID)
	if err != nil {
		return DiscoveryProfile{}, err
	}
	now := s.now()
	var out DiscoveryProfile
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getProfile(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		cred, err := s.credentials(before)
		if err != nil {
			return err
		}
		d := definition{Subnets: before.Subnets, Excludes: before.ExcludeIPs, Methods: before.Methods, Ports: before.Ports, SNMP: cred,
			DeepScan: before.DeepScan, Schedule: before.Schedule, TimeoutMs: before.TimeoutMs, Concurrency: before.Concurrency}
		if in.Subnets != nil {
			d.Subnets = in.Subnets
		}
		if in.ExcludeIPs != nil {
			d.Excludes = in.ExcludeIPs
		}
		if in.Methods != nil {
			d.Methods = in.Methods
		}
		if in.Ports != nil {
			d.Ports = in.Ports
		}
		switch {
		case in.ClearSNMP:
			d.SNMP = nil
		case in.SNMP != nil:
			d.SNMP = in.SNMP
		}
		store.Assign(&d.DeepScan, in.DeepScan)
		store.Assign(&d.Schedule, in.Schedule)
		store.Assign(&d.TimeoutMs, in.TimeoutMs)
		store.Assign(&d.Concurrency, in.Concurrency)
		var c checker
		d.check(&c)
		if err := c.err(); err != nil {
			return err
		}
		ch := store.NewChanges(now)
		if in.Name != nil {
			ch.Set("name", *in.Name)
		}
		ch.Set("subnets", store.EncodeJSON(d.Subnets))
		ch.Set("excludes", store.EncodeJSON(d.Excludes))
		ch.Set("methods", store.EncodeJSON(d.Methods))
		ch.Set("ports", store.EncodeJSON(d.Ports))
		if in.SNMP != nil || in.ClearSNMP {
			ch.Set("snmp", s.seal(d.SNMP))
		}
		ch.Set("deep_scan", d.DeepScan)
		ch.Set("timeout_ms", d.TimeoutMs)
		ch.Set("concurrency", d.Concurrency)
		if in.Schedule != nil {
			next, err := d.Schedule.nextRun(now, st.Timezone)
			if err != nil {
				return err
			}
			ch.Set("schedule", store.EncodeJSON(d.Schedule))
			ch.Set("next_run_at", next)
		}
		if in.AgentDeviceID != nil {
			if err := checkAgent(ctx, tx, before.SiteID, *in.AgentDeviceID); err != nil {
				return err
			}
			ch.Set("agent_device_id", store.NullIfEmpty(*in.AgentDeviceID))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE discovery_profiles SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(before.ID),
			ch.Args.Values()...); err != nil {
			return isUniqueName(fmt.Errorf("update discovery profile %s: %w", before.ID, err))
		}
		p, err := s.getProfile(ctx, tx, access.SystemScope(), before.ID)
		if err != nil {
			return err
		}
		if out, err = s.view(p); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "discovery_profile.update", ResourceType: "discovery_profile", ResourceID: out.ID,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: auditView(out)})
	})
	if err != nil {
		return out, fmt.Errorf("update discovery profile: %w", err)
	}
	return out, nil
}

// DeleteProfile deletes a profile with its jobs; refused (409) while a scan of it is
// scheduled or running.
func (s *Service) DeleteProfile(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.getProfile(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		var open int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM discovery_jobs WHERE profile_id = $1 AND status IN ($2, $3)`, p.ID,
			JobScheduled, JobRunning).Scan(&open); err != nil {
			return fmt.Errorf("count the open jobs of profile %s: %w", p.ID, err)
		}
		if open > 0 {
			return apperr.ConflictCode(CodeScanActive, "a scan of the profile is scheduled or running: cancel it or let it end first")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM discovery_jobs WHERE profile_id = $1`, p.ID); err != nil {
			return fmt.Errorf("delete the jobs of profile %s: %w", p.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM discovery_profiles WHERE id = $1`, p.ID); err != nil {
			return fmt.Errorf("delete discovery profile %s: %w", p.ID, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "discovery_profile.delete", ResourceType: "discovery_profile", ResourceID: p.ID,
			ResourceName: p.Name, PartnerID: p.PartnerID, OrgID: p.OrgID})
	})
}
