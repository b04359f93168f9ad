package maintenance

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

const occurrenceFields = `id, window_id, partner_id, org_id, starts_at, ends_at, status, started_at, ended_at, started_by, ended_by`

const occurrenceColumns = `o.id, o.window_id, o.partner_id, o.org_id, o.starts_at, o.ends_at, o.status, o.started_at, o.ended_at,
	o.started_by, o.ended_by`

func scanOccurrence(row store.Scanner) (MaintenanceOccurrence, error) {
	var o MaintenanceOccurrence
	var started, ended sql.NullTime
	var startedBy, endedBy sql.NullString
	if err := row.Scan(&o.ID, &o.WindowID, &o.PartnerID, &o.OrgID, &o.StartsAt, &o.EndsAt, &o.Status, &started, &ended,
		&startedBy, &endedBy); err != nil {
		return o, err
	}
	o.StartsAt, o.EndsAt = o.StartsAt.UTC(), o.EndsAt.UTC()
	o.StartedAt, o.EndedAt = store.TimePtr(started), store.TimePtr(ended)
	o.StartedBy, o.EndedBy = store.StringPtr(startedBy), store.StringPtr(endedBy)
	return o, nil
}

// planned is a window whose occurrences are to be written.
type planned struct {
	id, partnerID, orgID string
	sched                schedule
	// kept are occurrences that stay (active or completed, when a window changes): new ones
	// overlapping them are left out.
	kept []span
	// ids are the IDs to reuse for occurrences by start (those of the scheduled occurrences a
	// change rewrites), so an unchanged occurrence keeps its ID.
	ids map[time.Time]string
}

func (p planned) take(sp span) (string, bool) {
	for _, k := range p.kept {
		if sp.start.Before(k.end) && k.start.Before(sp.end) {
			return "", false
		}
	}
	if id, ok := p.ids[sp.start]; ok {
		return id, true
	}
	return store.NewID(), true
}

// insertChunk is how many occurrences one INSERT writes; where it is one (SQLite), the
// statement is prepared once per expansion.
func (s *Service) insertChunk() int { return s.db.RowsPerInsert(500) }

func insertOccurrences(n int) string {
	values := make([]string, n)
	for i := range n {
		values[i] = "(" + store.Placeholders(i*7+1, 7) + ")"
	}
	return `INSERT INTO maintenance_occurrences (id, window_id, partner_id, org_id, starts_at, ends_at, status) VALUES ` +
		strings.Join(values, ", ") + ` ON CONFLICT DO NOTHING`
}

// expand writes the occurrences of the windows that end after now and start within the
// horizon (and a day of slack), skipping those a window has already, and records how far each
// window is written.
func (s *Service) expand(ctx context.Context, tx *sql.Tx, windows []planned, now time.Time) error {
	until := now.Add(Horizon + slack)
	chunk := s.insertChunk()
	var rows []any
	var done, pending []string
	var single *sql.Stmt
	defer func() {
		if single != nil {
			single.Close()
		}
	}()
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		var err error
		if n := len(rows) / 7; n == 1 {
			if single == nil {
				if single, err = tx.PrepareContext(ctx, insertOccurrences(1)); err != nil {
					return fmt.Errorf("prepare the write of maintenance occurrences: %w", err)
				}
			}
			_, err = single.ExecContext(ctx, rows...)
		} else {
			_, err = tx.ExecContext(ctx, insertOccurrences(n), rows...)
		}
		if err != nil {
			return fmt.Errorf("write maintenance occurrences: %w", err)
		}
		rows = rows[:0]
		return nil
	}
	for _, w := range windows {
		x := w.sched.between(now, until, 0)
		for _, sp := range x.spans {
			id, ok := w.take(sp)
			if !ok {
				continue
			}
			rows = append(rows, id, w.id, w.partnerID, w.orgID, sp.start, sp.end, Scheduled)
			if len(rows) >= chunk*7 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if x.done {
			done = append(done, w.id)
		} else {
			pending = append(pending, w.id)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, set := range []struct {
		ids   []string
		until any
	}{{done, nil}, {pending, until}} {
		if len(set.ids) == 0 {
			continue
		}
		var a store.Args
		q := `UPDATE maintenance_windows SET expanded_until = ` + a.Add(set.until) + ` WHERE id IN ` + a.In(set.ids)
		if _, err := tx.ExecContext(ctx, q, a.Values()...); err != nil {
			return fmt.Errorf("record the expansion of maintenance windows: %w", err)
		}
	}
	return nil
}

// expandBatch is how many windows one transaction of the job expands.
const expandBatch = 200

// topUp writes the occurrences of every active window whose occurrences are not written up to
// the horizon, in batches of one transaction each.
func (s *Service) topUp(ctx context.Context, now time.Time) error {
	lastID := ""
	for {
		var batch []MaintenanceWindow
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			var a store.Args
			conds := []string{"w.status = " + a.Add(WindowActive), "w.expanded_until IS NOT NULL",
				"w.expanded_until < " + a.Add(now.Add(Horizon))}
			if lastID != "" {
				conds = append(conds, "w.id > "+a.Add(lastID))
			}
			// On PostgreSQL the windows are locked while expanded, so a change, cancel or delete
			// committed meanwhile is waited for and seen, never undone by a stale expansion
			// (SQLite writes one transaction at a time).
			lock := s.db.ForUpdate()
			var err error
			batch, err = store.QueryAll(ctx, tx, `SELECT `+windowColumns+` FROM maintenance_windows w WHERE `+store.Where(conds)+
				` ORDER BY w.id LIMIT `+fmt.Sprint(expandBatch)+lock, a.Values(), scanWindow)
			if err != nil {
				return fmt.Errorf("find maintenance windows to expand: %w", err)
			}
			plans := make([]planned, 0, len(batch))
			for _, w := range batch {
				sched, err := scheduleOf(w)
				if err != nil {
					s.logger.Error("maintenance window no longer compiles; not expanded", "window", w.ID, "error", err)
					continue
				}
				plans = append(plans, planned{id: w.ID, partnerID: w.PartnerID, orgID: w.OrgID, sched: sched})
			}
			return s.expand(ctx, tx, plans, now)
		})
		if err != nil {
			return err
		}
		if len(batch) < expandBatch {
			return nil
		}
		lastID = batch[len(batch)-1].ID
	}
}

// Tick is the periodic job: it ends the active occurrences whose end has come, starts the
// scheduled ones whose start has come, closes scheduled ones whose whole time passed while
// no job ran (completed, without events), and writes occurrences up to the horizon. Each
// change is a conditional UPDATE, so nodes running it at once never apply one twice.
func (s *Service) Tick(ctx context.Context) error {
	now := s.now()
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		ended, err := store.QueryAll(ctx, tx, `UPDATE maintenance_occurrences SET status = $1, ended_at = $2 WHERE status = $3
			AND ends_at <= $2 RETURNING `+occurrenceFields, []any{Completed, now, Active}, scanOccurrence)
		if err != nil {
			return fmt.Errorf("end maintenance occurrences: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE maintenance_occurrences SET status = $1, ended_at = $2 WHERE status = $3
			AND ends_at <= $2`, Completed, now, Scheduled); err != nil {
			return fmt.Errorf("close missed maintenance occurrences: %w", err)
		}
		started, err := store.QueryAll(ctx, tx, `UPDATE maintenance_occurrences SET status = $1, started_at = $2 WHERE status = $3
			AND starts_at <= $2 AND ends_at > $2 RETURNING `+occurrenceFields, []any{Active, now, Scheduled}, scanOccurrence)
		if err != nil {
			return fmt.Errorf("start maintenance occurrences: %w", err)
		}
		return s.recordEvents(ctx, tx, ended, started)
	})
	if err != nil {
		return fmt.Errorf("move maintenance occurrences on: %w", err)
	}
	s.wake()
	return s.topUp(ctx, now)
}

// Purge deletes the completed and cancelled occurrences that ended more than a year ago
// (their windows never write them again: occurrences are written only ahead of now).
func (s *Service) Purge(ctx context.Context) (int64, error) {
	return s.db.Purge(ctx, "maintenance occurrences", store.Deletion{
		SQL:  `DELETE FROM maintenance_occurrences WHERE status IN ($1, $2) AND ends_at < $3`,
		Args: []any{Completed, Cancelled, s.now().Add(-Retention)}})
}

// recordEvents records maintenance.ended for ended and maintenance.started for started.
func (s *Service) recordEvents(ctx context.Context, tx *sql.Tx, ended, started []MaintenanceOccurrence) error {
	if len(ended)+len(started) == 0 {
		return nil
	}
	var ids []string
	for _, o := range append(append([]MaintenanceOccurrence{}, ended...), started...) {
		ids = append(ids, o.WindowID)
	}
	var a store.Args
	list, err := store.QueryAll(ctx, tx, `SELECT `+windowColumns+` FROM maintenance_windows w WHERE w.id IN `+a.In(uniqueIDs(ids)),
		a.Values(), scanWindow)
	if err != nil {
		return fmt.Errorf("load windows of maintenance events: %w", err)
	}
	windows := make(map[string]MaintenanceWindow, len(list))
	for _, w := range list {
		windows[w.ID] = w
	}
	for _, o := range ended {
		if err := recordEvent(ctx, tx, EventEnded, o, windows[o.WindowID]); err != nil {
			return err
		}
	}
	for _, o := range started {
		if err := recordEvent(ctx, tx, EventStarted, o, windows[o.WindowID]); err != nil {
			return err
		}
	}
	return nil
}

func recordEvent(ctx context.Context, tx *sql.Tx, typ string, o MaintenanceOccurrence, w MaintenanceWindow) error {
	by := o.StartedBy
	if typ == EventEnded {
		by = o.EndedBy
	}
	_, err := events.Record(ctx, tx, events.Event{Type: typ, PartnerID: o.PartnerID, OrgID: o.OrgID, ResourceType: "maintenance_occurrence",
		ResourceID: o.ID}, map[string]any{"occurrenceId": o.ID, "windowId": o.WindowID, "windowName": w.Name, "startsAt": o.StartsAt,
		"endsAt": o.EndsAt, "manual": by != nil, "by": by, "targets": w.Targets, "suppressAlerts": w.SuppressAlerts,
		"suppressPatches": w.SuppressPatches, "suppressAutomations": w.SuppressAutomations, "suppressScripts": w.SuppressScripts})
	return err
}

func occurrenceFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "o.org_id", "o.partner_id"), tenancy.LiveOrg("o.org_id")}
}

func (s *Service) getOccurrence(ctx context.Context, q store.Querier, scope access.Scope, id string) (MaintenanceOccurrence, error) {
	var a store.Args
	return store.ByID(ctx, q, "maintenance occurrence", `SELECT `+occurrenceColumns+` FROM maintenance_occurrences o`, "o.id", id, &a,
		occurrenceFilter(scope, &a), scanOccurrence)
}

// GetOccurrence returns an occurrence in scope.
func (s *Service) GetOccurrence(ctx context.Context, id string) (MaintenanceOccurrence, error) {
	return s.getOccurrence(ctx, s.db, access.ScopeFrom(ctx), id)
}

// OccurrenceFilter narrows a list of occurrences.
type OccurrenceFilter struct {
	WindowID string
	OrgID    string
	Status   string
	// From and To keep the occurrences that overlap [From, To).
	From, To *time.Time
}

const sortTimeLayout = time.RFC3339Nano

// ListOccurrences lists the occurrences in scope by start.
func (s *Service) ListOccurrences(ctx context.Context, f OccurrenceFilter, page store.Page) ([]MaintenanceOccurrence, string, *int, error) {
	var a store.Args
	conds := occurrenceFilter(access.ScopeFrom(ctx), &a)
	if f.WindowID != "" {
		conds = append(conds, "o.window_id = "+a.Add(f.WindowID))
	}
	if f.OrgID != "" {
		conds = append(conds, "o.org_id = "+a.Add(f.OrgID))
	}
	if f.Status != "" {
		conds = append(conds, "o.status = "+a.Add(f.Status))
	}
	if f.From != nil {
		conds = append(conds, "o.ends_at > "+a.Add(f.From.UTC()))
	}
	if f.To != nil {
		conds = append(conds, "o.starts_at < "+a.Add(f.To.UTC()))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: occurrenceColumns, From: " FROM maintenance_occurrences o", Conds: conds,
		Args: &a, SortKey: "o.starts_at", SortID: "o.id", KeyArg: func(k string) (any, error) { return time.Parse(sortTimeLayout, k) }},
		page, scanOccurrence, func(o MaintenanceOccurrence) (string, string) { return o.StartsAt.Format(sortTimeLayout), o.ID })
}

// ListWindowOccurrences lists the occurrences of a window in scope.
func (s *Service) ListWindowOccurrences(ctx context.Context, windowID string, f OccurrenceFilter, page store.Page) ([]MaintenanceOccurrence, string, *int, error) {
	if _, err := s.GetWindow(ctx, windowID); err != nil {
		return nil, "", nil, err
	}
	f.WindowID = windowID
	return s.ListOccurrences(ctx, f, page)
}

// move makes a manual transition of an occurrence in scope: from → to, with its event.
func (s *Service) move(ctx context.Context, id, from, to string) (MaintenanceOccurrence, error) {
	var o MaintenanceOccurrence
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getOccurrence(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		query, typ, action := `UPDATE maintenance_occurrences SET status = $1, started_at = $2, started_by = $3 WHERE id = $4 AND status = $5`,
			EventStarted, "maintenance_occurrence.start"
		if to == Completed {
			query, typ, action = `UPDATE maintenance_occurrences SET status = $1, ended_at = $2, ended_by = $3 WHERE id = $4 AND status = $5`,
				EventEnded, "maintenance_occurrence.end"
		}
		res, err := tx.ExecContext(ctx, query, to, s.now(), access.ActorName(ctx), id, from)
		if err != nil {
			return fmt.Errorf("move maintenance occurrence %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return fmt.Errorf("move maintenance occurrence %s: %w", id, err)
			}
			if from == Scheduled {
				return apperr.ConflictCode(CodeOccurrenceNotPlanned, "the occurrence is not scheduled")
			}
			return apperr.ConflictCode(CodeOccurrenceNotActive, "the occurrence is not active")
		}
		if o, err = s.getOccurrence(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		w, err := s.getWindow(ctx, tx, access.SystemScope(), o.WindowID)
		if err != nil {
			return err
		}
		if err := recordEvent(ctx, tx, typ, o, w); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "maintenance_occurrence", ResourceID: id,
			ResourceName: w.Name, PartnerID: before.PartnerID, OrgID: before.OrgID,
			Details: map[string]any{"windowId": o.WindowID, "startsAt": o.StartsAt, "endsAt": o.EndsAt}})
	})
	if err == nil {
		s.wake()
	}
	return o, err
}

// StartOccurrence makes a scheduled occurrence active now; 409 OCCURRENCE_NOT_SCHEDULED
// otherwise (also for the loser of two concurrent starts).
func (s *Service) StartOccurrence(ctx context.Context, id string) (MaintenanceOccurrence, error) {
	return s.move(ctx, id, Scheduled, Active)
}

// EndOccurrence completes an active occurrence now; 409 OCCURRENCE_NOT_ACTIVE otherwise. The
// job never starts it again.
func (s *Service) EndOccurrence(ctx context.Context, id string) (MaintenanceOccurrence, error) {
	return s.move(ctx, id, Active, Completed)
}

// ListActive lists the windows in scope in effect now, each with its active occurrence.
func (s *Service) ListActive(ctx context.Context, orgID string, page store.Page) ([]MaintenanceActive, string, *int, error) {
	var a store.Args
	conds := append([]string{"o.status = " + a.Add(Active)}, windowFilter(access.ScopeFrom(ctx), &a)...)
	if orgID != "" {
		conds = append(conds, "w.org_id = "+a.Add(orgID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: windowColumns + ", " + occurrenceColumns,
		From: " FROM maintenance_occurrences o JOIN maintenance_windows w ON w.id = o.window_id", Conds: conds, Args: &a,
		SortKey: "o.id", SortID: "o.id"}, page, func(row store.Scanner) (MaintenanceActive, error) {
		var x MaintenanceActive
		var err error
		x.Window, err = scanWindow(prefixScanner{row, &x.Occurrence})
		return x, err
	}, func(x MaintenanceActive) (string, string) { return x.Occurrence.ID, x.Occurrence.ID })
}

// prefixScanner scans a row of a window's columns followed by an occurrence's.
type prefixScanner struct {
	row store.Scanner
	o   *MaintenanceOccurrence
}

// windowColumnCount is how many columns windowColumns selects.
const windowColumnCount = 23

func (p prefixScanner) Scan(dest ...any) error {
	var started, ended sql.NullTime
	var startedBy, endedBy sql.NullString
	o := p.o
	err := p.row.Scan(append(dest[:windowColumnCount:windowColumnCount], &o.ID, &o.WindowID, &o.PartnerID, &o.OrgID, &o.StartsAt,
		&o.EndsAt, &o.Status, &started, &ended, &startedBy, &endedBy)...)
	o.StartsAt, o.EndsAt = o.StartsAt.UTC(), o.EndsAt.UTC()
	o.StartedAt, o.EndedAt = store.TimePtr(started), store.TimePtr(ended)
	o.StartedBy, o.EndedBy = store.StringPtr(startedBy), store.StringPtr(endedBy)
	return err
}

// NextOccurrences returns, for each window of windowIDs in scope, its occurrence under way
// (active) or, without one, its next scheduled one, by window ID; a window with neither is
// left out (it is over, or cancelled). What a list of windows shows beside each.
func (s *Service) NextOccurrences(ctx context.Context, windowIDs []string) (map[string]MaintenanceOccurrence, error) {
	out := map[string]MaintenanceOccurrence{}
	ids := make([]string, 0, len(windowIDs))
	for _, id := range windowIDs {
		if store.ValidID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var a store.Args
	next := `o.id IN (SELECT (SELECT o2.id FROM maintenance_occurrences o2 WHERE o2.window_id = w.id AND o2.status IN (` +
		a.Add(Active) + `, ` + a.Add(Scheduled) + `) ORDER BY o2.starts_at LIMIT 1) FROM maintenance_windows w WHERE w.id IN ` + a.In(ids) + `)`
	list, err := store.QueryAll(ctx, s.db, `SELECT `+occurrenceColumns+` FROM maintenance_occurrences o WHERE `+
		store.Where(append([]string{next}, occurrenceFilter(access.ScopeFrom(ctx), &a)...)), a.Values(), scanOccurrence)
	if err != nil {
		return nil, fmt.Errorf("read next maintenance occurrences: %w", err)
	}
	for _, o := range list {
		out[o.WindowID] = o
	}
	return out, nil
}
