// Package incidents is incident response: tracked incidents that Gale opens itself (from
// critical alerts and detected threats, or by promoting a finding) and findings polled from
// two endpoint-detection (EDR) providers through connectors, merged into one feed ordered by
// severity (p1 first), then detection time (newest first).
//
// Both kinds live in one table, incidents, so the feed is one indexed scan in either
// database: a tracked incident is a row of kind tracked (source native); a finding a row of
// kind finding (source edr_a or edr_b), unique by its connector and the provider's ID. A
// promoted finding leaves the feed (in_feed false) and the tracked incident it opened takes
// its place, carrying its EDR status and console link. Status changes are conditional
// UPDATEs, so of concurrent callers exactly one wins and the others get 409.
package incidents

import (
	"database/sql"
	"log/slog"
	"net/http"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/clock"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Kinds of feed rows.
const (
	KindTracked = "tracked"
	KindFinding = "finding"
)

// Sources of feed rows: native (tracked incidents) and the two EDR providers.
const (
	SourceNative = "native"
	ProviderA    = "edr_a"
	ProviderB    = "edr_b"
)

// Origins of tracked incidents (what opened them); findings have origin edr.
const (
	OriginAlert   = "alert"
	OriginThreat  = "threat"
	OriginFinding = "finding"
	OriginManual  = "manual"
	originEDR     = "edr"
)

// Statuses of a tracked incident. closed is terminal; resolved may be reopened.
const (
	StatusOpen          = "open"
	StatusInvestigating = "investigating"
	StatusContained     = "contained"
	StatusResolved      = "resolved"
	StatusClosed        = "closed"
)

// Statuses of a finding: new while it is in the feed, promoted once a tracked incident
// took its place.
const (
	FindingNew      = "new"
	FindingPromoted = "promoted"
)

// CodeStatusConflict is the 409 of a status change that lost to another (the incident left
// the status the change was made from) or that the incident's status does not allow.
const CodeStatusConflict = "INCIDENT_STATUS_CONFLICT"

// CodeAlreadyPromoted is the 409 of promoting a finding that was promoted already.
const CodeAlreadyPromoted = "FINDING_ALREADY_PROMOTED"

// transitions lists the statuses each status may move to.
var transitions = map[string][]string{
	StatusOpen:          {StatusInvestigating, StatusContained, StatusResolved, StatusClosed},
	StatusInvestigating: {StatusContained, StatusResolved, StatusClosed},
	StatusContained:     {StatusInvestigating, StatusResolved, StatusClosed},
	StatusResolved:      {StatusOpen, StatusClosed},
	StatusClosed:        nil,
}

// severityNames maps a rank (1..4) to its name.
var severityNames = []string{"", "p1", "p2", "p3", "p4"}

func severityName(rank int) string {
	if rank < 1 || rank > 4 {
		return "p4"
	}
	return severityNames[rank]
}

func severityRank(name string) (int, bool) {
	for i := 1; i < len(severityNames); i++ {
		if severityNames[i] == name {
			return i, true
		}
	}
	return 0, false
}

// IncidentFeedRow is one row of the incident feed (spec §2): a tracked incident or a
// finding not yet promoted.
type IncidentFeedRow struct {
	ID                string    `json:"id" format:"uuid" doc:"The tracked incident (GET /incidents/{id}) or the finding (GET /incidents/findings/{id})."`
	OrgID             string    `json:"orgId" format:"uuid"`
	Kind              string    `json:"kind" enum:"tracked,finding"`
	Source            string    `json:"source" enum:"native,edr_a,edr_b"`
	SourceID          string    `json:"sourceId" doc:"Tracked: the alert or threat that opened it, the provider's ID of the promoted finding, or the incident's own ID when opened by hand. Finding: the provider's ID."`
	Title             string    `json:"title"`
	Severity          string    `json:"severity" enum:"p1,p2,p3,p4"`
	EDRStatus         *string   `json:"edrStatus" doc:"The provider's status of the finding (carried over by a promotion); null for incidents that no finding opened."`
	Status            string    `json:"status" doc:"Tracked: open, investigating, contained, resolved or closed. Finding: new."`
	DeviceID          string    `json:"deviceId" doc:"The Gale device concerned; empty when none (a finding whose host matches no device of the organization, an alert of no device)."`
	DetectedAt        time.Time `json:"detectedAt"`
	TrackedIncidentID *string   `json:"trackedIncidentId" doc:"Set on a tracked incident opened by promoting a finding (its own ID); null otherwise."`
	LinkOut           *string   `json:"linkOut" doc:"The provider console's page of the finding, when the provider gives one."`
}

// Incident is a tracked incident or a finding, with everything the feed row leaves out.
type Incident struct {
	IncidentFeedRow
	PartnerID   string     `json:"partnerId" format:"uuid"`
	Origin      string     `json:"origin" enum:"alert,threat,finding,manual,edr" doc:"What opened it: an alert, a threat, a promoted finding, a caller (manual); edr for findings."`
	OriginRef   *string    `json:"originRef" doc:"The alert, threat or finding row that opened a tracked incident."`
	ConnectorID *string    `json:"connectorId" doc:"Findings: the EDR connector that reported it (null once the connector is deleted)."`
	Hostname    *string    `json:"hostname" doc:"Findings: the host as the provider names it."`
	Description string     `json:"description"`
	CreatedBy   *string    `json:"createdBy"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	ResolvedAt  *time.Time `json:"resolvedAt" doc:"When it was last resolved or closed; null while open."`
}

const feedColumns = `i.id, i.org_id, i.kind, i.source, i.source_id, i.title, i.severity, i.edr_status, i.status, i.device_id,
	i.detected_at, i.tracked_incident_id, i.link_out`

const incidentColumns = feedColumns + `, i.partner_id, i.origin, i.origin_ref, i.connector_id, i.hostname, i.description,
	i.created_by, i.created_at, i.updated_at, i.resolved_at`

// feedRow scans into a row with reusable holders of its nullable columns.
func scanFeedRow(r store.Scanner, extra ...any) (IncidentFeedRow, error) {
	var x IncidentFeedRow
	var edr, device, tracked, link sql.NullString
	var rank int
	dest := append([]any{&x.ID, &x.OrgID, &x.Kind, &x.Source, &x.SourceID, &x.Title, &rank, &edr, &x.Status, &device, &x.DetectedAt,
		&tracked, &link}, extra...)
	if err := r.Scan(dest...); err != nil {
		return x, err
	}
	x.Severity, x.EDRStatus, x.DeviceID, x.TrackedIncidentID, x.LinkOut = severityName(rank), store.StringPtr(edr), device.String,
		store.StringPtr(tracked), store.StringPtr(link)
	x.DetectedAt = x.DetectedAt.UTC()
	return x, nil
}

func scanIncident(r store.Scanner) (Incident, error) {
	var x Incident
	var ref, conn, host, by sql.NullString
	var resolved sql.NullTime
	row, err := scanFeedRow(r, &x.PartnerID, &x.Origin, &ref, &conn, &host, &x.Description, &by, &x.CreatedAt, &x.UpdatedAt, &resolved)
	if err != nil {
		return x, err
	}
	x.IncidentFeedRow = row
	x.OriginRef, x.ConnectorID, x.Hostname, x.CreatedBy, x.ResolvedAt = store.StringPtr(ref), store.StringPtr(conn), store.StringPtr(host),
		store.StringPtr(by), store.TimePtr(resolved)
	x.CreatedAt, x.UpdatedAt = x.CreatedAt.UTC(), x.UpdatedAt.UTC()
	return x, nil
}

// Service is the incidents domain.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	box     *secrets.Box
	devices *devices.Service
	client  *http.Client
	// allowPrivate lets connectors reach private and loopback addresses
	// (WEBHOOK_ALLOW_PRIVATE_TARGETS).
	allowPrivate bool
	wake         func()
}

// Deps are what a Service needs.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Box seals the connectors' credentials.
	Box *secrets.Box
	// Devices finds the devices the connectors' findings name.
	Devices *devices.Service
	// Wake is called once a transaction that recorded events committed; nil for none.
	Wake func()
}

// Options are the settings of a Service.
type Options struct {
	// Client is the HTTP client of provider calls; nil: a guarded client (no private targets
	// unless AllowPrivateTargets).
	Client              *http.Client
	AllowPrivateTargets bool
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }
