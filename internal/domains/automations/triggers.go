package automations

import (
	"context"
	"crypto/hmac"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// MissedWindow is how late a schedule occurrence may still fire: after a pause of the nodes,
// the latest missed occurrence fires once if it is at most this old; older and earlier
// missed occurrences are skipped.
const MissedWindow = 5 * time.Minute

// ScheduleEvery is how often the schedules are read.
const ScheduleEvery = 20 * time.Second

// RunSchedules starts the runs of schedule occurrences that are due on the clock. Any number
// of nodes may run it at once: the unique index on (automation, occurrence) lets one of them
// start each occurrence.
func (s *Service) RunSchedules(ctx context.Context) error {
	now := s.clock.Now()
	var a store.Args
	due, _, _, err := store.List(ctx, s.db, store.ListQuery{Columns: automationColumns, From: " FROM automations a",
		Conds: []string{"a.trigger_type = " + a.Add(TriggerSchedule), "a.enabled", "a.next_run_at <= " + a.Add(now)}, Args: &a,
		SortKey: "a.id", SortID: "a.id"}, store.Page{Limit: 500}, s.scanAutomation, func(x Automation) (string, string) { return x.ID, x.ID })
	if err != nil {
		return fmt.Errorf("read due schedules: %w", err)
	}
	for _, x := range due {
		if err := s.fireSchedule(ctx, x, now); err != nil {
			s.logger.WarnContext(ctx, "fire automation schedule", "automation", x.ID, "error", err)
		}
	}
	return nil
}

// fireSchedule starts the run of x's latest due occurrence, if recent enough, and moves its
// next occurrence past now.
func (s *Service) fireSchedule(ctx context.Context, x Automation, now time.Time) error {
	sched, err := clock.ParseCron(x.Trigger.Cron, x.Trigger.Timezone)
	if err != nil {
		return fmt.Errorf("read schedule of automation %s: %w", x.ID, err)
	}
	stored := x.NextRunAt.UTC()
	occ := stored
	if occ.Before(now.Add(-MissedWindow)) {
		occ = sched.Next(now.Add(-MissedWindow).Add(-time.Second))
	}
	for n := sched.Next(occ); !n.After(now); n = sched.Next(n) {
		occ = n
	}
	fire := !occ.After(now) && !occ.Before(now.Add(-MissedWindow))
	next := sched.Next(now)
	actx := access.WithPrincipal(ctx, actorFor(x.ID, x.Name, x.PartnerID, x.OrgID))
	var runID string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE automations SET next_run_at = $1 WHERE id = $2 AND next_run_at = $3`,
			next.UTC(), x.ID, stored); err != nil {
			return fmt.Errorf("move schedule of automation %s: %w", x.ID, err)
		}
		if !fire {
			return nil
		}
		occ := occ.UTC()
		runID, _, err = s.insertRun(actx, tx, x, start{by: StartedBySchedule, scheduledFor: &occ, conditions: true})
		return err
	})
	if err == nil && runID != "" {
		s.advance(ctx, runID)
	}
	return err
}

// Consumer starts the runs of event automations: for each event, the enabled automations of
// its tenant waiting for its type whose filter it matches. It also wakes the runner when a
// script execution ended, so the run that started it moves on at once.
func (s *Service) Consumer() events.Consumer {
	return events.Consumer{Name: "automations", Types: EventTypes, Handle: s.handle}
}

func (s *Service) handle(ctx context.Context, tx *sql.Tx, e events.Event) error {
	if e.Type == "script.completed" || e.Type == "script.failed" {
		defer s.Wake()
	}
	if e.PartnerID == "" {
		return nil
	}
	var a store.Args
	conds := []string{"a.trigger_type = " + a.Add(TriggerEvent), "a.enabled", "a.event_type = " + a.Add(e.Type),
		"a.partner_id = " + a.Add(e.PartnerID)}
	if e.OrgID != "" {
		conds = append(conds, "(a.org_id IS NULL OR a.org_id = "+a.Add(e.OrgID)+")")
	} else {
		conds = append(conds, "a.org_id IS NULL")
	}
	list, err := store.QueryAll(ctx, tx, `SELECT `+automationColumns+` FROM automations a WHERE `+store.Where(conds)+` ORDER BY a.id`,
		a.Values(), s.scanAutomation)
	if err != nil {
		return fmt.Errorf("read automations waiting for %s: %w", e.Type, err)
	}
	if len(list) == 0 {
		return nil
	}
	var data map[string]any
	_ = json.Unmarshal(e.Data, &data)
	facts := eventFacts(e, data)
	origin, err := originOf(ctx, tx, e, data)
	if err != nil {
		return err
	}
	started := false
	for _, x := range list {
		if !matches(x.Trigger.Filter, facts) {
			continue
		}
		// An automation never fires on what its own runs caused, and chains of automations
		// firing one another stop after a few links.
		if origin.automationID == x.ID || origin.depth+1 > maxChainDepth {
			continue
		}
		st := start{by: StartedByEvent, eventID: e.ID, originRunID: origin.runID, onlyDevice: facts["deviceId"], conditions: true,
			payload: map[string]any{"eventType": e.Type, "eventId": e.ID, "resourceType": e.ResourceType, "resourceId": e.ResourceID, "facts": facts}}
		if origin.runID != "" {
			st.depth = origin.depth + 1
		}
		actx := access.WithPrincipal(ctx, actorFor(x.ID, x.Name, x.PartnerID, x.OrgID))
		if _, _, err := s.insertRun(actx, tx, x, st); err != nil {
			return err
		}
		started = true
	}
	if started {
		s.Wake()
	}
	return nil
}

// eventFacts are the fields of an event a filter may test.
func eventFacts(e events.Event, data map[string]any) map[string]string {
	f := map[string]string{}
	for _, k := range filterKeys {
		if v, ok := data[k].(string); ok && v != "" {
			f[k] = v
		}
	}
	if e.OrgID != "" {
		f["orgId"] = e.OrgID
	}
	if e.ResourceType == "device" {
		f["deviceId"] = e.ResourceID
	}
	return f
}

// matches reports whether the facts hold every field of the filter.
func matches(filter, facts map[string]string) bool {
	for k, v := range filter {
		if facts[k] != v {
			return false
		}
	}
	return true
}

// origin is the automation run an event came from, if any.
type origin struct {
	runID, automationID string
	depth               int
}

// originOf finds the run behind an event: an automation run's own events, the execution of
// a script a run started, an alert a run raised. Unknown: a zero origin at depth -1.
func originOf(ctx context.Context, tx *sql.Tx, e events.Event, data map[string]any) (origin, error) {
	var query, key string
	switch {
	case e.ResourceType == "automation_run":
		query, key = `SELECT r.id, r.automation_id, r.depth FROM automation_runs r WHERE r.id = $1`, e.ResourceID
	case e.ResourceType == "script_execution":
		query, key = `SELECT r.id, r.automation_id, r.depth FROM automation_run_steps st JOIN automation_runs r ON r.id = st.run_id
			WHERE st.execution_id = $1`, e.ResourceID
	case e.ResourceType == "alert":
		if c, ok := data["context"].(map[string]any); ok {
			key, _ = c["automationRunId"].(string)
		}
		query = `SELECT r.id, r.automation_id, r.depth FROM automation_runs r WHERE r.id = $1`
	}
	o := origin{depth: -1}
	if query == "" || !store.ValidID(key) {
		return o, nil
	}
	err := tx.QueryRowContext(ctx, query+` LIMIT 1`, key).Scan(&o.runID, &o.automationID, &o.depth)
	if err == sql.ErrNoRows {
		return origin{depth: -1}, nil
	}
	if err != nil {
		return o, fmt.Errorf("find the run behind event %s: %w", e.ID, err)
	}
	return o, nil
}

// Webhook timing: how far a call's timestamp may be from the clock.
const webhookSkew = 5 * time.Minute

var errBadSignature = apperr.Unauthorized("the webhook call is not signed with the automation's secret, or its timestamp is stale")

// ReceiveWebhook starts a run of a webhook automation for a signed call: signature is
// sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>, as Gale signs outbound webhooks,
// and timestamp (Unix milliseconds) within 5 minutes of the clock. A call already accepted
// is refused (409 WEBHOOK_REPLAYED); anything unsigned, stale or for no such automation is 401.
func (s *Service) ReceiveWebhook(ctx context.Context, id, timestamp, signature string, body []byte) (AutomationRun, error) {
	if !store.ValidID(id) {
		return AutomationRun{}, errBadSignature
	}
	ms, err := strconv.ParseInt(timestamp, 10, 64)
	now := s.clock.Now()
	at := time.UnixMilli(ms)
	if err != nil || at.Before(now.Add(-webhookSkew)) || at.After(now.Add(webhookSkew)) {
		return AutomationRun{}, errBadSignature
	}
	var sealed sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT webhook_secret FROM automations WHERE id = $1 AND trigger_type = $2`, id,
		TriggerWebhook).Scan(&sealed); err == sql.ErrNoRows || (err == nil && !sealed.Valid) {
		return AutomationRun{}, errBadSignature
	} else if err != nil {
		return AutomationRun{}, fmt.Errorf("load webhook automation %s: %w", id, err)
	}
	secret, err := s.box.Open(sealed.String)
	if err != nil {
		return AutomationRun{}, fmt.Errorf("open webhook secret of automation %s: %w", id, err)
	}
	if !hmac.Equal([]byte(webhooks.Sign(secret, timestamp, body)), []byte(signature)) {
		return AutomationRun{}, errBadSignature
	}
	var payload map[string]any
	if err := json.Unmarshal(body, &payload); err != nil || payload == nil {
		return AutomationRun{}, apperr.Invalid("body", "the body is a JSON object")
	}
	var runID string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		if !x.Enabled {
			return errDisabled
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO automation_webhook_signatures (automation_id, signature, expires_at) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, id, signature, at.Add(webhookSkew).UTC())
		if err != nil {
			return fmt.Errorf("remember webhook signature: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.ConflictCode("WEBHOOK_REPLAYED", "this signed call was already accepted")
		}
		st := start{by: StartedByWebhook, payload: payload, conditions: true}
		if dev, ok := payload["deviceId"].(string); ok && store.ValidID(dev) {
			st.onlyDevice = dev
		}
		actx := access.WithPrincipal(ctx, actorFor(x.ID, x.Name, x.PartnerID, x.OrgID))
		runID, _, err = s.insertRun(actx, tx, x, st)
		return err
	})
	if err != nil {
		return AutomationRun{}, fmt.Errorf("receive webhook: %w", err)
	}
	s.advance(ctx, runID)
	r, err := loadRun(ctx, s.db, access.SystemScope(), runID)
	return r.AutomationRun, err
}

// PurgeSignatures forgets webhook signatures whose timestamp left the accepted skew (a call
// that old is refused anyway).
func (s *Service) PurgeSignatures(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM automation_webhook_signatures WHERE expires_at < $1`, s.clock.Now())
	if err != nil {
		return 0, fmt.Errorf("purge webhook signatures: %w", err)
	}
	return res.RowsAffected()
}
