package maintenance

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service keeps maintenance windows and their occurrences.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
	// wake tells the event dispatcher that events were committed.
	wake    func()
	devices *devices.Service
}

// Deps is what the maintenance service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Wake, when set, tells the event dispatcher that a transaction recorded events.
	Wake func()
	// Devices checks what a window's targets name.
	Devices *devices.Service
}

// New returns the maintenance service.
func New(d Deps) *Service {
	wake := d.Wake
	if wake == nil {
		wake = func() {}
	}
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), wake: wake, devices: d.Devices}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const windowColumns = `w.id, w.partner_id, w.org_id, w.name, w.description, w.timezone, w.start_local, w.end_local, w.recurrence,
	w.rrule, w.recurrence_end, w.target_type, w.target_ids, w.suppress_alerts, w.suppress_patches, w.suppress_automations,
	w.suppress_scripts, w.status, w.created_by, w.created_at, w.updated_at, w.cancelled_at, w.cancelled_by`

func scanWindow(row store.Scanner) (MaintenanceWindow, error) {
	var w MaintenanceWindow
	var rule, by, cancelledBy sql.NullString
	var until, cancelled sql.NullTime
	var ids string
	if err := row.Scan(&w.ID, &w.PartnerID, &w.OrgID, &w.Name, &w.Description, &w.Timezone, &w.StartTime, &w.EndTime,
		&w.Recurrence, &rule, &until, &w.Targets.Type, &ids, &w.SuppressAlerts, &w.SuppressPatches, &w.SuppressAutomations,
		&w.SuppressScripts, &w.Status, &by, &w.CreatedAt, &w.UpdatedAt, &cancelled, &cancelledBy); err != nil {
		return w, err
	}
	w.RRule, w.RecurrenceEnd, w.CreatedBy = store.StringPtr(rule), store.TimePtr(until), store.StringPtr(by)
	w.CancelledAt, w.CancelledBy = store.TimePtr(cancelled), store.StringPtr(cancelledBy)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	var err error
	if w.Targets.IDs, err = store.DecodeStrings(ids); err != nil {
		return w, fmt.Errorf("read targets of window %s: %w", w.ID, err)
	}
	return w, nil
}

// windowFilter keeps the windows (alias w) in scope, of live organizations.
func windowFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "w.org_id", "w.partner_id"), tenancy.LiveOrg("w.org_id")}
}

func (s *Service) getWindow(ctx context.Context, q store.Querier, scope access.Scope, id string) (MaintenanceWindow, error) {
	var a store.Args
	return store.ByID(ctx, q, "maintenance window", `SELECT `+windowColumns+` FROM maintenance_windows w`, "w.id", id, &a,
		windowFilter(scope, &a), scanWindow)
}

// GetWindow returns a window in scope.
func (s *Service) GetWindow(ctx context.Context, id string) (MaintenanceWindow, error) {
	return s.getWindow(ctx, s.db, access.ScopeFrom(ctx), id)
}

// WindowFilter narrows a list of windows.
type WindowFilter struct {
	OrgID  string
	Status string
}

// ListWindows lists the windows in scope, newest first.
func (s *Service) ListWindows(ctx context.Context, f WindowFilter, page store.Page) ([]MaintenanceWindow, string, *int, error) {
	var a store.Args
	conds := windowFilter(access.ScopeFrom(ctx), &a)
	if f.OrgID != "" {
		conds = append(conds, "w.org_id = "+a.Add(f.OrgID))
	}
	if f.Status != "" {
		conds = append(conds, "w.status = "+a.Add(f.Status))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: windowColumns, From: " FROM maintenance_windows w", Conds: conds, Args: &a,
		SortKey: "w.id", SortID: "w.id", Desc: true}, page, scanWindow, func(w MaintenanceWindow) (string, string) { return w.ID, w.ID })
}

// checkOwners makes sure every target ID is a site, group or device of the window's
// organization (owner), within the caller's reach.
func (s *Service) checkOwners(ctx context.Context, q store.Querier, owner tenancy.Owner, t MaintenanceTargets) error {
	dt := t.devicesTargets()
	return s.devices.CheckTargets(ctx, q, &dt, owner)
}

func boolOr(v *bool, def bool) bool {
	if v == nil {
		return def
	}
	return *v
}

// CreateWindow adds a window and writes its occurrences of the next 90 days.
func (s *Service) CreateWindow(ctx context.Context, in MaintenanceWindowInput) (MaintenanceWindow, error) {
	d := definition{Name: in.Name, Description: in.Description, StartTime: in.StartTime, EndTime: in.EndTime, Timezone: in.Timezone,
		Recurrence: in.Recurrence, RRule: in.RRule, RecurrenceEnd: in.RecurrenceEnd, Targets: in.Targets}
	sched, err := compile(&d, true)
	if err != nil {
		return MaintenanceWindow{}, err
	}
	if sched.over(s.now()) {
		return MaintenanceWindow{}, apperr.Invalid("endTime", "the window is over: none of its occurrences ends after now")
	}
	scope := access.ScopeFrom(ctx)
	var w MaintenanceWindow
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "maintenance window"})
		if err != nil {
			return err
		}
		if err := s.checkOwners(ctx, tx, tenancy.Owner{PartnerID: at.PartnerID, OrgID: at.OrgID}, d.Targets); err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO maintenance_windows (id, partner_id, org_id, name, description, timezone,
			start_local, end_local, recurrence, rrule, recurrence_end, target_type, target_ids, suppress_alerts, suppress_patches,
			suppress_automations, suppress_scripts, status, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7,
			$8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $20)`, id, at.PartnerID, at.OrgID, d.Name, d.Description,
			d.Timezone, d.StartTime, d.EndTime, d.Recurrence, store.NullIfEmpty(d.RRule), d.RecurrenceEnd, d.Targets.Type,
			store.EncodeStrings(d.Targets.IDs), boolOr(in.SuppressAlerts, true), boolOr(in.SuppressPatches, false),
			boolOr(in.SuppressAutomations, false), boolOr(in.SuppressScripts, false), WindowActive, access.ActorName(ctx), now); err != nil {
			return fmt.Errorf("insert maintenance window: %w", err)
		}
		if err := s.expand(ctx, tx, []planned{{id: id, partnerID: at.PartnerID, orgID: at.OrgID, sched: sched}}, now); err != nil {
			return err
		}
		if w, err = s.getWindow(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "maintenance_window.create", ResourceType: "maintenance_window", ResourceID: id,
			ResourceName: w.Name, PartnerID: w.PartnerID, OrgID: w.OrgID, Details: auditView(w)})
	})
	if err != nil {
		return w, fmt.Errorf("create maintenance window: %w", err)
	}
	return w, nil
}

func auditView(w MaintenanceWindow) map[string]any {
	return map[string]any{"startTime": w.StartTime, "endTime": w.EndTime, "timezone": w.Timezone, "recurrence": w.Recurrence,
		"rrule": w.RRule, "recurrenceEnd": w.RecurrenceEnd, "targets": w.Targets, "suppressAlerts": w.SuppressAlerts,
		"suppressPatches": w.SuppressPatches, "suppressAutomations": w.SuppressAutomations, "suppressScripts": w.SuppressScripts}
}

// UpdateWindow changes a window (PATCH). In the same transaction its scheduled occurrences
// are written anew from the changed definition; active and completed ones stay as they are.
// A cancelled window is final (409 WINDOW_CANCELLED).
func (s *Service) UpdateWindow(ctx context.Context, id string, in MaintenanceWindowUpdate) (MaintenanceWindow, error) {
	var w MaintenanceWindow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getWindow(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if before.Status == WindowCancelled {
			return apperr.ConflictCode(CodeWindowCancelled, "the maintenance window is cancelled")
		}
		d := definition{Name: before.Name, Description: before.Description, StartTime: before.StartTime, EndTime: before.EndTime,
			Timezone: before.Timezone, Recurrence: before.Recurrence, RRule: store.Deref(before.RRule),
			RecurrenceEnd: before.RecurrenceEnd, Targets: before.Targets}
		store.Assign(&d.Name, in.Name)
		store.Assign(&d.Description, in.Description)
		store.Assign(&d.StartTime, in.StartTime)
		store.Assign(&d.EndTime, in.EndTime)
		store.Assign(&d.Timezone, in.Timezone)
		store.Assign(&d.Recurrence, in.Recurrence)
		store.Assign(&d.RRule, in.RRule)
		store.Assign(&d.Targets, in.Targets)
		if in.Recurrence != nil && *in.Recurrence != Custom && in.RRule == nil {
			d.RRule = ""
		}
		if in.RecurrenceEnd != nil {
			d.RecurrenceEnd = in.RecurrenceEnd
		}
		sched, err := compile(&d, true)
		if err != nil {
			return err
		}
		if err := s.checkOwners(ctx, tx, tenancy.Owner{PartnerID: before.PartnerID, OrgID: before.OrgID}, d.Targets); err != nil {
			return err
		}
		now := s.now()
		c := store.NewChanges(now)
		c.Set("name", d.Name)
		c.Set("description", d.Description)
		c.Set("timezone", d.Timezone)
		c.Set("start_local", d.StartTime)
		c.Set("end_local", d.EndTime)
		c.Set("recurrence", d.Recurrence)
		c.Set("rrule", store.NullIfEmpty(d.RRule))
		c.Set("recurrence_end", d.RecurrenceEnd)
		c.Set("target_type", d.Targets.Type)
		c.Set("target_ids", store.EncodeStrings(d.Targets.IDs))
		c.Set("suppress_alerts", boolOr(in.SuppressAlerts, before.SuppressAlerts))
		c.Set("suppress_patches", boolOr(in.SuppressPatches, before.SuppressPatches))
		c.Set("suppress_automations", boolOr(in.SuppressAutomations, before.SuppressAutomations))
		c.Set("suppress_scripts", boolOr(in.SuppressScripts, before.SuppressScripts))
		// Conditional, so a cancel committed since the read above is not undone.
		res, err := tx.ExecContext(ctx, `UPDATE maintenance_windows SET `+c.SQL()+` WHERE id = `+c.Args.Add(id)+` AND status = `+
			c.Args.Add(WindowActive), c.Args.Values()...)
		if err != nil {
			return fmt.Errorf("update maintenance window %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return fmt.Errorf("update maintenance window %s: %w", id, err)
			}
			return apperr.ConflictCode(CodeWindowCancelled, "the maintenance window is cancelled")
		}
		plan := planned{id: id, partnerID: before.PartnerID, orgID: before.OrgID, sched: sched, ids: map[time.Time]string{}}
		if err := s.rewriteOccurrences(ctx, tx, &plan, now); err != nil {
			return err
		}
		if w, err = s.getWindow(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "maintenance_window.update", ResourceType: "maintenance_window", ResourceID: id,
			ResourceName: w.Name, PartnerID: w.PartnerID, OrgID: w.OrgID, Details: auditView(w)})
	})
	if err != nil {
		return w, fmt.Errorf("update maintenance window: %w", err)
	}
	return w, nil
}

// rewriteOccurrences deletes a changed window's scheduled occurrences and writes them anew,
// reusing the IDs of those that start at the same time, around the active and completed
// occurrences that have not ended before now.
func (s *Service) rewriteOccurrences(ctx context.Context, tx *sql.Tx, plan *planned, now time.Time) error {
	current, err := store.QueryAll(ctx, tx, `SELECT `+occurrenceColumns+` FROM maintenance_occurrences o WHERE o.window_id = $1
		AND (o.status = $2 OR (o.status IN ($3, $4) AND o.ends_at > $5))`, []any{plan.id, Scheduled, Active, Completed, now},
		scanOccurrence)
	if err != nil {
		return fmt.Errorf("read occurrences of window %s: %w", plan.id, err)
	}
	for _, o := range current {
		if o.Status == Scheduled {
			plan.ids[o.StartsAt] = o.ID
		} else {
			plan.kept = append(plan.kept, span{o.StartsAt, o.EndsAt})
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM maintenance_occurrences WHERE window_id = $1 AND status = $2`, plan.id, Scheduled); err != nil {
		return fmt.Errorf("drop scheduled occurrences of window %s: %w", plan.id, err)
	}
	return s.expand(ctx, tx, []planned{*plan}, now)
}

// CancelWindow cancels a window: its scheduled occurrences are cancelled and no more are
// written; an active one runs to its end (or is ended by hand). Cancelled already: 409
// WINDOW_CANCELLED.
func (s *Service) CancelWindow(ctx context.Context, id string) (MaintenanceWindow, error) {
	var w MaintenanceWindow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getWindow(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, `UPDATE maintenance_windows SET status = $1, cancelled_at = $2, cancelled_by = $3,
			updated_at = $2, expanded_until = NULL WHERE id = $4 AND status = $5`, WindowCancelled, now, access.ActorName(ctx), id, WindowActive)
		if err != nil {
			return fmt.Errorf("cancel maintenance window %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return fmt.Errorf("cancel maintenance window %s: %w", id, err)
			}
			return apperr.ConflictCode(CodeWindowCancelled, "the maintenance window is cancelled already")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE maintenance_occurrences SET status = $1, ended_at = $2 WHERE window_id = $3
			AND status = $4`, Cancelled, now, id, Scheduled); err != nil {
			return fmt.Errorf("cancel occurrences of window %s: %w", id, err)
		}
		if w, err = s.getWindow(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "maintenance_window.cancel", ResourceType: "maintenance_window", ResourceID: id,
			ResourceName: before.Name, PartnerID: before.PartnerID, OrgID: before.OrgID})
	})
	if err != nil {
		return w, fmt.Errorf("cancel maintenance window: %w", err)
	}
	return w, nil
}

// DeleteWindow deletes a window with its occurrences; refused (409 WINDOW_ACTIVE) while one
// of them is active. Its scheduled occurrences are taken first (cancelled, then deleted with
// the window), so the job cannot start one meanwhile: either it started first and is counted,
// or it finds nothing to start.
func (s *Service) DeleteWindow(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		w, err := s.getWindow(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE maintenance_occurrences SET status = $1 WHERE window_id = $2 AND status = $3`,
			Cancelled, id, Scheduled); err != nil {
			return fmt.Errorf("take occurrences of window %s: %w", id, err)
		}
		var active int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM maintenance_occurrences WHERE window_id = $1 AND status = $2`,
			id, Active).Scan(&active); err != nil {
			return fmt.Errorf("count active occurrences of window %s: %w", id, err)
		}
		if active > 0 {
			return apperr.ConflictCode(CodeWindowActive, "an occurrence of this window is active; end it first "+
				"(POST /maintenance/occurrences/{id}/end)")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM maintenance_windows WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete maintenance window %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "maintenance_window.delete", ResourceType: "maintenance_window", ResourceID: id,
			ResourceName: w.Name, PartnerID: w.PartnerID, OrgID: w.OrgID})
	})
}

// scheduleOf rebuilds the schedule of a stored window.
func scheduleOf(w MaintenanceWindow) (schedule, error) {
	d := definition{Name: w.Name, Description: w.Description, StartTime: w.StartTime, EndTime: w.EndTime, Timezone: w.Timezone,
		Recurrence: w.Recurrence, RRule: store.Deref(w.RRule), RecurrenceEnd: w.RecurrenceEnd, Targets: w.Targets}
	return compile(&d, false)
}
