package patches

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// errNotClaimed ends a run that another node (or an earlier call) claimed first.
var errNotClaimed = errors.New("the run was claimed elsewhere")

const day = 24 * time.Hour

// Run runs the due policies: schedule-based ones whose next run has come, and window-based
// ones whose window has an active occurrence they have not served yet. Any number of nodes
// may run it at once: each run is claimed by a conditional UPDATE, so one node starts it.
// A policy that fails is logged and tried again at the next call; the others go on.
func (p *Policies) Run(ctx context.Context) error {
	now := p.clock.Now()
	page := store.Page{Limit: 500}
	for {
		var a store.Args
		conds := []string{"pp.enabled", "((pp.schedule IS NOT NULL AND pp.next_run_at <= " + a.Add(now) +
			") OR pp.maintenance_window_id IS NOT NULL)", tenancy.LiveOrg("pp.org_id"), tenancy.LivePartner("pp.partner_id")}
		due, next, _, err := store.List(ctx, p.db, store.ListQuery{Columns: policyColumns, From: " FROM patch_policies pp", Conds: conds,
			Args: &a, SortKey: "pp.id", SortID: "pp.id"}, page, scanPolicy, func(x PatchPolicy) (string, string) { return x.ID, x.ID })
		if err != nil {
			return fmt.Errorf("read due patch policies: %w", err)
		}
		for _, x := range due {
			if err := p.runPolicy(ctx, x, now); err != nil && !errors.Is(err, errNotClaimed) {
				p.logger.WarnContext(ctx, "patch policy run failed", "policy", x.ID, "error", err)
			}
		}
		if next == "" {
			return nil
		}
		page.Cursor = next
	}
}

// runPolicy claims and carries out one run of x: approvals, then install jobs, in one
// transaction with the claim, so a run that fails leaves the occurrence to the next call.
func (p *Policies) runPolicy(ctx context.Context, x PatchPolicy, now time.Time) error {
	var claim func(tx *sql.Tx) (sql.Result, error)
	var occurrence any
	switch {
	case x.Schedule != nil && x.NextRunAt != nil:
		next, err := x.Schedule.Next(now)
		if err != nil {
			return err
		}
		stored := x.NextRunAt.UTC()
		claim = func(tx *sql.Tx) (sql.Result, error) {
			return tx.ExecContext(ctx, `UPDATE patch_policies SET next_run_at = $1 WHERE id = $2 AND next_run_at = $3 AND enabled`,
				next, x.ID, stored)
		}
	case x.MaintenanceWindowID != nil && x.OrgID != nil:
		occ, err := p.maintenance.NextOccurrence(ctx, *x.OrgID, *x.MaintenanceWindowID, "")
		if err != nil {
			return fmt.Errorf("read the occurrence of window %s: %w", *x.MaintenanceWindowID, err)
		}
		if occ == nil || occ.Status != maintenance.Active || occ.ID == x.lastOccurrenceID {
			return nil
		}
		occurrence = occ.ID
		claim = func(tx *sql.Tx) (sql.Result, error) {
			return tx.ExecContext(ctx, `UPDATE patch_policies SET last_occurrence_id = $1 WHERE id = $2
				AND (last_occurrence_id IS NULL OR last_occurrence_id <> $1) AND enabled`, occ.ID, x.ID)
		}
	default:
		return nil
	}
	actx := access.WithPrincipal(ctx, policyActor(x))
	ids, err := p.resolve(actx, x)
	if err != nil {
		return err
	}
	var cmds []devices.DeviceCommand
	err = p.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := claim(tx)
		if err != nil {
			return fmt.Errorf("claim a run of patch policy %s: %w", x.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, errNotClaimed)
		}
		approved, err := p.autoApprove(actx, tx, x, ids, now)
		if err != nil {
			return err
		}
		work, err := p.installable(actx, tx, x, ids, now)
		if err != nil {
			return err
		}
		jobIDs := []string{}
		for _, w := range work {
			for first := 0; first < len(w.devices); first += bulkChunk {
				job, err := p.patches.InstallIn(actx, tx, w.devices[first:min(first+bulkChunk, len(w.devices))], w.patches,
					InstallOptions{RebootBehavior: x.RebootBehavior})
				if err != nil {
					return fmt.Errorf("start an install of patch policy %s: %w", x.ID, err)
				}
				jobIDs = append(jobIDs, job.ID)
				cmds = append(cmds, job.Commands...)
			}
		}
		if len(jobIDs) > maxPolicyLastJobIDs {
			jobIDs = jobIDs[:maxPolicyLastJobIDs]
		}
		if _, err := tx.ExecContext(ctx, `UPDATE patch_policies SET last_run_at = $1, last_job_ids = $2, last_approved = $3 WHERE id = $4`,
			now, store.EncodeJSON(jobIDs), approved, x.ID); err != nil {
			return fmt.Errorf("record the run of patch policy %s: %w", x.ID, err)
		}
		return audit.Record(actx, tx, audit.Entry{Action: "patch_policy.run", ResourceType: "patch_policy", ResourceID: x.ID, ResourceName: x.Name,
			PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID), Details: map[string]any{"devices": len(ids), "approved": approved,
				"jobIds": jobIDs, "occurrenceId": occurrence}})
	})
	if err != nil {
		return err
	}
	p.devices.Dispatch(ctx, cmds)
	return nil
}

// resolve lists the devices the policy's targets hold now, in its reach (ctx is its actor).
func (p *Policies) resolve(ctx context.Context, x PatchPolicy) ([]string, error) {
	r, err := p.devices.ResolveTargets(ctx, x.Targets.Type, x.Targets.IDs, maxPolicyDevices)
	if err != nil {
		return nil, fmt.Errorf("resolve the targets of patch policy %s: %w", x.ID, err)
	}
	if r.Exceeds {
		return nil, fmt.Errorf("patch policy %s: %w", x.ID, devices.TooManyTargets(maxPolicyDevices))
	}
	return r.IDs(), nil
}

// maxPolicyDevices bounds the devices one run of a patch policy acts on.
const maxPolicyDevices = 10_000

// chunks calls fn with successive chunks of ids of at most rowsPerStatement.
func chunks(ids []string, fn func([]string) error) error {
	for first := 0; first < len(ids); first += rowsPerStatement {
		if err := fn(ids[first:min(first+rowsPerStatement, len(ids))]); err != nil {
			return err
		}
	}
	return nil
}

// autoApprove approves, for the policy's scope (its organization, or its partner), the open
// patches of the devices that match its categories and severities and that no decision
// covers yet (a deferral that has passed by now covers nothing). It returns how many it
// approved.
func (p *Policies) autoApprove(ctx context.Context, tx *sql.Tx, x PatchPolicy, ids []string, now time.Time) (int, error) {
	cats, sevs := x.AutoApprove.Categories, x.AutoApprove.Severities
	if len(cats) == 0 || len(sevs) == 0 {
		return 0, nil
	}
	var patchIDs []string
	err := chunks(ids, func(chunk []string) error {
		var a store.Args
		found, err := store.QueryStrings(ctx, tx, `SELECT DISTINCT pd.patch_id FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id
			WHERE pd.device_id IN `+a.In(chunk)+` AND pd.status IN (`+a.Add(DeviceStatePending)+`, `+a.Add(DeviceStateFailed)+`)
			AND p.category IN `+a.In(cats)+` AND p.severity IN `+a.In(sevs)+` AND `+effectiveApproval(&a, "pd.patch_id", "pd.org_id", now)+
			` = `+a.Add(ApprovalPending), a.Values()...)
		if err != nil {
			return fmt.Errorf("read the patches patch policy %s approves: %w", x.ID, err)
		}
		patchIDs = append(patchIDs, found...)
		return nil
	})
	if err != nil {
		return 0, err
	}
	patchIDs = unique(patchIDs)
	slices.Sort(patchIDs)
	approved := 0
	for _, id := range patchIDs {
		_, err := p.patches.decide(ctx, tx, id, ApprovalApproved, "approved by patch policy "+x.Name, store.Deref(x.OrgID), nil)
		if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindConflict {
			continue // a person decided otherwise meanwhile; their decision stands
		}
		if err != nil {
			return approved, err
		}
		approved++
	}
	return approved, nil
}

// installWork is one install job's worth: devices that install the same patches.
type installWork struct {
	patches []string
	devices []string
}

// installable groups the devices by the patches they install now: approved, open on the
// device, known to it for the policy's deferral plus its ring's delay (or past the deadline,
// which overrides both), on devices with no install work under way.
func (p *Policies) installable(ctx context.Context, tx *sql.Tx, x PatchPolicy, ids []string, now time.Time) ([]installWork, error) {
	delays, err := p.ringDelays(ctx, tx, x, ids)
	if err != nil {
		return nil, err
	}
	perDevice := map[string][]string{}
	err = chunks(ids, func(chunk []string) error {
		type open struct {
			dev, patch string
			offered    time.Time
		}
		var a store.Args
		list, err := store.QueryAll(ctx, tx, `SELECT pd.device_id, pd.patch_id, pd.offered_at FROM patch_devices pd
			WHERE pd.device_id IN `+a.In(chunk)+` AND pd.status IN (`+a.Add(DeviceStatePending)+`, `+a.Add(DeviceStateFailed)+`)
			AND `+effectiveApproval(&a, "pd.patch_id", "pd.org_id", now)+` = `+a.Add(ApprovalApproved)+`
			AND NOT EXISTS (SELECT 1 FROM patch_job_devices jd JOIN patch_jobs j ON j.id = jd.job_id WHERE jd.device_id = pd.device_id
				AND jd.status IN (`+a.Add(JobDeviceWaiting)+`, `+a.Add(JobDeviceQueued)+`) AND j.kind IN (`+a.Add(JobInstall)+`, `+
			a.Add(JobRollback)+`))`, a.Values(), func(sc store.Scanner) (o open, err error) {
			err = sc.Scan(&o.dev, &o.patch, &o.offered)
			return o, err
		})
		if err != nil {
			return fmt.Errorf("read the patches patch policy %s installs: %w", x.ID, err)
		}
		for _, o := range list {
			known := now.Sub(o.offered)
			deadline := x.DeadlineDays != nil && known >= time.Duration(*x.DeadlineDays)*day
			if deadline || known >= time.Duration(x.DeferralDays+delays[o.dev])*day {
				perDevice[o.dev] = append(perDevice[o.dev], o.patch)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	byKey := map[string]*installWork{}
	var out []installWork
	var keys []string
	for _, dev := range ids {
		list := perDevice[dev]
		if len(list) == 0 {
			continue
		}
		slices.Sort(list)
		// One command takes up to 500 packages; the rest wait for the next run.
		list = list[:min(len(list), MaxBulkApprove)]
		key := strings.Join(list, ",")
		w := byKey[key]
		if w == nil {
			w = &installWork{patches: list}
			byKey[key] = w
			keys = append(keys, key)
		}
		w.devices = append(w.devices, dev)
	}
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out, nil
}

// ringDelays is each device's ring delay in days: the first ring holding one of its groups,
// else (with rings) the largest delay, the implicit last ring. Without rings it is 0.
func (p *Policies) ringDelays(ctx context.Context, tx *sql.Tx, x PatchPolicy, ids []string) (map[string]int, error) {
	out := map[string]int{}
	if len(x.Rings) == 0 {
		return out, nil
	}
	last := 0
	for _, r := range x.Rings {
		last = max(last, r.DelayDays)
	}
	err := chunks(ids, func(chunk []string) error {
		member, err := groups.Memberships(ctx, tx, chunk)
		if err != nil {
			return fmt.Errorf("read the groups of the policy's devices: %w", err)
		}
		for _, dev := range chunk {
			out[dev] = last
			for _, r := range x.Rings {
				if slices.ContainsFunc(member[dev], func(g string) bool { return slices.Contains(r.GroupIDs, g) }) {
					out[dev] = r.DelayDays
					break
				}
			}
		}
		return nil
	})
	return out, err
}
