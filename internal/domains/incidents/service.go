package incidents

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// New returns the incidents service.
func New(d Deps, o Options) *Service {
	logger, wake := d.Logger, d.Wake
	if logger == nil {
		logger = slog.Default()
	}
	if wake == nil {
		wake = func() {}
	}
	if o.Client == nil {
		o.Client = webhooks.NewClient(o.AllowPrivateTargets)
	}
	return &Service{db: d.DB, logger: logger, clock: clock.Or(d.Clock), box: d.Box, devices: d.Devices, client: o.Client,
		allowPrivate: o.AllowPrivateTargets, wake: wake}
}

// getRow reads a row of either kind in scope (findings only for a caller who may see them).
func getRow(ctx context.Context, q store.Querier, id, kind, noun string) (Incident, error) {
	var a store.Args
	conds := append([]string{"i.kind = " + a.Add(kind)}, rowFilter(ctx, &a)...)
	return store.ByID(ctx, q, noun, `SELECT `+incidentColumns+` FROM incidents i`, "i.id", id, &a, conds, scanIncident)
}

// systemRow reads a row by ID whatever the scope.
func systemRow(ctx context.Context, q store.Querier, id string) (Incident, error) {
	x, err := scanIncident(q.QueryRowContext(ctx, `SELECT `+incidentColumns+` FROM incidents i WHERE i.id = $1`, id))
	if err != nil {
		return x, fmt.Errorf("load incident %s: %w", id, err)
	}
	return x, nil
}

// Get returns a tracked incident in scope.
func (s *Service) Get(ctx context.Context, id string) (Incident, error) {
	return getRow(ctx, s.db, id, KindTracked, "incident")
}

// GetFinding returns a finding in scope (promoted ones too); the caller needs devices:read.
func (s *Service) GetFinding(ctx context.Context, id string) (Incident, error) {
	if !seesFindings(ctx) {
		return Incident{}, apperr.Forbidden("missing permission " + string(access.DevicesRead))
	}
	return getRow(ctx, s.db, id, KindFinding, "finding")
}

// IncidentCreate is a tracked incident opened by hand.
type IncidentCreate struct {
	OrgID       string     `json:"orgId,omitempty" format:"uuid" doc:"Required unless the caller belongs to one organization."`
	Title       string     `json:"title" minLength:"1" maxLength:"500"`
	Description string     `json:"description,omitempty" maxLength:"10000" multiline:"true"`
	Severity    string     `json:"severity" enum:"p1,p2,p3,p4"`
	DeviceID    string     `json:"deviceId,omitempty" format:"uuid" doc:"A device of the organization."`
	DetectedAt  *time.Time `json:"detectedAt,omitempty" doc:"Default: now."`
}

// IncidentUpdate changes a tracked incident (PATCH): the fields sent.
type IncidentUpdate struct {
	Status      *string `json:"status,omitempty" enum:"open,investigating,contained,resolved,closed" doc:"open → investigating, contained, resolved, closed; investigating → contained, resolved, closed; contained → investigating, resolved, closed; resolved → open (reopen), closed; closed is terminal."`
	Severity    *string `json:"severity,omitempty" enum:"p1,p2,p3,p4"`
	Title       *string `json:"title,omitempty" minLength:"1" maxLength:"500"`
	Description *string `json:"description,omitempty" maxLength:"10000" multiline:"true"`
}

// Create opens a tracked incident by hand.
func (s *Service) Create(ctx context.Context, in IncidentCreate) (Incident, error) {
	rank, ok := severityRank(in.Severity)
	if !ok {
		return Incident{}, apperr.Invalid("severity", "severity is p1, p2, p3 or p4")
	}
	if strings.TrimSpace(in.Title) == "" {
		return Incident{}, apperr.Invalid("title", "title is required")
	}
	var out Incident
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "incident"})
		if err != nil {
			return err
		}
		if in.DeviceID != "" {
			owners, err := devices.Owners(ctx, tx, []string{in.DeviceID})
			if err != nil {
				return fmt.Errorf("check the incident's device: %w", err)
			}
			if o, ok := owners[in.DeviceID]; !ok || o.OrgID != at.OrgID {
				return apperr.Invalid("deviceId", "no such device in the organization")
			}
		}
		now := s.now()
		detected := now
		if in.DetectedAt != nil {
			detected = in.DetectedAt.UTC().Truncate(time.Microsecond)
		}
		id := store.NewID()
		if err := insertTracked(ctx, tx, tracked{id: id, partnerID: at.PartnerID, orgID: at.OrgID, sourceID: id, origin: OriginManual,
			originRef: id, title: in.Title, description: in.Description, severity: rank, deviceID: in.DeviceID, detectedAt: detected,
			createdBy: access.ActorName(ctx)}, now); err != nil {
			return err
		}
		if out, err = systemRow(ctx, tx, id); err != nil {
			return err
		}
		return s.opened(ctx, tx, out)
	})
	if err != nil {
		return out, fmt.Errorf("create incident: %w", err)
	}
	s.wake()
	return out, nil
}

// tracked is a new tracked incident.
type tracked struct {
	id, partnerID, orgID, sourceID, origin, originRef, title, description, deviceID string
	severity                                                                        int
	detectedAt                                                                      time.Time
	edrStatus, linkOut, trackedID                                                   any
	createdBy                                                                       any
}

// insertTracked adds a tracked incident unless its origin opened one already; it reports
// whether it did through the error sql.ErrNoRows.
func insertTracked(ctx context.Context, tx *sql.Tx, t tracked, now time.Time) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO incidents (id, partner_id, org_id, kind, source, source_id, origin, origin_ref, title,
		description, severity, status, edr_status, device_id, detected_at, tracked_incident_id, link_out, in_feed, created_by, created_at,
		updated_at) VALUES ($1, $2, $3, 'tracked', 'native', $4, $5, $6, $7, $8, $9, 'open', $10, $11, $12, $13, $14, $15, $16, $17, $17)
		ON CONFLICT (origin, origin_ref) DO NOTHING`, t.id, t.partnerID, t.orgID, t.sourceID, t.origin, t.originRef, truncate(t.title, 500),
		t.description, t.severity, t.edrStatus, store.NullIfEmpty(t.deviceID), t.detectedAt, t.trackedID, t.linkOut, true, t.createdBy, now)
	if err != nil {
		return fmt.Errorf("insert incident: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(err, sql.ErrNoRows)
	}
	return nil
}

// opened records the audit entry and the incident.opened event of a new tracked incident.
func (s *Service) opened(ctx context.Context, tx *sql.Tx, x Incident) error {
	if _, err := events.Record(ctx, tx, events.Event{Type: "incident.opened", PartnerID: x.PartnerID, OrgID: x.OrgID, ResourceType: "incident",
		ResourceID: x.ID}, x); err != nil {
		return err
	}
	return audit.Record(ctx, tx, audit.Entry{Action: "incident.open", ResourceType: "incident", ResourceID: x.ID, ResourceName: x.Title,
		PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"origin": x.Origin, "originRef": x.OriginRef, "severity": x.Severity}})
}

// Update changes a tracked incident. A status change is a conditional UPDATE from the status
// read: when another change moved it first, or the status does not allow the move, 409
// INCIDENT_STATUS_CONFLICT.
func (s *Service) Update(ctx context.Context, id string, in IncidentUpdate) (Incident, error) {
	var out Incident
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := getRow(ctx, tx, id, KindTracked, "incident")
		if err != nil {
			return err
		}
		now := s.now()
		ch := store.NewChanges(now)
		details := map[string]any{}
		if in.Severity != nil {
			rank, ok := severityRank(*in.Severity)
			if !ok {
				return apperr.Invalid("severity", "severity is p1, p2, p3 or p4")
			}
			ch.Set("severity", rank)
			details["severity"] = *in.Severity
		}
		if in.Title != nil {
			if strings.TrimSpace(*in.Title) == "" {
				return apperr.Invalid("title", "title cannot be empty")
			}
			ch.Set("title", *in.Title)
			details["title"] = *in.Title
		}
		if in.Description != nil {
			ch.Set("description", *in.Description)
		}
		action := "incident.update"
		cond := "id = " + ch.Args.Add(id)
		if in.Status != nil && *in.Status != x.Status {
			to := *in.Status
			if _, known := transitions[to]; !known {
				return apperr.Invalid("status", "status is open, investigating, contained, resolved or closed")
			}
			if !slices.Contains(transitions[x.Status], to) {
				return apperr.ConflictCode(CodeStatusConflict, fmt.Sprintf("an incident that is %s cannot become %s", x.Status, to))
			}
			ch.Set("status", to)
			switch to {
			case StatusResolved, StatusClosed:
				ch.Set("resolved_at", now)
			case StatusOpen:
				ch.Set("resolved_at", nil)
			}
			cond += " AND status = " + ch.Args.Add(x.Status)
			details["status"], details["from"] = to, x.Status
			action = "incident.status"
		} else if in.Status != nil {
			return apperr.ConflictCode(CodeStatusConflict, "the incident is "+x.Status+" already")
		}
		res, err := tx.ExecContext(ctx, `UPDATE incidents SET `+ch.SQL()+` WHERE `+cond, ch.Args.Values()...)
		if err != nil {
			return fmt.Errorf("update incident %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("update incident %s: %w", id, err)
		} else if n == 0 {
			return apperr.ConflictCode(CodeStatusConflict, "the incident's status changed meanwhile; reload it and retry")
		}
		if out, err = systemRow(ctx, tx, id); err != nil {
			return err
		}
		if action == "incident.status" {
			if _, err := events.Record(ctx, tx, events.Event{Type: "incident." + out.Status, PartnerID: out.PartnerID, OrgID: out.OrgID,
				ResourceType: "incident", ResourceID: id}, out); err != nil {
				return err
			}
		}
		return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "incident", ResourceID: id, ResourceName: out.Title,
			PartnerID: out.PartnerID, OrgID: out.OrgID, Details: details})
	})
	if err != nil {
		return out, fmt.Errorf("update incident: %w", err)
	}
	s.wake()
	return out, nil
}

// Promote opens a tracked incident from a finding: the incident takes the finding's place in
// the feed (the finding leaves it), with its title, severity, device, detection time, EDR
// status and console link, and names itself in trackedIncidentId. A finding promoted
// already is 409 FINDING_ALREADY_PROMOTED.
func (s *Service) Promote(ctx context.Context, id string) (Incident, error) {
	if !seesFindings(ctx) {
		return Incident{}, apperr.Forbidden("missing permission " + string(access.DevicesRead))
	}
	var out Incident
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		f, err := getRow(ctx, tx, id, KindFinding, "finding")
		if err != nil {
			return err
		}
		incID, now := store.NewID(), s.now()
		res, err := tx.ExecContext(ctx, `UPDATE incidents SET in_feed = $1, status = $2, tracked_incident_id = $3, updated_at = $4
			WHERE id = $5 AND tracked_incident_id IS NULL`, false, FindingPromoted, incID, now, id)
		if err != nil {
			return fmt.Errorf("promote finding %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("promote finding %s: %w", id, err)
		} else if n == 0 {
			return apperr.ConflictCode(CodeAlreadyPromoted, "the finding was promoted already")
		}
		rank, _ := severityRank(f.Severity)
		desc := f.Description
		if f.Hostname != nil {
			desc = strings.TrimSpace(desc + "\nHost: " + *f.Hostname)
		}
		if err := insertTracked(ctx, tx, tracked{id: incID, partnerID: f.PartnerID, orgID: f.OrgID, sourceID: f.SourceID, origin: OriginFinding,
			originRef: id, title: f.Title, description: desc, severity: rank, deviceID: f.DeviceID, detectedAt: f.DetectedAt, edrStatus: f.EDRStatus,
			linkOut: f.LinkOut, trackedID: incID, createdBy: access.ActorName(ctx)}, now); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return apperr.ConflictCode(CodeAlreadyPromoted, "the finding was promoted already")
			}
			return err
		}
		if out, err = systemRow(ctx, tx, incID); err != nil {
			return err
		}
		return s.opened(ctx, tx, out)
	})
	if err != nil {
		return out, fmt.Errorf("promote finding to incident: %w", err)
	}
	s.wake()
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
