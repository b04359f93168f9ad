package incidents

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// Polling.
const (
	// claimBatch bounds the connectors one round takes.
	claimBatch = 50
	// claimLease is how long a claimed connector stays out of other rounds while it is polled;
	// a node that dies mid-poll leaves it due again after that.
	claimLease = 5 * time.Minute
	// maxBackoff bounds the wait after failed polls.
	maxBackoff = time.Hour
	// pollTimeout bounds one connector's poll.
	pollTimeout = 2 * time.Minute
)

var pollerActor = &access.Principal{Kind: access.ActorSystem, ID: "incidents-edr", Name: "EDR poller", Scope: access.SystemScope()}

// PollDue polls the enabled connectors that are due. Each is claimed first with a
// conditional UPDATE that moves its next_poll_at past the poll, so concurrent rounds (several
// nodes) poll each once. A failing poll is recorded on the connector (lastError) and retried
// after a backoff doubling per failure in a row (up to an hour); a success stores the findings
// and schedules the next poll one interval on.
func (s *Service) PollDue(ctx context.Context) error {
	ctx = access.WithPrincipal(ctx, pollerActor)
	now := s.now()
	ids, err := store.QueryStrings(ctx, s.db, `SELECT id FROM incident_edr_connectors WHERE enabled = $1 AND next_poll_at <= $2
		ORDER BY next_poll_at, id LIMIT `+fmt.Sprint(claimBatch), true, now)
	if err != nil {
		return fmt.Errorf("find due EDR connectors: %w", err)
	}
	for _, id := range ids {
		res, err := s.db.ExecContext(ctx, `UPDATE incident_edr_connectors SET next_poll_at = $1 WHERE id = $2 AND enabled = $3
			AND next_poll_at <= $4`, now.Add(claimLease), id, true, now)
		if err != nil {
			return fmt.Errorf("claim EDR connector %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue
		}
		if err := s.pollOne(ctx, id); err != nil {
			s.logger.WarnContext(ctx, "EDR connector poll failed", "connector", id, "error", err)
		}
	}
	return nil
}

// pollOne polls a claimed connector and records the outcome.
func (s *Service) pollOne(ctx context.Context, id string) error {
	cfg, err := s.connectorConfig(ctx, s.db, id)
	if err != nil {
		return s.recordFailure(ctx, id, cfg, "the connector's settings could not be read")
	}
	pctx, cancel := context.WithTimeout(ctx, pollTimeout)
	res, err := s.providerOf(cfg.provider).fetch(pctx, s.client, cfg)
	cancel()
	if err != nil {
		return s.recordFailure(ctx, id, cfg, err.Error())
	}
	devs, err := s.mapDevices(ctx, cfg.orgID, res.findings)
	if err != nil {
		return s.recordFailure(ctx, id, cfg, "mapping findings to devices failed")
	}
	if res.malformed > 0 {
		s.logger.WarnContext(ctx, "EDR connector skipped malformed findings", "connector", id, "count", res.malformed)
	}
	now := s.now()
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		for _, f := range res.findings {
			if err := upsertFinding(ctx, tx, cfg, f, devs[f.sourceID], now); err != nil {
				return err
			}
		}
		var lastErr any
		if res.malformed > 0 {
			lastErr = fmt.Sprintf("the last poll skipped %d malformed findings", res.malformed)
		}
		_, err := tx.ExecContext(ctx, `UPDATE incident_edr_connectors SET position = $1, last_polled_at = $2, last_success_at = $2,
			last_error = $3, consecutive_failures = 0, findings_seen = findings_seen + $4, next_poll_at = $5 WHERE id = $6`,
			res.position, now, lastErr, len(res.findings), now.Add(time.Duration(cfg.interval)*time.Second), id)
		if err != nil {
			return fmt.Errorf("record the poll of EDR connector %s: %w", id, err)
		}
		return nil
	})
}

// backoff is the wait before retrying a connector that failed failures times in a row.
func backoff(interval, failures int) time.Duration {
	d := time.Duration(interval) * time.Second
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

func (s *Service) recordFailure(ctx context.Context, id string, cfg pollConfig, msg string) error {
	now := s.now()
	failures := cfg.failures + 1
	interval := cfg.interval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	_, err := s.db.ExecContext(ctx, `UPDATE incident_edr_connectors SET last_polled_at = $1, last_error = $2,
		consecutive_failures = consecutive_failures + 1, next_poll_at = $3 WHERE id = $4`, now, clip(msg, 1000),
		now.Add(backoff(interval, failures)), id)
	if err != nil {
		return fmt.Errorf("record the failure of EDR connector %s: %w", id, err)
	}
	return fmt.Errorf("%s", msg)
}

// mapDevices finds the device of the organization each finding names: by MAC address first,
// then by hostname (compared without case, and by the first label of a fully qualified name).
func (s *Service) mapDevices(ctx context.Context, orgID string, fs []finding) (map[string]string, error) {
	out := map[string]string{}
	var macs []string
	for _, f := range fs {
		if f.mac != "" {
			macs = append(macs, f.mac)
		}
	}
	if len(macs) > 0 {
		m, err := s.devices.FindByAddress(ctx, orgID, macs, nil)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if id, ok := m.ByMAC[f.mac]; ok && f.mac != "" {
				out[f.sourceID] = id
			}
		}
	}
	byHost := map[string]string{}
	for _, f := range fs {
		if _, done := out[f.sourceID]; done || f.hostname == "" {
			continue
		}
		key := strings.ToLower(f.hostname)
		id, seen := byHost[key]
		if !seen {
			var err error
			if id, err = s.findHost(ctx, orgID, f.hostname); err != nil {
				return nil, err
			}
			byHost[key] = id
		}
		if id != "" {
			out[f.sourceID] = id
		}
	}
	return out, nil
}

func shortName(h string) string {
	h = strings.ToLower(h)
	if i := strings.IndexByte(h, '.'); i > 0 {
		return h[:i]
	}
	return h
}

// findHost returns the device of the organization named host, or "".
func (s *Service) findHost(ctx context.Context, orgID, host string) (string, error) {
	if s.devices == nil {
		return "", nil
	}
	rows, _, _, err := s.devices.List(ctx, devices.ListFilter{OrgIDs: []string{orgID}, Search: shortName(host)}, store.Page{Limit: 50})
	if err != nil {
		return "", err
	}
	short := ""
	for _, d := range rows {
		if strings.EqualFold(d.Hostname, host) {
			return d.ID, nil
		}
		if short == "" && shortName(d.Hostname) == shortName(host) {
			short = d.ID
		}
	}
	return short, nil
}

// upsertFinding stores a finding reported by a connector: new, or changed (title, severity,
// EDR status, link, device). A promoted finding's incident takes its new EDR status and link.
func upsertFinding(ctx context.Context, tx *sql.Tx, cfg pollConfig, f finding, deviceID string, now time.Time) error {
	title := f.title
	if title == "" {
		title = "EDR finding " + f.sourceID
	}
	var trackedID sql.NullString
	err := tx.QueryRowContext(ctx, `INSERT INTO incidents (id, partner_id, org_id, kind, source, source_id, origin, connector_id, title, severity,
		status, edr_status, device_id, hostname, detected_at, link_out, in_feed, created_at, updated_at)
		VALUES ($1, $2, $3, 'finding', $4, $5, 'edr', $6, $7, $8, 'new', $9, $10, $11, $12, $13, $14, $15, $15)
		ON CONFLICT (connector_id, source_id) DO UPDATE SET title = excluded.title, severity = excluded.severity,
		edr_status = excluded.edr_status, device_id = COALESCE(excluded.device_id, incidents.device_id), hostname = excluded.hostname,
		link_out = excluded.link_out, updated_at = excluded.updated_at
		RETURNING tracked_incident_id`, store.NewID(), cfg.partnerID, cfg.orgID, cfg.provider, f.sourceID, cfg.id, title, f.severity,
		store.NullIfEmpty(f.edrStatus), store.NullIfEmpty(deviceID), store.NullIfEmpty(f.hostname), f.detectedAt.UTC().Truncate(time.Microsecond),
		store.NullIfEmpty(f.linkOut), true, now).Scan(&trackedID)
	if err != nil {
		return fmt.Errorf("store finding %s of EDR connector %s: %w", f.sourceID, cfg.id, err)
	}
	if trackedID.Valid {
		if _, err := tx.ExecContext(ctx, `UPDATE incidents SET edr_status = $1, link_out = $2, updated_at = $3 WHERE id = $4 AND kind = 'tracked'`,
			store.NullIfEmpty(f.edrStatus), store.NullIfEmpty(f.linkOut), now, trackedID.String); err != nil {
			return fmt.Errorf("carry the EDR status to incident %s: %w", trackedID.String, err)
		}
	}
	return nil
}
