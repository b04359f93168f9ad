package discovery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// validateScan checks a network_scan payload (discovery builds them; a hand-made one is
// held to the same limits).
func validateScan(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.NetworkScan
	if err := jsonenc.DecodeStrict(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "network_scan takes {subnets, excludes, methods, ports, snmp?, timeoutMs, concurrency}: "+
			err.Error())
	}
	d := definition{Subnets: p.Subnets, Excludes: p.Excludes, Methods: p.Methods, Ports: p.Ports, DeepScan: true,
		Schedule: DiscoverySchedule{Type: ScheduleManual}, TimeoutMs: p.TimeoutMs, Concurrency: p.Concurrency}
	if p.SNMP != nil {
		d.SNMP = &DiscoverySNMPCredentials{Version: p.SNMP.Version}
	}
	var c checker
	d.check(&c)
	for _, f := range c.details {
		if !strings.HasPrefix(f.Field, "snmp.") {
			return nil, apperr.Invalid("payload."+f.Field, f.Message)
		}
	}
	p.Subnets, p.Excludes, p.Methods, p.Ports = d.Subnets, d.Excludes, d.Methods, d.Ports
	return p, nil
}

const jobColumns = `j.id, j.partner_id, j.org_id, j.site_id, j.profile_id, j.agent_device_id, j.command_id, j.status, j.trigger_kind,
	j.hosts_total, j.hosts_scanned, j.hosts_found, j.new_assets, j.error, j.created_by, j.created_at, j.started_at, j.completed_at`

func scanJob(row store.Scanner) (DiscoveryJob, error) {
	var j DiscoveryJob
	var cmd, msg, by sql.NullString
	var started, done sql.NullTime
	err := row.Scan(&j.ID, &j.PartnerID, &j.OrgID, &j.SiteID, &j.ProfileID, &j.AgentDeviceID, &cmd, &j.Status, &j.Trigger, &j.HostsTotal,
		&j.HostsScanned, &j.HostsFound, &j.NewAssets, &msg, &by, &j.CreatedAt, &started, &done)
	j.CommandID, j.Error, j.CreatedBy = store.StringPtr(cmd), store.StringPtr(msg), store.StringPtr(by)
	j.StartedAt, j.CompletedAt, j.CreatedAt = store.TimePtr(started), store.TimePtr(done), j.CreatedAt.UTC()
	return j, err
}

func jobFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "j.org_id", "j.partner_id"), tenancy.LiveOrg("j.org_id")}
}

func (s *Service) getJob(ctx context.Context, q store.Querier, scope access.Scope, id string) (DiscoveryJob, error) {
	var a store.Args
	return store.ByID(ctx, q, "discovery job", `SELECT `+jobColumns+` FROM discovery_jobs j`, "j.id", id, &a, jobFilter(scope, &a), scanJob)
}

// GetJob returns a job in scope; a running job's hostsScanned is the progress its agent last
// reported.
func (s *Service) GetJob(ctx context.Context, id string) (DiscoveryJob, error) {
	j, err := s.getJob(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil || j.Status != JobRunning || j.CommandID == nil {
		return j, err
	}
	cmd, err := s.devices.GetCommand(ctx, j.AgentDeviceID, *j.CommandID)
	if err != nil || cmd.Stdout == nil {
		return j, nil
	}
	if scanned, total, ok := lastProgress(*cmd.Stdout); ok {
		j.HostsScanned, j.HostsTotal = scanned, total
	}
	return j, nil
}

// lastProgress reads the last "scanned N of M" line of a scan's live output.
func lastProgress(out string) (scanned, total int, ok bool) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	_, err := fmt.Sscanf(lines[len(lines)-1], "scanned %d of %d", &scanned, &total)
	return scanned, total, err == nil
}

// JobFilter narrows a list of jobs.
type JobFilter struct {
	ProfileID string
	Status    string
	SiteID    string
	OrgID     string
}

// ListJobs lists the jobs in scope, newest first.
func (s *Service) ListJobs(ctx context.Context, f JobFilter, page store.Page) ([]DiscoveryJob, string, *int, error) {
	var a store.Args
	conds := jobFilter(access.ScopeFrom(ctx), &a)
	conds = equal(conds, &a, "j.profile_id", f.ProfileID, "j.status", f.Status, "j.site_id", f.SiteID, "j.org_id", f.OrgID)
	return store.List(ctx, s.db, store.ListQuery{Columns: jobColumns, From: " FROM discovery_jobs j", Conds: conds, Args: &a,
		SortKey: "j.id", SortID: "j.id", Desc: true}, page, scanJob, func(j DiscoveryJob) (string, string) { return j.ID, j.ID })
}

// Scan starts a scan of a profile on an online agent of its site: the request's agent, the
// profile's, or the one heard from most recently. 409 NO_ONLINE_AGENT without one; 409
// SCAN_ALREADY_ACTIVE while a scan of the profile is scheduled or running.
func (s *Service) Scan(ctx context.Context, in DiscoveryScanRequest) (DiscoveryJob, error) {
	var job DiscoveryJob
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.getProfile(ctx, tx, access.ScopeFrom(ctx), in.ProfileID)
		if err != nil {
			return err
		}
		if in.AgentDeviceID != "" {
			if err := checkAgent(ctx, tx, p.SiteID, in.AgentDeviceID); err != nil {
				return err
			}
		}
		job, cmds, err = s.startScan(ctx, tx, p, in.AgentDeviceID, TriggerManual)
		return err
	})
	if err != nil {
		return DiscoveryJob{}, fmt.Errorf("start a discovery scan: %w", err)
	}
	return s.dispatched(ctx, job, cmds)
}

// startScan records a job of p and its command to the picked agent, in tx.
func (s *Service) startScan(ctx context.Context, tx *sql.Tx, p profileRow, agentID, trigger string) (DiscoveryJob, []devices.DeviceCommand, error) {
	if agentID == "" && p.AgentDeviceID != nil {
		agentID = *p.AgentDeviceID
	}
	probe, err := s.devices.PickProbe(ctx, tx, devices.ProbeTarget{OrgID: p.OrgID, SiteID: p.SiteID, DeviceID: agentID})
	if err != nil {
		return DiscoveryJob{}, nil, err
	}
	cred, err := s.credentials(p)
	if err != nil {
		return DiscoveryJob{}, nil, err
	}
	payload := agentproto.NetworkScan{Subnets: p.Subnets, Excludes: p.ExcludeIPs, Methods: p.Methods, Ports: p.Ports,
		SNMP: cred.target(p.TimeoutMs), TimeoutMs: p.TimeoutMs, Concurrency: p.Concurrency}
	id, now := store.NewID(), s.now()
	res, err := tx.ExecContext(ctx, `INSERT INTO discovery_jobs (id, partner_id, org_id, site_id, profile_id, agent_device_id, status,
		trigger_kind, hosts_total, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
		id, p.PartnerID, p.OrgID, p.SiteID, p.ID, probe, JobScheduled, trigger, addressCount(p.Subnets), access.ActorName(ctx), now)
	if err != nil {
		return DiscoveryJob{}, nil, fmt.Errorf("insert discovery job: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return DiscoveryJob{}, nil, errors.Join(err, apperr.ConflictCode(CodeScanActive,
			"a scan of the profile is already scheduled or running: wait for it or cancel it"))
	}
	out, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{probe}, Audited: true,
		CommandInput: devices.CommandInput{Type: agentproto.CommandNetworkScan, Payload: json.RawMessage(store.EncodeJSON(payload))}})
	if err != nil {
		return DiscoveryJob{}, nil, fmt.Errorf("send the scan of profile %s to agent %s: %w", p.ID, probe, err)
	}
	if len(out.Commands) != 1 {
		for _, it := range append(out.Skipped, out.Failed...) {
			return DiscoveryJob{}, nil, apperr.ConflictCode(it.Code, "the agent cannot take the scan: "+it.Reason)
		}
		return DiscoveryJob{}, nil, errors.New("the agent got no scan command and no reason")
	}
	cmd := out.Commands[0]
	if _, err := tx.ExecContext(ctx, `UPDATE discovery_jobs SET command_id = $1 WHERE id = $2`, cmd.ID, id); err != nil {
		return DiscoveryJob{}, nil, fmt.Errorf("record the command of discovery job %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE discovery_profiles SET last_run_at = $1 WHERE id = $2`, now, p.ID); err != nil {
		return DiscoveryJob{}, nil, fmt.Errorf("record the run of profile %s: %w", p.ID, err)
	}
	job, err := s.getJob(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return job, nil, err
	}
	return job, out.Commands, audit.Record(ctx, tx, audit.Entry{Action: "discovery.scan", ResourceType: "discovery_job", ResourceID: id,
		ResourceName: p.Name, PartnerID: p.PartnerID, OrgID: p.OrgID, Details: map[string]any{"profileId": p.ID, "agentDeviceId": probe,
			"commandId": cmd.ID, "trigger": trigger}})
}

// dispatched hands the committed command to its agent; a job whose command reached the
// agent is running.
func (s *Service) dispatched(ctx context.Context, job DiscoveryJob, cmds []devices.DeviceCommand) (DiscoveryJob, error) {
	s.devices.Dispatch(ctx, cmds)
	if len(cmds) == 1 && cmds[0].Status == devices.CommandSent {
		now := s.now()
		res, err := s.db.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, started_at = $2 WHERE id = $3 AND status = $4`,
			JobRunning, now, job.ID, JobScheduled)
		if err != nil {
			return job, fmt.Errorf("start discovery job %s: %w", job.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			job.Status, job.StartedAt = JobRunning, &now
		}
	}
	return job, nil
}

// CancelJob cancels a running job: its command is cancelled, and a result arriving later is
// dropped. Not running (scheduled, or ended; also the loser against an arriving result): 409
// JOB_NOT_RUNNING.
func (s *Service) CancelJob(ctx context.Context, id string) (DiscoveryJob, error) {
	var j DiscoveryJob
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if j, err = s.getJob(ctx, tx, access.ScopeFrom(ctx), id); err != nil {
			return err
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, completed_at = $2, error = $3 WHERE id = $4 AND status = $5`,
			JobCancelled, now, "cancelled by "+fmt.Sprint(access.ActorName(ctx)), j.ID, JobRunning)
		if err != nil {
			return fmt.Errorf("cancel discovery job %s: %w", j.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, apperr.ConflictCode(CodeJobNotRunning, "only a running job can be cancelled: this one is "+j.Status))
		}
		if j, err = s.getJob(ctx, tx, access.SystemScope(), j.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "discovery.cancel", ResourceType: "discovery_job", ResourceID: j.ID,
			PartnerID: j.PartnerID, OrgID: j.OrgID})
	})
	if err != nil {
		return DiscoveryJob{}, fmt.Errorf("cancel discovery job: %w", err)
	}
	if j.CommandID != nil {
		if _, err := s.devices.CancelCommand(ctx, j.AgentDeviceID, *j.CommandID); err != nil {
			if _, ok := apperr.As(err); !ok {
				s.logger.WarnContext(ctx, "the command of a cancelled discovery job was not cancelled", "job", j.ID, "error", err)
			}
		}
	}
	return j, nil
}

// onScanResult records a network_scan result in the result's transaction. The job ends by a
// conditional transition: a job cancelled (or ended) first keeps its state and the result is
// dropped, no asset written.
func (s *Service) onScanResult(ctx context.Context, tx *sql.Tx, _ string, r agentproto.CommandResult) error {
	var a store.Args
	j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM discovery_jobs j WHERE j.command_id = `+a.Add(r.CommandID), a.Values()...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load the job of command %s: %w", r.CommandID, err)
	}
	now := s.now()
	if r.Status != agentproto.ResultCompleted {
		msg := strings.TrimSpace(r.Error)
		if msg == "" {
			msg = "the scan ended " + r.Status
		}
		if _, err := tx.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, error = $2, completed_at = $3 WHERE id = $4 AND status IN ($5, $6)`,
			JobFailed, msg, now, j.ID, JobScheduled, JobRunning); err != nil {
			return fmt.Errorf("fail discovery job %s: %w", j.ID, err)
		}
		return nil
	}
	var res agentproto.NetworkScanResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		if _, err := tx.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, error = $2, completed_at = $3 WHERE id = $4 AND status IN ($5, $6)`,
			JobFailed, "the scan's result could not be read", now, j.ID, JobScheduled, JobRunning); err != nil {
			return fmt.Errorf("fail discovery job %s: %w", j.ID, err)
		}
		return nil
	}
	var errText any
	if len(res.Errors) > 0 {
		errText = strings.Join(res.Errors, "; ")
	}
	claim, err := tx.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, completed_at = $2, started_at = COALESCE(started_at, $2),
		hosts_total = $3, hosts_scanned = $4, hosts_found = $5, error = $6 WHERE id = $7 AND status IN ($8, $9)`,
		JobCompleted, now, res.HostsTotal, res.HostsScanned, len(res.Hosts), errText, j.ID, JobScheduled, JobRunning)
	if err != nil {
		return fmt.Errorf("complete discovery job %s: %w", j.ID, err)
	}
	if n, err := claim.RowsAffected(); err != nil {
		return fmt.Errorf("complete discovery job %s: %w", j.ID, err)
	} else if n == 0 {
		return nil
	}
	created, err := s.ingest(ctx, tx, j, res, now)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE discovery_jobs SET new_assets = $1 WHERE id = $2`, created, j.ID); err != nil {
		return fmt.Errorf("count the new assets of discovery job %s: %w", j.ID, err)
	}
	return nil
}

// Tick moves jobs on and starts due scans: a scheduled job whose command reached its agent
// is running; an open job whose command ended without a result recorded (timed out,
// cancelled on the device) fails; profiles whose next run has come start a scan. Any number
// of nodes may run it: transitions and claims are conditional updates.
func (s *Service) Tick(ctx context.Context) error {
	if err := s.followCommands(ctx); err != nil {
		return err
	}
	return s.runDue(ctx)
}

// followCommands brings open jobs in step with their commands.
func (s *Service) followCommands(ctx context.Context) error {
	var a store.Args
	type open struct{ id, status, command string }
	jobs, err := store.QueryAll(ctx, s.db, `SELECT j.id, j.status, c.status FROM discovery_jobs j`+devices.CommandJoin("j.command_id")+
		` WHERE j.status IN (`+a.Add(JobScheduled)+`, `+a.Add(JobRunning)+`) AND c.status <> `+a.Add(devices.CommandQueued), a.Values(),
		func(row store.Scanner) (open, error) {
			var o open
			return o, row.Scan(&o.id, &o.status, &o.command)
		})
	if err != nil {
		return fmt.Errorf("read open discovery jobs: %w", err)
	}
	now := s.now()
	for _, o := range jobs {
		var err error
		switch {
		case o.command == devices.CommandSent && o.status == JobScheduled:
			_, err = s.db.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, started_at = $2 WHERE id = $3 AND status = $4`,
				JobRunning, now, o.id, JobScheduled)
		case o.command != devices.CommandSent:
			_, err = s.db.ExecContext(ctx, `UPDATE discovery_jobs SET status = $1, error = $2, completed_at = $3 WHERE id = $4
				AND status IN ($5, $6)`, JobFailed, "the scan's command ended ("+o.command+") without a result", now, o.id,
				JobScheduled, JobRunning)
		}
		if err != nil {
			return fmt.Errorf("follow discovery job %s: %w", o.id, err)
		}
	}
	return nil
}
