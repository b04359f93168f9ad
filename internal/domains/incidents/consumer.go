package incidents

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// ConsumerName is the events consumer that opens tracked incidents.
const ConsumerName = "incidents"

// Event types the consumer opens incidents from.
const (
	EventAlertTriggered = "alert.triggered"
	EventThreatDetected = "threat.detected"
)

// threatSeverities maps a threat's severity to an incident's rank.
var threatSeverities = map[string]int{"critical": 1, "high": 2, "medium": 3, "low": 4}

// Consumer opens a tracked incident for every critical alert (p1) and every detected threat
// (critical p1, high p2, medium p3, low p4), once per alert or threat: the origin's ID is
// unique among tracked incidents, so an event offered twice opens one incident.
func (s *Service) Consumer() events.Consumer {
	return events.Consumer{Name: ConsumerName, Types: []string{EventAlertTriggered, EventThreatDetected}, Handle: s.handle}
}

// alertEvent is what the consumer reads of an alert.triggered event (the alert's JSON).
type alertEvent struct {
	ID          string    `json:"id"`
	PartnerID   string    `json:"partnerId"`
	OrgID       string    `json:"orgId"`
	DeviceID    *string   `json:"deviceId"`
	Severity    string    `json:"severity"`
	Title       string    `json:"title"`
	Message     string    `json:"message"`
	TriggeredAt time.Time `json:"triggeredAt"`
}

// threatEvent is what the consumer reads of a threat.detected event (the threat's JSON; its
// ID is the event's resource ID when the data lacks one).
type threatEvent struct {
	ID         string    `json:"id"`
	OrgID      string    `json:"orgId"`
	DeviceID   string    `json:"deviceId"`
	Name       string    `json:"name"`
	Severity   string    `json:"severity"`
	FilePath   string    `json:"filePath"`
	DetectedAt time.Time `json:"detectedAt"`
}

var consumerActor = &access.Principal{Kind: access.ActorSystem, ID: "incidents", Name: "incident response", Scope: access.SystemScope()}

// handle opens the incident of an event. An event it cannot read (no ID, no organization) is
// skipped, never retried for ever.
func (s *Service) handle(ctx context.Context, tx *sql.Tx, e events.Event) error {
	ctx = access.WithPrincipal(ctx, consumerActor)
	var t tracked
	switch e.Type {
	case EventAlertTriggered:
		var a alertEvent
		if err := json.Unmarshal(e.Data, &a); err != nil || a.Severity != "critical" || !store.ValidID(a.ID) {
			return nil
		}
		t = tracked{origin: OriginAlert, originRef: a.ID, sourceID: a.ID, partnerID: a.PartnerID, orgID: a.OrgID, severity: 1,
			title: "Critical alert: " + a.Title, description: a.Message, detectedAt: a.TriggeredAt, deviceID: store.Deref(a.DeviceID)}
	case EventThreatDetected:
		var th threatEvent
		if err := json.Unmarshal(e.Data, &th); err != nil {
			s.logger.WarnContext(ctx, "unreadable threat event", "event", e.ID, "error", err)
			return nil
		}
		if th.ID == "" {
			th.ID = e.ResourceID
		}
		rank, ok := threatSeverities[strings.ToLower(th.Severity)]
		if th.ID == "" || !ok {
			s.logger.WarnContext(ctx, "threat event without ID or known severity", "event", e.ID)
			return nil
		}
		title := "Threat detected: " + th.Name
		if th.Name == "" {
			title = "Threat detected"
		}
		desc := ""
		if th.FilePath != "" {
			desc = "File: " + th.FilePath
		}
		t = tracked{origin: OriginThreat, originRef: th.ID, sourceID: th.ID, partnerID: e.PartnerID, orgID: firstOf(e.OrgID, th.OrgID),
			severity: rank, title: title, description: desc, detectedAt: th.DetectedAt, deviceID: th.DeviceID}
	default:
		return nil
	}
	if t.deviceID != "" && !store.ValidID(t.deviceID) {
		t.deviceID = ""
	}
	if err := s.placeFromDevice(ctx, tx, &t); err != nil {
		return err
	}
	if store.ValidID(t.orgID) {
		// The organization decides the partner; a deleted one opens nothing.
		partner, ok, err := tenancy.OrgInScope(ctx, tx, access.SystemScope(), t.orgID)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		t.partnerID = partner
	}
	if !store.ValidID(t.orgID) || !store.ValidID(t.partnerID) {
		s.logger.WarnContext(ctx, "event without an organization; no incident opened", "event", e.ID, "type", e.Type)
		return nil
	}
	now := s.now()
	if t.detectedAt.IsZero() {
		t.detectedAt = e.OccurredAt
	}
	t.detectedAt = t.detectedAt.UTC().Truncate(time.Microsecond)
	t.id = store.NewID()
	if err := insertTracked(ctx, tx, t, now); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil // opened already
		}
		return err
	}
	x, err := systemRow(ctx, tx, t.id)
	if err != nil {
		return err
	}
	return s.opened(ctx, tx, x)
}

// placeFromDevice fills in the organization (and partner) of the incident from its device
// when the event did not give them, and drops a device of another organization.
func (s *Service) placeFromDevice(ctx context.Context, tx *sql.Tx, t *tracked) error {
	if t.deviceID == "" {
		return nil
	}
	owners, err := devices.Owners(ctx, tx, []string{t.deviceID})
	if err != nil {
		return fmt.Errorf("find the incident's device: %w", err)
	}
	o, ok := owners[t.deviceID]
	switch {
	case !ok:
		t.deviceID = ""
	case t.orgID == "":
		t.orgID, t.partnerID = o.OrgID, o.PartnerID
	case o.OrgID != t.orgID:
		t.deviceID = ""
	}
	return nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
