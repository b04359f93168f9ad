package pam

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

const requestColumns = `q.id, q.partner_id, q.org_id, q.site_id, q.device_id, q.local_id, q.subject_user, q.subject_uid, q.subject_groups,
	q.path, q.sha256, q.signer, q.signer_thumbprint, q.parent_image, q.command_line, q.grant_mode, q.status, q.decided_via, q.rule_id,
	q.decided_by, q.decided_at, q.reason, q.duration_minutes, q.expires_at, q.requested_at`

// request is a stored request with the agent's correlation ID.
type request struct {
	PAMElevationRequest
	localID string
}

func (s *Service) scanRequest(row store.Scanner) (request, error) {
	var r request
	var site, rule, by sql.NullString
	var decided, expires sql.NullTime
	var groups string
	if err := row.Scan(&r.ID, &r.PartnerID, &r.OrgID, &site, &r.DeviceID, &r.localID, &r.User, &r.UID, &groups, &r.Path, &r.SHA256,
		&r.Signer, &r.SignerThumbprint, &r.ParentImage, &r.CommandLine, &r.Grant, &r.Status, &r.DecidedVia, &rule, &by, &decided,
		&r.Reason, &r.DurationMinutes, &expires, &r.RequestedAt); err != nil {
		return r, err
	}
	r.SiteID, r.RuleID, r.DecidedBy = store.StringPtr(site), store.StringPtr(rule), store.StringPtr(by)
	if decided.Valid {
		t := decided.Time.UTC()
		r.DecidedAt = &t
	}
	if expires.Valid {
		t := expires.Time.UTC()
		r.ExpiresAt = &t
	}
	r.RequestedAt = r.RequestedAt.UTC()
	var err error
	if r.Groups, err = store.DecodeStrings(groups); err != nil {
		return r, fmt.Errorf("read elevation request %s: %w", r.ID, err)
	}
	if r.Groups == nil {
		r.Groups = []string{}
	}
	r.Active = r.Status == StatusApproved && r.ExpiresAt != nil && r.ExpiresAt.After(s.now())
	return r, nil
}

func (s *Service) scanPublic(row store.Scanner) (PAMElevationRequest, error) {
	r, err := s.scanRequest(row)
	return r.PAMElevationRequest, err
}

func (s *Service) getRequest(ctx context.Context, q store.Querier, scope access.Scope, id string) (request, error) {
	var a store.Args
	return store.ByID(ctx, q, "elevation request", `SELECT `+requestColumns+` FROM pam_requests q`, "q.id", id, &a, []string{scope.OrgFilter(&a, "q.org_id", "q.partner_id"), tenancy.LiveOrg("q.org_id")}, s.scanRequest)
}

// GetRequest returns an elevation request in scope.
func (s *Service) GetRequest(ctx context.Context, id string) (PAMElevationRequest, error) {
	r, err := s.getRequest(ctx, s.db, access.ScopeFrom(ctx), id)
	return r.PAMElevationRequest, err
}

// RequestFilter narrows ListRequests.
type RequestFilter struct {
	Status, OrgID, SiteID, DeviceID, User, RuleID string
	// Active keeps approved requests that have not expired.
	Active bool
}

// ListRequests lists the elevation requests in scope, newest first.
func (s *Service) ListRequests(ctx context.Context, f RequestFilter, page store.Page) ([]PAMElevationRequest, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "q.org_id", "q.partner_id"), tenancy.LiveOrg("q.org_id")}
	for col, v := range map[string]string{"q.status": f.Status, "q.org_id": f.OrgID, "q.site_id": f.SiteID, "q.device_id": f.DeviceID,
		"q.rule_id": f.RuleID} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	if f.User != "" {
		conds = append(conds, "lower(q.subject_user) = "+a.Add(strings.ToLower(f.User)))
	}
	if f.Active {
		conds = append(conds, "q.status = "+a.Add(StatusApproved), "q.expires_at > "+a.Add(s.now()))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: requestColumns, From: " FROM pam_requests q", Conds: conds, Args: &a,
		SortKey: "q.id", SortID: "q.id", Desc: true}, page, s.scanPublic, func(r PAMElevationRequest) (string, string) { return r.ID, r.ID })
}

// ruleSet returns the organization's compiled rules, rebuilt when its rules_version moved
// since they were compiled (read in q, so a decision sees what its transaction sees).
func (s *Service) ruleSet(ctx context.Context, q store.Querier, orgID string) (*ruleSet, error) {
	var version int64
	verdict := defaultDefaultVerdict
	err := q.QueryRowContext(ctx, `SELECT rules_version, default_verdict FROM pam_config WHERE org_id = $1`, orgID).Scan(&version, &verdict)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read pam rules version of %s: %w", orgID, err)
	}
	s.mu.Lock()
	rs, ok := s.cache[orgID]
	s.mu.Unlock()
	if ok && rs.version == version {
		return rs, nil
	}
	rs, err = loadRuleSet(ctx, q, orgID)
	if err != nil {
		return nil, err
	}
	rs.version, rs.defaultVerdict = version, verdict
	s.mu.Lock()
	if cur, ok := s.cache[orgID]; !ok || cur.version <= version {
		s.cache[orgID] = rs
	}
	s.mu.Unlock()
	return rs, nil
}

func loadRuleSet(ctx context.Context, q store.Querier, orgID string) (*ruleSet, error) {
	type signerGroup struct {
		id  string
		set *signerSet
	}
	groupRows, err := store.QueryAll(ctx, q, `SELECT id, signers, thumbprints FROM pam_signer_groups WHERE org_id = $1`, []any{orgID},
		func(r store.Scanner) (signerGroup, error) {
			var g signerGroup
			var signers, thumbs string
			if err := r.Scan(&g.id, &signers, &thumbs); err != nil {
				return g, err
			}
			g.set = compileGroup(signers, thumbs)
			return g, nil
		})
	if err != nil {
		return nil, fmt.Errorf("load signer groups of %s: %w", orgID, err)
	}
	groups := make(map[string]*signerSet, len(groupRows))
	for _, g := range groupRows {
		groups[g.id] = g.set
	}
	rules, err := store.QueryAll(ctx, q, `SELECT `+ruleColumns+` FROM pam_rules r WHERE r.org_id = $1 AND r.enabled
		ORDER BY r.priority, r.created_at, r.id`, []any{orgID}, scanRule)
	if err != nil {
		return nil, fmt.Errorf("load pam rules of %s: %w", orgID, err)
	}
	rs := &ruleSet{rules: make([]compiled, 0, len(rules))}
	for _, r := range rules {
		rs.rules = append(rs.rules, compile(r, groups))
	}
	return rs, nil
}

func compileGroup(signers, thumbs string) *signerSet {
	g := &signerSet{thumbprints: map[string]bool{}}
	names, _ := store.DecodeStrings(signers)
	for _, n := range names {
		g.signers = append(g.signers, glob(strings.ToLower(n)))
	}
	tps, _ := store.DecodeStrings(thumbs)
	for _, t := range tps {
		g.thumbprints[strings.ToLower(t)] = true
	}
	return g
}

// Decide matches a request of the organization against its rules (from the cache).
func (s *Service) Decide(ctx context.Context, orgID string, subj Subject) (Verdict, error) {
	rs, err := s.ruleSet(ctx, s.db, orgID)
	if err != nil {
		return Verdict{}, err
	}
	return rs.decide(subj), nil
}

// systemCtx acts as the PAM system for the commands it queues.
func systemCtx(ctx context.Context) context.Context {
	return access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, ID: "pam", Name: "privileged access management",
		Scope: access.SystemScope(), Permissions: access.Permissions{string(access.DevicesRead), string(access.DevicesExecute)}})
}

// queue records the decision command for the request's agent in tx.
func (s *Service) queue(ctx context.Context, tx *sql.Tx, r request, decision, reason string) ([]devices.DeviceCommand, error) {
	d := agentproto.ElevationDecision{LocalID: r.localID, RequestID: r.ID, Decision: decision, Reason: reason, ExpiresAt: r.ExpiresAt,
		Grant: r.Grant, User: r.User, Path: r.Path}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	out, err := s.devices.SendBulkIn(systemCtx(ctx), tx, devices.BulkInput{DeviceIDs: []string{r.DeviceID}, Audited: true,
		CommandInput: devices.CommandInput{Type: agentproto.CommandElevationDecision, Payload: raw}})
	if err != nil {
		return nil, err
	}
	for _, it := range append(out.Skipped, out.Failed...) {
		s.logger.WarnContext(ctx, "the elevation decision was not queued for the device", "requestId", r.ID, "deviceId", r.DeviceID,
			"code", it.Code, "reason", it.Reason)
	}
	return out.Commands, nil
}

func validateDecision(payload json.RawMessage, _ string) (any, error) {
	var d agentproto.ElevationDecision
	if err := json.Unmarshal(payload, &d); err != nil {
		return nil, apperr.Invalid("payload", "not an elevation decision")
	}
	switch d.Decision {
	case agentproto.ElevationPending, agentproto.ElevationApproved, agentproto.ElevationDenied, agentproto.ElevationIgnored,
		agentproto.ElevationRevoked, agentproto.ElevationExpired:
	default:
		return nil, apperr.Invalid("payload.decision", "unknown decision")
	}
	if !store.ValidID(d.RequestID) {
		return nil, apperr.Invalid("payload.requestId", "not a request ID")
	}
	return d, nil
}

// checkReport bounds what an agent reports.
func checkReport(r *agentproto.ElevationRequest) error {
	switch {
	case !store.ValidID(r.LocalID):
		return errors.New("localId is not a UUID")
	case r.User == "" || len(r.User) > 256:
		return errors.New("user is empty or too long")
	case !strings.HasPrefix(r.Path, "/") || len(r.Path) > agentproto.MaxElevationPath:
		return errors.New("path is not absolute or too long")
	case !hex64.MatchString(r.SHA256):
		return errors.New("sha256 is not 64 hex characters")
	case len(r.CommandLine) > agentproto.MaxElevationCommandLine || len(r.ParentImage) > agentproto.MaxElevationPath:
		return errors.New("commandLine or parentImage too long")
	case len(r.Groups) > agentproto.MaxElevationGroups || len(r.Signer) > 1024 || len(r.SignerThumbprint) > 128:
		return errors.New("too many groups, or signer too long")
	case r.UID < 0:
		return errors.New("negative uid")
	}
	for _, s := range append([]string{r.User, r.Path, r.CommandLine, r.ParentImage, r.Signer, r.SignerThumbprint}, r.Groups...) {
		if strings.ContainsRune(s, 0) {
			return errors.New("a field holds NUL")
		}
	}
	return nil
}

var verdictStatus = map[string]string{VerdictAutoApprove: StatusApproved, VerdictAutoDeny: StatusDenied,
	VerdictRequireApproval: StatusPending, VerdictIgnore: StatusIgnored}

// HandleReport decides an elevation request an agent reported: the first matching rule's
// verdict (else the organization's default) makes it approved, denied, ignored or pending;
// the agent is told in the same transaction.
func (s *Service) HandleReport(ctx context.Context, a devices.Agent, payload json.RawMessage) error {
	var in agentproto.ElevationRequest
	if err := json.Unmarshal(payload, &in); err != nil {
		return fmt.Errorf("elevation request of device %s: %w", a.DeviceID, err)
	}
	if err := checkReport(&in); err != nil {
		s.logger.WarnContext(ctx, "an elevation request was refused", "deviceId", a.DeviceID, "error", err)
		return nil
	}
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var dup int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pam_requests WHERE device_id = $1 AND local_id = $2`, a.DeviceID, in.LocalID).
			Scan(&dup); err != nil {
			return fmt.Errorf("look for elevation request %s of device %s: %w", in.LocalID, a.DeviceID, err)
		}
		if dup > 0 {
			return nil // a report sent again (the agent's outbox): decided already
		}
		sites, err := devices.Sites(ctx, tx, []string{a.DeviceID})
		if err != nil {
			return fmt.Errorf("site of device %s: %w", a.DeviceID, err)
		}
		now := s.now()
		rs, err := s.ruleSet(ctx, tx, a.OrgID)
		if err != nil {
			return err
		}
		r := request{localID: in.LocalID, PAMElevationRequest: PAMElevationRequest{ID: store.NewID(), PartnerID: a.PartnerID,
			OrgID: a.OrgID, SiteID: nonEmpty(sites[a.DeviceID]), DeviceID: a.DeviceID, User: in.User, UID: in.UID, Groups: in.Groups,
			Path: in.Path, SHA256: strings.ToLower(in.SHA256), Signer: in.Signer, SignerThumbprint: strings.ToLower(in.SignerThumbprint),
			ParentImage: in.ParentImage, CommandLine: in.CommandLine, Grant: in.Grant, RequestedAt: now}}
		v := rs.decide(Subject{SiteID: sites[a.DeviceID], User: in.User, Path: in.Path, SHA256: in.SHA256, Signer: in.Signer,
			Thumbprint: in.SignerThumbprint, Parent: in.ParentImage, CommandLine: in.CommandLine, Groups: in.Groups, At: now})
		r.Status, r.DecidedVia, r.RuleID, r.DurationMinutes = verdictStatus[v.Verdict], ViaDefault, nonEmpty(v.RuleID), v.ApprovalMinutes
		if v.RuleID != "" {
			r.DecidedVia = ViaRule
		}
		if r.Status != StatusPending {
			r.DecidedAt = &now
			r.Reason = "decided by the organization's default verdict (" + v.Verdict + ")"
			if v.RuleID != "" {
				r.Reason = "decided by rule " + v.RuleID + " (" + v.Verdict + ")"
			}
		}
		if r.Status == StatusApproved {
			exp := now.Add(time.Duration(r.DurationMinutes) * time.Minute)
			r.ExpiresAt = &exp
			r.Active = true
		}
		if r.Groups == nil {
			r.Groups = []string{}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO pam_requests (id, partner_id, org_id, site_id, device_id, local_id, subject_user,
			subject_uid, subject_groups, path, sha256, signer, signer_thumbprint, parent_image, command_line, grant_mode, status, decided_via,
			rule_id, decided_at, reason, duration_minutes, expires_at, requested_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
			$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`, r.ID, r.PartnerID, r.OrgID, store.NullIfEmpty(sites[a.DeviceID]),
			r.DeviceID, r.localID, r.User, r.UID, store.EncodeStrings(r.Groups), r.Path, r.SHA256, r.Signer, r.SignerThumbprint, r.ParentImage,
			r.CommandLine, r.Grant, r.Status, r.DecidedVia, store.NullIfEmpty(v.RuleID), r.DecidedAt, r.Reason, r.DurationMinutes, r.ExpiresAt,
			now); err != nil {
			return fmt.Errorf("insert elevation request: %w", err)
		}
		if _, err := events.Record(ctx, tx, events.Event{Type: EventRequested, PartnerID: r.PartnerID, OrgID: r.OrgID,
			ResourceType: "pam_elevation_request", ResourceID: r.ID}, r.PAMElevationRequest); err != nil {
			return err
		}
		cmds, err = s.queue(ctx, tx, r, r.Status, r.Reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("handle elevation request: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	s.wake()
	return nil
}

// isRequester reports whether the caller is the request's subject: its user name equals the
// caller's email, the email's local part or the caller's name (any case).
func isRequester(p *access.Principal, user string) bool {
	if p == nil {
		return false
	}
	u := strings.ToLower(user)
	email := strings.ToLower(p.Email)
	local, _, _ := strings.Cut(email, "@")
	return u != "" && (u == email || u == local || u == strings.ToLower(p.Name))
}

// Respond approves or denies a pending request: 409 when it is no longer pending (decided,
// timed out, or another technician answered first), 403 when the caller is its requester.
func (s *Service) Respond(ctx context.Context, id string, in PAMRespondInput) (PAMElevationRequest, error) {
	if in.Decision != "approve" && in.Decision != "deny" {
		return PAMElevationRequest{}, apperr.Invalid("decision", "decision must be approve or deny")
	}
	if in.DurationMinutes != nil && (*in.DurationMinutes < 1 || *in.DurationMinutes > maxApprovalMinutes) {
		return PAMElevationRequest{}, apperr.Invalid("durationMinutes", fmt.Sprintf("durationMinutes must be 1 to %d", maxApprovalMinutes))
	}
	reason := ""
	if in.Reason != nil {
		reason = strings.TrimSpace(*in.Reason)
		if len(reason) > maxReason {
			return PAMElevationRequest{}, apperr.Invalid("reason", fmt.Sprintf("at most %d characters", maxReason))
		}
	}
	var out request
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := s.getRequest(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if in.Decision == "approve" && isRequester(access.PrincipalFrom(ctx), r.User) {
			return apperr.ForbiddenCode(CodeSelfApproval, "a requester cannot approve their own elevation request")
		}
		notPending := apperr.ConflictCode(CodeNotPending, "the request is no longer pending (it is "+r.Status+")")
		if r.Status != StatusPending {
			return notPending
		}
		now := s.now()
		status, action := StatusDenied, "pam.request.deny"
		var expires any
		duration := r.DurationMinutes
		if in.Decision == "approve" {
			status, action = StatusApproved, "pam.request.approve"
			store.Assign(&duration, in.DurationMinutes)
			expires = now.Add(time.Duration(duration) * time.Minute)
		}
		res, err := tx.ExecContext(ctx, `UPDATE pam_requests SET status = $1, decided_via = $2, decided_by = $3, decided_at = $4, reason = $5,
			duration_minutes = $6, expires_at = $7 WHERE id = $8 AND status = $9`, status, ViaTechnician, access.ActorName(ctx), now, reason,
			duration, expires, id, StatusPending)
		if err != nil {
			return fmt.Errorf("decide elevation request %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, notPending)
		}
		out, cmds, err = s.settle(ctx, tx, id, EventDecided, action, reason, map[string]any{"durationMinutes": duration})
		return err
	})
	if err != nil {
		return PAMElevationRequest{}, fmt.Errorf("answer elevation request: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	s.wake()
	return out.PAMElevationRequest, nil
}

// settle follows a technician's transition of request id in its transaction: the request as
// it is now, its event and audit entry (details with the device and reason added), and the
// decision queued to the device.
func (s *Service) settle(ctx context.Context, tx *sql.Tx, id, event, action, reason string, details map[string]any) (request,
	[]devices.DeviceCommand, error) {
	out, err := s.getRequest(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return out, nil, err
	}
	if _, err := events.Record(ctx, tx, events.Event{Type: event, PartnerID: out.PartnerID, OrgID: out.OrgID,
		ResourceType: "pam_elevation_request", ResourceID: id}, out.PAMElevationRequest); err != nil {
		return out, nil, err
	}
	details["deviceId"], details["reason"] = out.DeviceID, reason
	if err := audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "pam_elevation_request", ResourceID: id,
		ResourceName: out.User + ": " + out.Path, PartnerID: out.PartnerID, OrgID: out.OrgID, Details: details}); err != nil {
		return out, nil, err
	}
	cmds, err := s.queue(ctx, tx, out, out.Status, reason)
	return out, cmds, err
}

// Revoke ends an active elevation before its expiry: 409 when it is not active (never
// approved, revoked already, or expired, the expiry job included).
func (s *Service) Revoke(ctx context.Context, id, reason string) (PAMElevationRequest, error) {
	if reason = strings.TrimSpace(reason); len(reason) > maxReason {
		return PAMElevationRequest{}, apperr.Invalid("reason", fmt.Sprintf("at most %d characters", maxReason))
	}
	var out request
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := s.getRequest(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		notActive := apperr.ConflictCode(CodeNotActive, "the request is not an active elevation (it is "+r.Status+")")
		now := s.now()
		res, err := tx.ExecContext(ctx, `UPDATE pam_requests SET status = $1, reason = $2, decided_by = $3, decided_at = $4
			WHERE id = $5 AND status = $6 AND expires_at > $4`, StatusRevoked, reason, access.ActorName(ctx), now, id, StatusApproved)
		if err != nil {
			return fmt.Errorf("revoke elevation request %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, notActive)
		}
		out, cmds, err = s.settle(ctx, tx, id, EventRevoked, "pam.request.revoke", reason, map[string]any{})
		return err
	})
	if err != nil {
		return PAMElevationRequest{}, fmt.Errorf("revoke elevation: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	s.wake()
	return out.PAMElevationRequest, nil
}

// Expire ends the approvals past their expiry and the pending requests older than
// PendingTTL (status expired), telling their agents. Each row moves conditionally, so a
// revoke at the same moment leaves exactly one final state.
func (s *Service) Expire(ctx context.Context) error {
	now := s.now()
	var a store.Args
	ids, err := store.QueryStrings(ctx, s.db, `SELECT id FROM pam_requests WHERE (status = `+a.Add(StatusApproved)+` AND expires_at <= `+
		a.Add(now)+`) OR (status = `+a.Add(StatusPending)+` AND requested_at <= `+a.Add(now.Add(-PendingTTL))+`) ORDER BY id LIMIT 500`,
		a.Values()...)
	if err != nil {
		return fmt.Errorf("find elevations to expire: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	var cmds []devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, `UPDATE pam_requests SET status = $1, decided_at = CASE WHEN status = $2 THEN $3 ELSE decided_at END,
				decided_via = CASE WHEN status = $2 THEN $4 ELSE decided_via END,
				reason = CASE WHEN status = $2 THEN $5 ELSE reason END
				WHERE id = $6 AND ((status = $7 AND expires_at <= $3) OR (status = $2 AND requested_at <= $8))`, StatusExpired, StatusPending, now,
				ViaTimeout, "no technician answered within "+PendingTTL.String(), id, StatusApproved, now.Add(-PendingTTL))
			if err != nil {
				return fmt.Errorf("expire elevation request %s: %w", id, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				if err != nil {
					return fmt.Errorf("expire elevation request %s: %w", id, err)
				}
				continue
			}
			r, err := s.getRequest(ctx, tx, access.SystemScope(), id)
			if err != nil {
				return err
			}
			if _, err := events.Record(ctx, tx, events.Event{Type: EventExpired, PartnerID: r.PartnerID, OrgID: r.OrgID,
				ResourceType: "pam_elevation_request", ResourceID: id}, r.PAMElevationRequest); err != nil {
				return err
			}
			c, err := s.queue(ctx, tx, r, StatusExpired, r.Reason)
			if err != nil {
				return err
			}
			cmds = append(cmds, c...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("expire elevations: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	s.wake()
	return nil
}

// Preview lists the recent requests of the draft rule's organization that it would match.
func (s *Service) Preview(ctx context.Context, in PAMRuleInput) (PAMPreview, error) {
	sp := in.spec()
	var c checker
	sp.validate(&c, "")
	if err := c.err(); err != nil {
		return PAMPreview{}, err
	}
	at, err := s.tenancy.Place(ctx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "pam rule"})
	if err != nil {
		return PAMPreview{}, err
	}
	if err := checkRefs(ctx, s.db, at.OrgID, sp, ""); err != nil {
		return PAMPreview{}, err
	}
	ws, we, wd, wz := windowCols(sp.Window)
	draft := PAMRule{SiteID: nonEmpty(sp.SiteID), Verdict: sp.Verdict, ApprovalMinutes: sp.ApprovalMinutes, MatchSigner: nonEmpty(sp.Signer),
		MatchSignerThumbprint: nonEmpty(sp.Thumbprint), MatchSignerGroupID: nonEmpty(sp.GroupID), MatchHash: nonEmpty(sp.Hash),
		MatchPathGlob: nonEmpty(sp.PathGlob), MatchParentImage: nonEmpty(sp.Parent), MatchCommandLine: nonEmpty(sp.CmdLine),
		MatchUser: nonEmpty(sp.User), MatchAdGroup: nonEmpty(sp.AD)}
	if ws != "" {
		draft.TimeWindow = &PAMTimeWindow{Start: ws, End: we, Timezone: wz}
		_ = json.Unmarshal([]byte(wd), &draft.TimeWindow.Days)
	}
	groups := map[string]*signerSet{}
	if sp.GroupID != "" {
		var signers, thumbs string
		if err := s.db.QueryRowContext(ctx, `SELECT signers, thumbprints FROM pam_signer_groups WHERE id = $1`, sp.GroupID).
			Scan(&signers, &thumbs); err != nil {
			return PAMPreview{}, fmt.Errorf("load signer group %s: %w", sp.GroupID, err)
		}
		groups[sp.GroupID] = compileGroup(signers, thumbs)
	}
	rule := compile(draft, groups)
	recent, err := store.QueryAll(ctx, s.db, `SELECT `+requestColumns+` FROM pam_requests q WHERE q.org_id = $1 AND q.requested_at >= $2
		ORDER BY q.requested_at DESC, q.id DESC LIMIT `+fmt.Sprint(previewScan), []any{at.OrgID, s.now().Add(-previewWindow)}, s.scanRequest)
	if err != nil {
		return PAMPreview{}, fmt.Errorf("read recent elevation requests: %w", err)
	}
	out := PAMPreview{Requests: []PAMElevationRequest{}, Scanned: len(recent)}
	for _, r := range recent {
		l := lower(Subject{SiteID: store.Deref(r.SiteID), User: r.User, Path: r.Path, SHA256: r.SHA256, Signer: r.Signer,
			Thumbprint: r.SignerThumbprint, Parent: r.ParentImage, CommandLine: r.CommandLine, Groups: r.Groups, At: r.RequestedAt})
		if rule.matches(&l) {
			out.Matched++
			if len(out.Requests) < previewMax {
				out.Requests = append(out.Requests, r.PAMElevationRequest)
			}
		}
	}
	return out, nil
}
