package rollouts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// HoldFunc reports which of the devices a maintenance window holds now from a payload of the
// type (script, software, patch): those deployments that respect maintenance windows leave
// waiting. It runs in the deployment's transaction.
type HoldFunc func(ctx context.Context, tx *sql.Tx, payloadType string, deviceIDs []string) (map[string]bool, error)

// Service keeps deployments and moves them on.
type Service struct {
	db        *store.DB
	logger    *slog.Logger
	clock     clock.Clock
	devices   *devices.Service
	deployers map[string]Deployer
	// hold is read on each round of the runner; tests replace it on a running server.
	hold atomic.Pointer[HoldFunc]
}

// Deps is what the deployments service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time deployments run on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	// Maintenance holds the devices of deployments that respect maintenance windows while a
	// window suppresses their payload (a script's as scripts, software's and patches' as
	// patches); nil: nothing is held.
	Maintenance *maintenance.Service
}

// New returns the deployments service. Its payload types come from the Deployers that modules
// declare (the script deployer is its own): see plug.
func New(d Deps) *Service {
	s := &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), devices: d.Devices, deployers: map[string]Deployer{}}
	if m := d.Maintenance; m != nil {
		hold := HoldFunc(func(ctx context.Context, tx *sql.Tx, payloadType string, ids []string) (map[string]bool, error) {
			what := maintenance.Patches
			if payloadType == "script" {
				what = maintenance.Scripts
			}
			return m.Held(ctx, tx, what, ids)
		})
		s.hold.Store(&hold)
	}
	return s
}

// plug takes in the deployers modules declared, once every module is built.
func (s *Service) plug(deployers []Deployer) error {
	for _, d := range deployers {
		if _, ok := s.deployers[d.Type()]; ok {
			return fmt.Errorf("deployer of %s payloads declared twice", d.Type())
		}
		s.deployers[d.Type()] = d
	}
	return nil
}

// ResultHook is what a module that declares a Deployer declares with it, for the command kind
// its deployments send: the agents' results of those commands end the deployment's devices.
func (s *Service) ResultHook(commandKind string) devices.ResultHook {
	return devices.ResultHook{Kind: commandKind, Run: s.recordResult}
}

func (s *Service) held(ctx context.Context, tx *sql.Tx, payloadType string, ids []string) (map[string]bool, error) {
	h := s.hold.Load()
	if h == nil || len(ids) == 0 {
		return nil, nil
	}
	return (*h)(ctx, tx, payloadType, ids)
}

const columns = `r.id, r.partner_id, r.org_id, r.name, r.description, r.status, r.payload_type, r.payload, r.targets, r.strategy,
	r.retry, r.respect_maintenance, r.batch_count, r.current_batch, r.next_batch_at, r.pause_reason, r.created_by, r.created_at,
	r.updated_at, r.started_at, r.completed_at`

func scan(row store.Scanner) (Deployment, error) {
	var x Deployment
	var payload, targets, strategy, retry string
	var reason, by sql.NullString
	var next, started, done sql.NullTime
	err := row.Scan(&x.ID, &x.PartnerID, &x.OrgID, &x.Name, &x.Description, &x.Status, &x.payloadType, &payload, &targets, &strategy,
		&retry, &x.RespectMaintenanceWindows, &x.BatchCount, &x.CurrentBatch, &next, &reason, &by, &x.CreatedAt, &x.UpdatedAt, &started, &done)
	if err != nil {
		return x, err
	}
	x.Payload = json.RawMessage(payload)
	x.PauseReason, x.CreatedBy = store.StringPtr(reason), store.StringPtr(by)
	x.NextBatchAt, x.StartedAt, x.CompletedAt = store.TimePtr(next), store.TimePtr(started), store.TimePtr(done)
	for _, f := range []struct {
		raw string
		v   any
	}{{targets, &x.Targets}, {strategy, &x.Strategy}, {retry, &x.Retry}} {
		if err := json.Unmarshal([]byte(f.raw), f.v); err != nil {
			return x, fmt.Errorf("read deployment %s: %w", x.ID, err)
		}
	}
	return x, nil
}

func filter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "r.org_id", "r.partner_id") + " AND " + tenancy.LiveOrg("r.org_id")
}

// load reads a deployment in scope, without its totals.
func load(ctx context.Context, q store.Querier, scope access.Scope, id string) (Deployment, error) {
	var a store.Args
	return store.ByID(ctx, q, "deployment", `SELECT `+columns+` FROM rollouts r`, "r.id", id, &a, []string{filter(scope, &a)}, scan)
}

// withTotals fills the totals of deployments.
func withTotals(ctx context.Context, q store.Querier, xs []Deployment) error {
	if len(xs) == 0 {
		return nil
	}
	ids := make([]string, len(xs))
	at := map[string]int{}
	for i, x := range xs {
		ids[i], at[x.ID] = x.ID, i
	}
	type count struct {
		id, status string
		n          int
	}
	var a store.Args
	counts, err := store.QueryAll(ctx, q, `SELECT rollout_id, status, COUNT(*) FROM rollout_devices WHERE rollout_id IN `+a.In(ids)+
		` GROUP BY rollout_id, status`, a.Values(), func(row store.Scanner) (count, error) {
		var c count
		return c, row.Scan(&c.id, &c.status, &c.n)
	})
	if err != nil {
		return fmt.Errorf("count deployment devices: %w", err)
	}
	for _, c := range counts {
		xs[at[c.id]].Totals.add(c.status, c.n)
	}
	return nil
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (Deployment, error) {
	x, err := load(ctx, q, scope, id)
	if err != nil {
		return x, err
	}
	one := []Deployment{x}
	err = withTotals(ctx, q, one)
	return one[0], err
}

// Get returns a deployment in scope with its totals.
func (s *Service) Get(ctx context.Context, id string) (Deployment, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListFilter narrows a list of deployments.
type ListFilter struct {
	OrgID  string
	Status string
}

// List lists the deployments in scope, newest first.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Deployment, string, *int, error) {
	var a store.Args
	conds := []string{filter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "r.org_id = "+a.Add(f.OrgID))
	}
	if f.Status != "" {
		conds = append(conds, "r.status = "+a.Add(f.Status))
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: columns, From: " FROM rollouts r", Conds: conds, Args: &a,
		SortKey: "r.id", SortID: "r.id", Desc: true}, page, scan, func(x Deployment) (string, string) { return x.ID, x.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list deployments: %w", err)
	}
	return rows, next, total, withTotals(ctx, s.db, rows)
}

// DeviceFilter narrows a deployment's device list.
type DeviceFilter struct {
	Status string
	Batch  int
}

const deviceColumns = `d.device_id, d.batch, d.status, d.attempts, d.command_id, d.error, d.started_at, d.completed_at, d.updated_at`

func scanDevice(row store.Scanner) (DeploymentDevice, error) {
	var x DeploymentDevice
	var cmd, errMsg sql.NullString
	var started, done sql.NullTime
	err := row.Scan(&x.DeviceID, &x.Batch, &x.Status, &x.Attempts, &cmd, &errMsg, &started, &done, &x.UpdatedAt)
	x.CommandID, x.Error, x.StartedAt, x.CompletedAt = store.StringPtr(cmd), store.StringPtr(errMsg), store.TimePtr(started), store.TimePtr(done)
	return x, err
}

// ListDevices lists a deployment's devices by batch, then device.
func (s *Service) ListDevices(ctx context.Context, id string, f DeviceFilter, page store.Page) ([]DeploymentDevice, string, *int, error) {
	if _, err := load(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"d.rollout_id = " + a.Add(id)}
	if f.Status != "" {
		conds = append(conds, "d.status = "+a.Add(f.Status))
	}
	if f.Batch > 0 {
		conds = append(conds, "d.batch = "+a.Add(f.Batch))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: deviceColumns, From: " FROM rollout_devices d", Conds: conds, Args: &a,
		SortKey: "d.device_id", SortID: "d.device_id"}, page, scanDevice, func(x DeploymentDevice) (string, string) {
		return x.DeviceID, x.DeviceID
	})
}

// actor is the principal a deployment acts as when it resolves its targets and deploys:
// reaching only its organization, with what its payloads need.
func (s *Service) actor(x Deployment) *access.Principal {
	perms := access.Permissions{string(access.DevicesRead), string(access.DevicesExecute), string(access.ScriptsRead),
		string(access.SoftwareRead), string(access.PatchesRead)}
	for _, d := range s.deployers {
		perms = append(perms, string(d.Permission()))
	}
	return &access.Principal{Kind: access.ActorSystem, ID: x.ID, Email: "deployment:" + x.ID, Name: "deployment " + x.Name,
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: x.PartnerID, OrgID: x.OrgID}, Permissions: perms}
}

func (s *Service) actorCtx(ctx context.Context, x Deployment) context.Context {
	return access.WithPrincipal(ctx, s.actor(x))
}

// deployer is the deployer of a payload type; unknown types are 400.
func (s *Service) deployer(typ string) (Deployer, error) {
	d, ok := s.deployers[typ]
	if !ok {
		known := make([]string, 0, len(s.deployers))
		for t := range s.deployers {
			known = append(known, t)
		}
		slices.Sort(known)
		return nil, apperr.Invalid("payload.type", "type must be one of "+strings.Join(known, ", "))
	}
	return d, nil
}

// checkPayload validates a payload with its deployer, as the deployment's actor would read it.
func (s *Service) checkPayload(ctx context.Context, x Deployment, payload map[string]any) (string, json.RawMessage, error) {
	typ, _ := payload["type"].(string)
	d, err := s.deployer(typ)
	if err != nil {
		return "", nil, err
	}
	norm, err := d.Validate(s.actorCtx(ctx, x), json.RawMessage(store.EncodeJSON(payload)))
	return typ, norm, err
}

// normalize fills defaults and checks the shape of a deployment's settings.
func normalize(x *Deployment) error {
	var details []apperr.Detail
	fail := func(field, msg string) { details = append(details, apperr.Detail{Field: field, Message: msg}) }
	if n := len([]rune(x.Name)); strings.TrimSpace(x.Name) == "" || n > maxNameLen {
		fail("name", "name must be 1 to 255 characters")
	}
	if len([]rune(x.Description)) > maxDescriptionLen {
		fail("description", "at most 4000 characters")
	}
	// A draft's targets may name rows that are not the organization's: initialize finds no
	// device of them. Named devices go into batches in ID order.
	details = append(details, x.Targets.CheckShape(x.OrgID)...)
	slices.Sort(x.Targets.IDs)
	st := &x.Strategy
	switch st.Mode {
	case "", ModeImmediate:
		st.Mode, st.BatchSize, st.DelayMinutes = ModeImmediate, 0, 0
	case ModeStaggered:
		if st.BatchSize < 1 || st.BatchSize > maxBatchSize {
			fail("strategy.batchSize", "a staggered deployment needs a batchSize of 1 to 1000")
		}
		if st.DelayMinutes < 0 || st.DelayMinutes > maxDelayMinutes {
			fail("strategy.delayMinutes", "0 to 1440")
		}
	default:
		fail("strategy.mode", "mode must be immediate or staggered")
	}
	if st.PauseOnFailures < 0 {
		fail("strategy.pauseOnFailures", "0 (off) or more")
	}
	if st.PauseOnFailurePercent < 0 || st.PauseOnFailurePercent > 100 {
		fail("strategy.pauseOnFailurePercent", "0 (off) to 100")
	}
	r := &x.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 1
	}
	if r.BackoffMinutes == 0 {
		r.BackoffMinutes = defaultBackoff
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts {
		fail("retry.maxAttempts", "1 to 5")
	}
	if r.BackoffMinutes < 1 || r.BackoffMinutes > maxBackoffMinutes {
		fail("retry.backoffMinutes", "1 to 1440")
	}
	if len(details) > 0 {
		return apperr.InvalidFields(details)
	}
	return nil
}

// Create adds a draft deployment.
func (s *Service) Create(ctx context.Context, in DeploymentInput) (Deployment, error) {
	id := store.NewID()
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "deployment"})
		if err != nil {
			return err
		}
		x := Deployment{ID: id, PartnerID: at.PartnerID, OrgID: at.OrgID, Name: in.Name, Description: in.Description,
			Status: StatusDraft, Targets: in.Targets, RespectMaintenanceWindows: in.RespectMaintenanceWindows == nil || *in.RespectMaintenanceWindows}
		if in.Strategy != nil {
			x.Strategy = *in.Strategy
		}
		if in.Retry != nil {
			x.Retry = *in.Retry
		}
		if err := normalize(&x); err != nil {
			return err
		}
		if x.payloadType, x.Payload, err = s.checkPayload(ctx, x, in.Payload); err != nil {
			return err
		}
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO rollouts (id, partner_id, org_id, name, description, status, payload_type, payload,
			targets, strategy, retry, respect_maintenance, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
			$10, $11, $12, $13, $14, $14)`, x.ID, x.PartnerID, x.OrgID, x.Name, x.Description, x.Status, x.payloadType, string(x.Payload),
			store.EncodeJSON(x.Targets), store.EncodeJSON(x.Strategy), store.EncodeJSON(x.Retry), x.RespectMaintenanceWindows, access.ActorName(ctx), now); err != nil {
			return fmt.Errorf("insert deployment: %w", err)
		}
		return audit.Record(ctx, tx, s.entry("deployment.create", x, map[string]any{"payloadType": x.payloadType, "targets": x.Targets.Type}))
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("create deployment: %w", err)
	}
	return s.get(ctx, s.db, access.SystemScope(), id)
}

func (s *Service) entry(action string, x Deployment, details map[string]any) audit.Entry {
	return audit.Entry{Action: action, ResourceType: "deployment", ResourceID: x.ID, ResourceName: x.Name, PartnerID: x.PartnerID,
		OrgID: x.OrgID, Details: details}
}

func errNotDraft(status string) error {
	return apperr.ConflictCode(CodeNotDraft, "only a draft deployment can be changed; this one is "+status)
}

func errState(action, status string) error {
	return apperr.ConflictCode(CodeStateConflict, "cannot "+action+" a deployment that is "+status)
}

// Update changes a draft deployment.
func (s *Service) Update(ctx context.Context, id string, in DeploymentUpdate) (Deployment, error) {
	x, err := load(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return x, err
	}
	if x.Status != StatusDraft {
		return x, errNotDraft(x.Status)
	}
	store.Assign(&x.Name, in.Name)
	store.Assign(&x.Description, in.Description)
	store.Assign(&x.Targets, in.Targets)
	store.Assign(&x.Strategy, in.Strategy)
	store.Assign(&x.Retry, in.Retry)
	store.Assign(&x.RespectMaintenanceWindows, in.RespectMaintenanceWindows)
	if err := normalize(&x); err != nil {
		return x, err
	}
	if in.Payload != nil {
		if x.payloadType, x.Payload, err = s.checkPayload(ctx, x, in.Payload); err != nil {
			return x, err
		}
	}
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		c := store.NewChanges(s.clock.Now())
		c.Set("name", x.Name)
		c.Set("description", x.Description)
		c.Set("payload_type", x.payloadType)
		c.Set("payload", string(x.Payload))
		c.Set("targets", store.EncodeJSON(x.Targets))
		c.Set("strategy", store.EncodeJSON(x.Strategy))
		c.Set("retry", store.EncodeJSON(x.Retry))
		c.Set("respect_maintenance", x.RespectMaintenanceWindows)
		res, err := tx.ExecContext(ctx, `UPDATE rollouts SET `+c.SQL()+` WHERE id = `+c.Args.Add(id)+` AND status = `+c.Args.Add(StatusDraft),
			c.Args.Values()...)
		if err != nil {
			return fmt.Errorf("update deployment %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errNotDraft("no longer a draft")
		}
		return audit.Record(ctx, tx, s.entry("deployment.update", x, nil))
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("update deployment: %w", err)
	}
	return s.get(ctx, s.db, access.SystemScope(), id)
}

// Delete removes a draft or ended deployment with its devices.
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := load(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM rollouts WHERE id = $1 AND status IN ($2, $3, $4, $5)`, id, StatusDraft,
			StatusCompleted, StatusFailed, StatusCancelled)
		if err != nil {
			return fmt.Errorf("delete deployment %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.ConflictCode(CodeStateConflict, "only a draft or ended deployment can be deleted; cancel it first")
		}
		return audit.Record(ctx, tx, s.entry("deployment.delete", x, nil))
	})
}

// transition moves a deployment from one of the statuses from to to, with the extra column
// changes; false when it was not in one of them any more (another request won).
func transition(ctx context.Context, tx *sql.Tx, id string, from []string, to string, now time.Time, extra map[string]any) (bool, error) {
	c := store.NewChanges(now)
	c.Set("status", to)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.Set(k, extra[k])
	}
	res, err := tx.ExecContext(ctx, `UPDATE rollouts SET `+c.SQL()+` WHERE id = `+c.Args.Add(id)+` AND status IN `+c.Args.In(from),
		c.Args.Values()...)
	if err != nil {
		return false, fmt.Errorf("move deployment %s to %s: %w", id, to, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
