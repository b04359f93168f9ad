package vulnerabilities

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service keeps advisories, CVEs and findings.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	devices *devices.Service
	patches *patches.Service
}

// Deps are what a Service needs.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Devices sends the changelog commands.
	Devices *devices.Service
	// Patches approves and installs the patches that remediate findings.
	Patches *patches.Service
}

// New returns the vulnerabilities service.
func New(d Deps) *Service {
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Service{db: d.DB, logger: logger, clock: clock.Or(d.Clock), devices: d.Devices, patches: d.Patches}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const findingColumns = `f.id, f.partner_id, f.org_id, f.device_id, f.cve_id, f.package, f.group_key, f.installed_version,
	f.fixed_version, f.severity, c.cvss_score, f.known_exploited, c.epss_score, f.status, f.patch_id, f.first_seen, f.last_seen,
	f.accepted_until, f.note, f.decided_by, f.decided_at, f.patched_at`

const findingFrom = ` FROM vuln_findings f LEFT JOIN vuln_cves c ON c.cve_id = f.cve_id`

func scanFinding(r store.Scanner) (VulnFinding, error) {
	var f VulnFinding
	var cvss, epss sql.NullFloat64
	var patch, by sql.NullString
	var until, decided, patched sql.NullTime
	if err := r.Scan(&f.ID, &f.PartnerID, &f.OrgID, &f.DeviceID, &f.CVEID, &f.Package, &f.GroupKey, &f.InstalledVersion, &f.FixedVersion,
		&f.Severity, &cvss, &f.KnownExploited, &epss, &f.Status, &patch, &f.FirstSeen, &f.LastSeen, &until, &f.Note, &by, &decided,
		&patched); err != nil {
		return f, err
	}
	if cvss.Valid {
		f.CVSSScore = &cvss.Float64
	}
	if epss.Valid {
		f.EPSSScore = &epss.Float64
	}
	f.PatchID, f.DecidedBy = store.StringPtr(patch), store.StringPtr(by)
	f.AcceptedUntil, f.DecidedAt, f.PatchedAt = utcPtr(store.TimePtr(until)), utcPtr(store.TimePtr(decided)), utcPtr(store.TimePtr(patched))
	f.PatchReady = f.PatchID != nil
	f.FirstSeen, f.LastSeen = f.FirstSeen.UTC(), f.LastSeen.UTC()
	return f, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// findingFilter keeps the findings (alias f) in scope, of live organizations.
func findingFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "f.org_id", "f.partner_id"), tenancy.LiveOrg("f.org_id")}
}

func getFinding(ctx context.Context, q store.Querier, scope access.Scope, id string) (VulnFinding, error) {
	var a store.Args
	return store.ByID(ctx, q, "finding", `SELECT `+findingColumns+findingFrom, "f.id", id, &a, findingFilter(scope, &a), scanFinding)
}

// Get returns a finding in scope.
func (s *Service) Get(ctx context.Context, id string) (VulnFinding, error) {
	return getFinding(ctx, s.db, access.ScopeFrom(ctx), id)
}

func statusConflict(f VulnFinding, want string) error {
	return apperr.ConflictCode(CodeStatusConflict, fmt.Sprintf("the finding is %s, not %s: another caller may have moved it first", f.Status, want))
}

// transition moves one finding in scope from one of from to to, with a conditional update:
// a finding that left those states first (another caller won) is a 409.
//
// The finding's group is added to groups, or (groups nil) its by-software counts recomputed
// at once.
func (s *Service) transition(ctx context.Context, tx *sql.Tx, id string, from []string, to string, until *time.Time, note string, action string,
	groups groupSet) (VulnFinding, error) {
	scope := access.ScopeFrom(ctx)
	f, err := getFinding(ctx, tx, scope, id)
	if err != nil {
		return f, err
	}
	now := s.now()
	var a store.Args
	var untilArg any
	if until != nil {
		untilArg = until.UTC()
	}
	q := `UPDATE vuln_findings SET status = ` + a.Add(to) + `, accepted_until = ` + a.Add(untilArg) + `, note = COALESCE(NULLIF(` + a.Add(note) + `, ''), note)` +
		`, decided_by = ` + a.Add(access.ActorName(ctx)) + `, decided_at = ` + a.Add(now) + `, updated_at = ` + a.Add(now) +
		` WHERE id = ` + a.Add(id) + ` AND status IN ` + a.In(from) + ` RETURNING id`
	var got string
	err = tx.QueryRowContext(ctx, q, a.Values()...).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return f, statusConflict(f, from[0])
	}
	if err != nil {
		return f, fmt.Errorf("move finding %s to %s: %w", id, to, err)
	}
	out, err := getFinding(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return out, err
	}
	if groups != nil {
		groups.add(f.OrgID, f.GroupKey)
	} else if err := s.refreshGroup(ctx, tx, groupRef{f.OrgID, f.GroupKey}); err != nil {
		return out, err
	}
	return out, audit.Record(ctx, tx, audit.Entry{Action: "vulnerability." + action, ResourceType: "vulnerability_finding", ResourceID: id,
		ResourceName: f.CVEID + " " + f.Package, PartnerID: f.PartnerID, OrgID: f.OrgID,
		Details: map[string]any{"from": f.Status, "to": to, "acceptedUntil": untilArg, "note": note, "deviceId": f.DeviceID}})
}

func (s *Service) checkUntil(until *time.Time) error {
	if until != nil && !until.After(s.clock.Now()) {
		return apperr.Invalid("acceptedUntil", "acceptedUntil must be in the future")
	}
	return nil
}

func checkNote(note string) error {
	if len(note) > maxNote {
		return apperr.Invalid("note", "at most 2000 characters")
	}
	return nil
}

// AcceptRisk moves an open finding to accepted, until the time given (nil: no end).
func (s *Service) AcceptRisk(ctx context.Context, id string, in VulnAcceptRisk) (VulnFinding, error) {
	if err := firstErr(s.checkUntil(in.AcceptedUntil), checkNote(in.Note)); err != nil {
		return VulnFinding{}, err
	}
	var out VulnFinding
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		out, err = s.transition(ctx, tx, id, []string{StatusOpen}, StatusAccepted, in.AcceptedUntil, in.Note, "accept_risk", nil)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("accept risk of finding: %w", err)
	}
	return out, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Mitigate moves an open finding to mitigated.
func (s *Service) Mitigate(ctx context.Context, id string, in VulnMitigate) (VulnFinding, error) {
	if err := checkNote(in.Note); err != nil {
		return VulnFinding{}, err
	}
	var out VulnFinding
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		out, err = s.transition(ctx, tx, id, []string{StatusOpen}, StatusMitigated, nil, in.Note, "mitigate", nil)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("mitigate finding: %w", err)
	}
	return out, nil
}

// Reopen moves an accepted or mitigated finding back to open.
func (s *Service) Reopen(ctx context.Context, id string) (VulnFinding, error) {
	var out VulnFinding
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		out, err = s.transition(ctx, tx, id, []string{StatusAccepted, StatusMitigated}, StatusOpen, nil, "", "reopen", nil)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("reopen finding: %w", err)
	}
	return out, nil
}

// bulk applies one transition to each finding (1 to 200) in one transaction, reporting each.
func (s *Service) bulk(ctx context.Context, ids []string, to string, until *time.Time, note, action string) (VulnBulkResult, error) {
	if len(ids) == 0 || len(ids) > MaxBulk {
		return VulnBulkResult{}, apperr.Invalid("ids", "name 1 to 200 findings")
	}
	if err := firstErr(s.checkUntil(until), checkNote(note)); err != nil {
		return VulnBulkResult{}, err
	}
	res := VulnBulkResult{Succeeded: []string{}, Skipped: []VulnBulkSkip{}}
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		res = VulnBulkResult{Succeeded: []string{}, Skipped: []VulnBulkSkip{}}
		// One order for every caller, and the groups' counts at the end in their order: two
		// bulk actions over the same findings or groups never wait on each other in a cycle.
		// The answer lists the findings in the order sent.
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		groups := groupSet{}
		outcome := map[string]string{}
		for _, id := range sorted {
			_, err := s.transition(ctx, tx, id, []string{StatusOpen}, to, until, note, action, groups)
			switch {
			case err == nil:
				outcome[id] = ""
			case apperr.IsCode(err, apperr.CodeNotFound):
				outcome[id] = apperr.CodeNotFound
			case apperr.IsCode(err, CodeStatusConflict):
				outcome[id] = CodeStatusConflict
			default:
				return err
			}
		}
		for _, id := range ids {
			reason, ok := outcome[id]
			if !ok {
				continue
			}
			delete(outcome, id)
			if reason == "" {
				res.Succeeded = append(res.Succeeded, id)
			} else {
				res.Skipped = append(res.Skipped, VulnBulkSkip{ID: id, Reason: reason})
			}
		}
		return s.refreshGroups(ctx, tx, groups)
	})
	return res, err
}

// BulkAcceptRisk accepts the risk of open findings.
func (s *Service) BulkAcceptRisk(ctx context.Context, in VulnBulkAcceptRisk) (VulnBulkResult, error) {
	return s.bulk(ctx, in.IDs, StatusAccepted, in.AcceptedUntil, in.Note, "accept_risk")
}

// BulkMitigate records a mitigation of open findings.
func (s *Service) BulkMitigate(ctx context.Context, in VulnBulkMitigate) (VulnBulkResult, error) {
	return s.bulk(ctx, in.IDs, StatusMitigated, nil, in.Note, "mitigate")
}

// ReopenExpired reopens the accepted findings whose acceptance has ended, with a
// conditional update (a finding moved meanwhile is left alone).
func (s *Service) ReopenExpired(ctx context.Context) error {
	now := s.now()
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		groups := groupSet{}
		if err := groupsOf(ctx, tx, `UPDATE vuln_findings SET status = $1, accepted_until = NULL, decided_by = $2, decided_at = $3,
			updated_at = $3 WHERE status = $4 AND accepted_until IS NOT NULL AND accepted_until <= $3 RETURNING org_id, group_key`,
			[]any{StatusOpen, "system: acceptance expired", now, StatusAccepted}, groups); err != nil {
			return fmt.Errorf("reopen expired acceptances: %w", err)
		}
		return s.refreshGroups(ctx, tx, groups)
	})
}

// DeviceLeftOrg drops the findings of a device that left its organization (moved or
// decommissioned): the next correlation finds them again where it now is.
func (s *Service) DeviceLeftOrg(ctx context.Context, tx *sql.Tx, deviceID, _ string) error {
	groups := groupSet{}
	if err := groupsOf(ctx, tx, `DELETE FROM vuln_findings WHERE device_id = $1 RETURNING org_id, group_key`, []any{deviceID},
		groups); err != nil {
		return fmt.Errorf("drop the findings of device %s: %w", deviceID, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM vuln_device_marks WHERE device_id = $1`, deviceID); err != nil {
		return fmt.Errorf("drop the marks of device %s: %w", deviceID, err)
	}
	return s.refreshGroups(ctx, tx, groups)
}
