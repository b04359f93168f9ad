// Package alerts raises alerts from device data and manages them. Alert rules (partner-wide
// or of one organization) hold conditions over heartbeat metrics, offline and silent agents
// and failed commands; they are evaluated in the heartbeat and command-result transactions
// of a device and by a periodic sweep. An alert moves through the states of the spec:
// active → acknowledged, suppressed, resolved or dismissed; resolved and dismissed are
// terminal. Every state change is one conditional UPDATE, so of concurrent callers exactly
// one wins and the others get 409.
package alerts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// Alert statuses. Open: active, acknowledged, suppressed. Terminal: resolved, dismissed.
const (
	StatusActive       = "active"
	StatusAcknowledged = "acknowledged"
	StatusSuppressed   = "suppressed"
	StatusResolved     = "resolved"
	StatusDismissed    = "dismissed"
)

var (
	statuses     = []string{StatusActive, StatusAcknowledged, StatusSuppressed, StatusResolved, StatusDismissed}
	openStatuses = []string{StatusActive, StatusAcknowledged, StatusSuppressed}
)

// Service is the alerts domain.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	devices *devices.Service
	opts    Options
	clock   clock.Clock
	// wakeEvents, when set, is called after a transaction that recorded alert events commits.
	wakeEvents func()
	// rules caches decoded rule sets for evaluation, by partner and organization; windows
	// remembers, by device, the history its last evaluation needed.
	rules   memo[ruleSet]
	windows memo[windows]
	// channels checks the notification channels a rule names (see ChannelCheck).
	channels ChannelCheck
	// hold reports whether a maintenance window in effect keeps alerts from a subject; nil:
	// none does.
	hold func(ctx context.Context, tx *sql.Tx, sub maintenance.Subject) (bool, error)
}

// held reports whether a maintenance window in effect keeps alerts from the subject: its
// organization, its site or one of its devices.
func (s *Service) held(ctx context.Context, tx *sql.Tx, sub maintenance.Subject) (bool, error) {
	if s.hold == nil {
		return false, nil
	}
	h, err := s.hold(ctx, tx, sub)
	if err != nil {
		return false, fmt.Errorf("check the maintenance windows: %w", err)
	}
	return h, nil
}

// Deps is what the alerts service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Wake, when set, is called after a transaction that recorded alert events commits (the
	// event dispatcher's Wake), so consumers hear of them at once rather than at their next poll.
	Wake func()
	// Maintenance keeps alerts back while a window that suppresses them covers what they
	// concern: the device of a rule's, a script's or a policy's alert; the organization, site
	// and devices of a monitor's or an SNMP device's. Nil holds none.
	Maintenance *maintenance.Service
	// Devices checks what a rule's targets name.
	Devices *devices.Service
	// Clock is the time alerts open, resolve and cool down on; nil: the system clock.
	Clock clock.Clock
}

// Options are the alert settings of the server configuration.
type Options struct {
	// MetricsRetention is how long the devices keep their heartbeat metrics history
	// (DEVICE_METRICS_RETENTION_HOURS): a threshold window cannot be longer. Zero means no limit.
	MetricsRetention time.Duration
}

func (s *Service) wake() {
	if s.wakeEvents != nil {
		s.wakeEvents()
	}
}

// New returns the alerts service.
func New(d Deps, opts Options) *Service {
	s := &Service{db: d.DB, logger: d.Logger, devices: d.Devices, opts: opts, wakeEvents: d.Wake, clock: clock.Or(d.Clock),
		rules: memo[ruleSet]{bound: 10000}, windows: memo[windows]{bound: 100000}}
	if m := d.Maintenance; m != nil {
		s.hold = func(ctx context.Context, tx *sql.Tx, sub maintenance.Subject) (bool, error) {
			return m.HeldSubject(ctx, tx, maintenance.Alerts, sub)
		}
	}
	return s
}

// Alert is the API view of an alert.
type Alert struct {
	ID              string          `json:"id" format:"uuid"`
	PartnerID       string          `json:"partnerId" format:"uuid"`
	OrgID           string          `json:"orgId" format:"uuid"`
	SiteID          *string         `json:"siteId"`
	DeviceID        *string         `json:"deviceId"`
	SourceType      string          `json:"sourceType" enum:"device,monitor,snmp_device" doc:"What raised the alert: a device (its rules, scripts and automations), a monitor or an SNMP device."`
	SourceID        *string         `json:"sourceId" doc:"The device, monitor or SNMP device that raised the alert."`
	RuleID          *string         `json:"ruleId" doc:"null once the rule is deleted."`
	Severity        string          `json:"severity" enum:"critical,high,medium,low,info"`
	Status          string          `json:"status" enum:"active,acknowledged,suppressed,resolved,dismissed" doc:"resolved and dismissed are terminal."`
	Title           string          `json:"title"`
	Message         string          `json:"message"`
	Context         json.RawMessage `json:"context" doc:"The observed values that opened the alert."`
	TriggeredAt     time.Time       `json:"triggeredAt"`
	AcknowledgedAt  *time.Time      `json:"acknowledgedAt"`
	AcknowledgedBy  *string         `json:"acknowledgedBy"`
	ResolvedAt      *time.Time      `json:"resolvedAt"`
	ResolvedBy      *string         `json:"resolvedBy" doc:"null with resolvedAt set: resolved automatically by the evaluation."`
	ResolutionNote  *string         `json:"resolutionNote"`
	SuppressedUntil *time.Time      `json:"suppressedUntil"`
	DismissedAt     *time.Time      `json:"dismissedAt"`
	DismissedBy     *string         `json:"dismissedBy" doc:"The first caller that dismissed the alert."`
	UpdatedAt       time.Time       `json:"updatedAt"`
}

const alertColumns = `a.id, a.partner_id, a.org_id, a.site_id, a.device_id, a.source_type, a.source_id, a.rule_id, a.severity, a.status, a.title, a.message,
	a.context, a.triggered_at, a.acknowledged_at, a.acknowledged_by, a.resolved_at, a.resolved_by, a.resolution_note,
	a.suppressed_until, a.dismissed_at, a.dismissed_by, a.updated_at`

// returnColumns are alertColumns unqualified, for RETURNING (SQLite allows no alias there).
var returnColumns = strings.ReplaceAll(alertColumns, "a.", "")

func scanAlert(row store.Scanner) (Alert, error) {
	var x Alert
	var site, device, source, rule, ackBy, resBy, note, disBy sql.NullString
	var ackAt, resAt, supp, disAt sql.NullTime
	var ctxJSON string
	err := row.Scan(&x.ID, &x.PartnerID, &x.OrgID, &site, &device, &x.SourceType, &source, &rule, &x.Severity, &x.Status, &x.Title, &x.Message,
		&ctxJSON, &x.TriggeredAt, &ackAt, &ackBy, &resAt, &resBy, &note, &supp, &disAt, &disBy, &x.UpdatedAt)
	if err != nil {
		return x, err
	}
	x.SiteID, x.DeviceID, x.SourceID, x.RuleID = store.StringPtr(site), store.StringPtr(device), store.StringPtr(source),
		store.StringPtr(rule)
	x.AcknowledgedBy, x.ResolvedBy, x.ResolutionNote, x.DismissedBy = store.StringPtr(ackBy), store.StringPtr(resBy),
		store.StringPtr(note), store.StringPtr(disBy)
	x.AcknowledgedAt, x.ResolvedAt, x.SuppressedUntil, x.DismissedAt = utcPtr(ackAt), utcPtr(resAt), utcPtr(supp), utcPtr(disAt)
	x.TriggeredAt, x.UpdatedAt = x.TriggeredAt.UTC(), x.UpdatedAt.UTC()
	x.Context = json.RawMessage(ctxJSON)
	if len(x.Context) == 0 {
		x.Context = json.RawMessage("{}")
	}
	return x, nil
}

func utcPtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

func alertFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "a.org_id", "a.partner_id")
}

// OpenCount is the scalar subquery counting the open alerts of the device in column
// deviceCol, with its arguments added to a.
func OpenCount(a *store.Args, deviceCol string) string {
	return "(SELECT COUNT(*) FROM alerts a WHERE a.device_id = " + deviceCol + " AND a.status IN " + a.In(openStatuses) + ")"
}

// ListFilter narrows a list of alerts.
type ListFilter struct {
	// Statuses keeps alerts in these statuses; empty means every status but dismissed.
	Statuses   []string
	Severities []string
	OrgID      string
	DeviceID   string
	RuleID     string
	// SourceType and SourceID keep the alerts of one kind of source, or of one source.
	SourceType string
	SourceID   string
}

// splitList parses a comma list of allowed values.
func splitList(field, v string, allowed []string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allowed, s) {
			return nil, apperr.Invalid(field, "use a comma list of "+strings.Join(allowed, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// List lists the alerts in scope, newest first. Dismissed alerts appear only when the
// status filter names them.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Alert, string, *int, error) {
	var a store.Args
	conds := []string{alertFilter(access.ScopeFrom(ctx), &a)}
	if len(f.Statuses) > 0 {
		conds = append(conds, "a.status IN "+a.In(f.Statuses))
	} else {
		conds = append(conds, "a.status <> "+a.Add(StatusDismissed))
	}
	if len(f.Severities) > 0 {
		conds = append(conds, "a.severity IN "+a.In(f.Severities))
	}
	for col, v := range map[string]string{"a.org_id": f.OrgID, "a.device_id": f.DeviceID, "a.rule_id": f.RuleID,
		"a.source_type": f.SourceType, "a.source_id": f.SourceID} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: alertColumns, From: " FROM alerts a", Conds: conds, Args: &a,
		SortKey: "a.id", SortID: "a.id", Desc: true}, page, scanAlert, func(x Alert) (string, string) { return x.ID, x.ID })
}

// Summary counts the open alerts in scope.
type Summary struct {
	Total      int            `json:"total" doc:"Open alerts: active, acknowledged and suppressed."`
	ByStatus   map[string]int `json:"byStatus" doc:"active, acknowledged, suppressed."`
	BySeverity map[string]int `json:"bySeverity" doc:"critical, high, medium, low, info."`
}

// Summarize counts the open alerts in scope by status and by severity.
func (s *Service) Summarize(ctx context.Context, orgID string) (Summary, error) {
	return s.SummarizeSource(ctx, orgID, "")
}

// SummarizeSource is Summarize of the alerts of one kind of source ("": every kind).
func (s *Service) SummarizeSource(ctx context.Context, orgID, sourceType string) (Summary, error) {
	out := Summary{ByStatus: map[string]int{}, BySeverity: map[string]int{}}
	for _, st := range openStatuses {
		out.ByStatus[st] = 0
	}
	for _, sv := range severities {
		out.BySeverity[sv] = 0
	}
	var a store.Args
	conds := []string{alertFilter(access.ScopeFrom(ctx), &a), "a.status IN " + a.In(openStatuses)}
	if orgID != "" {
		conds = append(conds, "a.org_id = "+a.Add(orgID))
	}
	if sourceType != "" {
		conds = append(conds, "a.source_type = "+a.Add(sourceType))
	}
	type count struct {
		status, severity string
		n                int
	}
	counts, err := store.QueryAll(ctx, s.db, `SELECT a.status, a.severity, COUNT(*) FROM alerts a WHERE `+store.Where(conds)+
		` GROUP BY a.status, a.severity`, a.Values(), func(sc store.Scanner) (c count, err error) {
		err = sc.Scan(&c.status, &c.severity, &c.n)
		return c, err
	})
	if err != nil {
		return out, fmt.Errorf("count open alerts: %w", err)
	}
	for _, c := range counts {
		out.Total += c.n
		out.ByStatus[c.status] += c.n
		out.BySeverity[c.severity] += c.n
	}
	return out, nil
}

// Get returns an alert in scope.
func (s *Service) Get(ctx context.Context, id string) (Alert, error) {
	return getAlert(ctx, s.db, access.ScopeFrom(ctx), id)
}

func getAlert(ctx context.Context, q store.Querier, scope access.Scope, id string) (Alert, error) {
	var a store.Args
	return store.ByID(ctx, q, "alert", `SELECT `+alertColumns+` FROM alerts a`, "a.id", id, &a,
		[]string{alertFilter(scope, &a)}, scanAlert)
}

// Actions of the alert state machine.
const (
	ActionAcknowledge = "acknowledge"
	ActionResolve     = "resolve"
	ActionSuppress    = "suppress"
	ActionDismiss     = "dismiss"
)

// Actions lists the transitions a caller can ask for.
var Actions = []string{ActionAcknowledge, ActionResolve, ActionSuppress, ActionDismiss}

// ActionPermission is the permission each action needs.
func ActionPermission(action string) access.Perm {
	if action == ActionAcknowledge {
		return access.AlertsAcknowledge
	}
	return access.AlertsWrite
}

// transition is one state change: the statuses it leaves and what it sets.
type transition struct {
	from  []string
	to    string
	event string
	audit string
}

var transitions = map[string]transition{
	ActionAcknowledge: {from: []string{StatusActive}, to: StatusAcknowledged, event: "alert.acknowledged", audit: "alert.acknowledge"},
	ActionResolve:     {from: openStatuses, to: StatusResolved, event: "alert.resolved", audit: "alert.resolve"},
	ActionSuppress:    {from: openStatuses, to: StatusSuppressed, event: "alert.suppressed", audit: "alert.suppress"},
	ActionDismiss: {from: []string{StatusActive, StatusAcknowledged, StatusSuppressed, StatusResolved}, to: StatusDismissed,
		event: "alert.dismissed", audit: "alert.dismiss"},
}

// ActionInput carries the optional arguments of a transition.
type ActionInput struct {
	// Note is the resolution note (resolve).
	Note *string
	// Until ends a suppression (suppress); nil suppresses until someone acts.
	Until *time.Time
}

// maxNote bounds a resolution note.
const maxNote = 2000

// Act moves an alert in scope through one transition as the calling principal. An alert
// that is not in a status the action leaves from gets 409 (CONFLICT), whether it was there
// already or a concurrent caller (or the auto-resolve evaluation) moved it first.
func (s *Service) Act(ctx context.Context, id, action string, in ActionInput) (Alert, error) {
	tr, ok := transitions[action]
	if !ok {
		return Alert{}, apperr.Invalid("action", "use one of "+strings.Join(Actions, ", "))
	}
	now := s.clock.Now()
	if in.Note != nil && len([]rune(*in.Note)) > maxNote {
		return Alert{}, apperr.Invalid("note", "at most 2000 characters")
	}
	if in.Until != nil && !in.Until.After(now) {
		return Alert{}, apperr.Invalid("until", "until must be in the future")
	}
	actor := actorID(ctx)
	var out Alert
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := getAlert(ctx, tx, access.ScopeFrom(ctx), id); err != nil {
			return err
		}
		ch := store.NewChanges(now)
		ch.Set("status", tr.to)
		switch action {
		case ActionAcknowledge:
			ch.Set("acknowledged_at", now)
			ch.Set("acknowledged_by", actor)
		case ActionResolve:
			ch.Set("resolved_at", now)
			ch.Set("resolved_by", actor)
			if in.Note != nil {
				ch.Set("resolution_note", strings.TrimSpace(*in.Note))
			}
		case ActionSuppress:
			var until any
			if in.Until != nil {
				until = in.Until.UTC().Truncate(time.Microsecond)
			}
			ch.Set("suppressed_until", until)
		case ActionDismiss:
			ch.Set("dismissed_at", now)
			ch.Set("dismissed_by", actor)
		}
		x, err := scanAlert(tx.QueryRowContext(ctx, `UPDATE alerts SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id)+
			` AND status IN `+ch.Args.In(tr.from)+` RETURNING `+returnColumns, ch.Args.Values()...))
		if errors.Is(err, sql.ErrNoRows) {
			cur, gerr := getAlert(ctx, tx, access.SystemScope(), id)
			if gerr != nil {
				return gerr
			}
			return apperr.Conflict("the alert is " + cur.Status + "; " + action + " needs it " + strings.Join(tr.from, ", "))
		}
		if err != nil {
			return fmt.Errorf("%s alert %s: %w", action, id, err)
		}
		out = x
		return record(ctx, tx, x, tr, nil)
	})
	if err != nil {
		return out, fmt.Errorf("act on alert: %w", err)
	}
	s.wake()
	return out, nil
}

// record audits a transition and records its event. actor overrides the request's principal
// (the system's own transitions).
func record(ctx context.Context, tx *sql.Tx, x Alert, tr transition, actor *audit.Actor) error {
	if err := audit.Record(ctx, tx, audit.Entry{Action: tr.audit, ResourceType: "alert", ResourceID: x.ID, ResourceName: x.Title,
		PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"status": x.Status}, Actor: actor}); err != nil {
		return fmt.Errorf("audit %s of alert %s: %w", tr.audit, x.ID, err)
	}
	if _, err := events.Record(ctx, tx, events.Event{Type: tr.event, PartnerID: x.PartnerID, OrgID: x.OrgID, ResourceType: "alert",
		ResourceID: x.ID}, x); err != nil {
		return fmt.Errorf("record %s of alert %s: %w", tr.event, x.ID, err)
	}
	return nil
}

var systemActor = &audit.Actor{Type: access.ActorSystem}

// actorID names the caller in acknowledgedBy, resolvedBy and dismissedBy: the user, or the
// API key or service principal.
func actorID(ctx context.Context) any {
	p := access.PrincipalFrom(ctx)
	switch {
	case p == nil:
		return nil
	case p.Kind == access.ActorUser && p.UserID != "":
		return p.UserID
	default:
		return p.ID
	}
}

// AlertBulkResult is the outcome for one alert of a bulk action.
type AlertBulkResult struct {
	AlertID string `json:"alertId"`
	Status  string `json:"status" enum:"ok,conflict,not_found"`
	Alert   *Alert `json:"alert,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Bulk applies one action to each alert in turn, each in its own transaction, and reports
// the outcome per alert.
func (s *Service) Bulk(ctx context.Context, action string, ids []string, in ActionInput) ([]AlertBulkResult, error) {
	if _, ok := transitions[action]; !ok {
		return nil, apperr.Invalid("action", "use one of "+strings.Join(Actions, ", "))
	}
	if len(ids) == 0 || len(ids) > 100 {
		return nil, apperr.Invalid("alertIds", "1 to 100 alert IDs")
	}
	out := make([]AlertBulkResult, 0, len(ids))
	for _, id := range ids {
		x, err := s.Act(ctx, id, action, in)
		r := AlertBulkResult{AlertID: id, Status: "ok"}
		if err == nil {
			r.Alert = &x
		} else if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindNotFound {
			r.Status, r.Error = "not_found", ae.Message
		} else if ok && ae.Kind == apperr.KindConflict {
			r.Status, r.Error = "conflict", ae.Message
		} else {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
