package discovery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// errNotClaimed: another node claimed the run first.
var errNotClaimed = errors.New("the run was claimed by another node")

// profileActor is who a scheduled scan of p runs as: the system, within p's organization.
func profileActor(p profileRow) *access.Principal {
	return &access.Principal{Kind: access.ActorSystem, ID: p.ID, Email: "discovery profile " + p.Name, Name: "discovery profile " + p.Name,
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: p.PartnerID, OrgID: p.OrgID}}
}

// runDue starts the scans of profiles whose next run has come. Each run is claimed by a
// conditional UPDATE of next_run_at (to the run after it), so one node starts it; a run that
// cannot start (no agent online, a scan still open) is logged and skipped.
func (s *Service) runDue(ctx context.Context) error {
	now := s.now()
	var a store.Args
	conds := []string{"p.next_run_at <= " + a.Add(now), tenancy.LiveOrg("p.org_id")}
	due, err := store.QueryAll(ctx, s.db, `SELECT `+profileColumns+` FROM discovery_profiles p WHERE `+store.Where(conds)+
		` ORDER BY p.next_run_at, p.id LIMIT 500`, a.Values(), scanProfile)
	if err != nil {
		return fmt.Errorf("read due discovery profiles: %w", err)
	}
	for _, p := range due {
		err := s.runProfile(ctx, p)
		var ae *apperr.Error
		switch {
		case err == nil, errors.Is(err, errNotClaimed):
		case errors.As(err, &ae):
			s.logger.InfoContext(ctx, "a scheduled discovery scan did not start", "profile", p.ID, "reason", ae.Message)
		default:
			s.logger.WarnContext(ctx, "a scheduled discovery scan failed", "profile", p.ID, "error", err)
		}
	}
	return nil
}

func (s *Service) runProfile(ctx context.Context, p profileRow) error {
	actx := access.WithPrincipal(ctx, profileActor(p))
	st, err := s.tenancy.GetSite(access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, Scope: access.SystemScope()}), p.SiteID)
	if err != nil {
		return fmt.Errorf("read the site of profile %s: %w", p.ID, err)
	}
	now := s.now()
	next, err := p.Schedule.nextRun(now, st.Timezone)
	if err != nil {
		return err
	}
	claimed := func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE discovery_profiles SET next_run_at = $1 WHERE id = $2 AND next_run_at = $3`, next, p.ID,
			p.NextRunAt.UTC())
		if err != nil {
			return fmt.Errorf("claim a run of profile %s: %w", p.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, errNotClaimed)
		}
		return nil
	}
	if err := s.db.Write(ctx, claimed); err != nil {
		return err
	}
	var job DiscoveryJob
	var cmds []devices.DeviceCommand
	err = s.db.Write(actx, func(tx *sql.Tx) error {
		var err error
		job, cmds, err = s.startScan(actx, tx, p, "", TriggerSchedule)
		return err
	})
	if err != nil {
		return err
	}
	_, err = s.dispatched(actx, job, cmds)
	return err
}
