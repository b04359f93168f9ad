package alertchannels

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

func (s *Service) getChannel(ctx context.Context, q store.Querier, scope access.Scope, id string) (chRow, error) {
	var a store.Args
	return store.ByID(ctx, q, "channel", `SELECT `+channelColumns+` FROM notification_channels c`, "c.id", id, &a,
		[]string{filter(scope, &a, "c")}, s.scanChannel)
}

// GetChannel returns a channel in scope.
func (s *Service) GetChannel(ctx context.Context, id string) (NotificationChannel, error) {
	r, err := s.getChannel(ctx, s.db, access.ScopeFrom(ctx), id)
	return r.NotificationChannel, err
}

// ListChannels lists the channels in scope, newest first.
func (s *Service) ListChannels(ctx context.Context, orgID, typ string, page store.Page) ([]NotificationChannel, string, *int, error) {
	var a store.Args
	conds := []string{filter(access.ScopeFrom(ctx), &a, "c")}
	if orgID != "" {
		conds = append(conds, "c.org_id = "+a.Add(orgID))
	}
	if typ != "" {
		conds = append(conds, "c.type = "+a.Add(typ))
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: channelColumns, From: " FROM notification_channels c",
		Conds: conds, Args: &a, SortKey: "c.id", SortID: "c.id", Desc: true}, page, s.scanChannel,
		func(r chRow) (string, string) { return r.ID, r.ID })
	out := make([]NotificationChannel, len(rows))
	for i, r := range rows {
		out[i] = r.NotificationChannel
	}
	if err != nil {
		return out, next, total, fmt.Errorf("list notification channels: %w", err)
	}
	return out, next, total, nil
}

func throttleJSON(t *ChannelThrottle) any {
	if t == nil || t.MaxPerHour <= 0 {
		return nil
	}
	b, _ := json.Marshal(t)
	return string(b)
}

func (s *Service) sealConfig(c ChannelConfig) string {
	b, _ := json.Marshal(c)
	return s.box.Seal(string(b))
}

func channelAudit(c NotificationChannel) map[string]any {
	return map[string]any{"name": c.Name, "type": c.Type, "config": c.Config, "enabled": c.Enabled, "throttle": c.Throttle}
}

func validThrottle(t *ChannelThrottle) error {
	if t != nil && (t.MaxPerHour < 0 || t.MaxPerHour > 10000) {
		return apperr.Invalid("throttle.maxPerHour", "1 to 10000 (0 removes the throttle)")
	}
	return nil
}

// CreateChannel adds a channel.
func (s *Service) CreateChannel(ctx context.Context, in NewChannel) (NotificationChannel, error) {
	scope := access.ScopeFrom(ctx)
	name, err := validName(in.Name)
	if err != nil {
		return NotificationChannel{}, err
	}
	if !slices.Contains(channelTypes, in.Type) {
		return NotificationChannel{}, apperr.Invalid("type", "one of email, slack, teams, webhook, pagerduty, sms")
	}
	cfg, err := s.validConfig(ctx, in.Type, in.Config)
	if err != nil {
		return NotificationChannel{}, err
	}
	if err := validThrottle(in.Throttle); err != nil {
		return NotificationChannel{}, err
	}
	enabled := in.Enabled == nil || *in.Enabled
	var out NotificationChannel
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "notification channel", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		partnerID, orgID := at.PartnerID, at.OrgID
		id, now := store.NewID(), s.now()
		pub, _ := json.Marshal(maskConfig(cfg))
		if _, err := tx.ExecContext(ctx, `INSERT INTO notification_channels (id, partner_id, org_id, name, type, config, sealed, enabled,
			throttle, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`, id, partnerID,
			store.NullIfEmpty(orgID), name, in.Type, string(pub), s.sealConfig(cfg), enabled, throttleJSON(in.Throttle), now); err != nil {
			return fmt.Errorf("insert channel: %w", err)
		}
		r, err := s.getChannel(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = r.NotificationChannel
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_channel.create", ResourceType: "alert_channel", ResourceID: id,
			ResourceName: name, PartnerID: partnerID, OrgID: orgID, Details: channelAudit(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create notification channel: %w", err)
	}
	return out, nil
}

// UpdateChannel changes a channel in scope.
func (s *Service) UpdateChannel(ctx context.Context, id string, in ChannelUpdate) (NotificationChannel, error) {
	scope := access.ScopeFrom(ctx)
	if err := validThrottle(in.Throttle); err != nil {
		return NotificationChannel{}, err
	}
	var out NotificationChannel
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getChannel(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.now())
		if in.Name != nil {
			name, err := validName(*in.Name)
			if err != nil {
				return err
			}
			ch.Set("name", name)
		}
		if in.Config != nil {
			next := *in.Config
			keepSecrets(&next, before.full)
			cfg, err := s.validConfig(ctx, before.Type, next)
			if err != nil {
				return err
			}
			pub, _ := json.Marshal(maskConfig(cfg))
			ch.Set("config", string(pub))
			ch.Set("sealed", s.sealConfig(cfg))
		}
		if in.Enabled != nil {
			ch.Set("enabled", *in.Enabled)
		}
		if in.Throttle != nil {
			ch.Set("throttle", throttleJSON(in.Throttle))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE notification_channels SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id),
			ch.Args.Values()...); err != nil {
			return fmt.Errorf("update channel %s: %w", id, err)
		}
		after, err := s.getChannel(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = after.NotificationChannel
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_channel.update", ResourceType: "alert_channel", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: store.Deref(out.OrgID),
			Details: audit.Diff(channelAudit(before.NotificationChannel), channelAudit(out))})
	})
	if err != nil {
		return out, fmt.Errorf("update notification channel: %w", err)
	}
	return out, nil
}

// DeleteChannel removes a channel in scope with its delivery log.
func (s *Service) DeleteChannel(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := s.getChannel(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM notification_deliveries WHERE channel_id = $1`, id); err != nil {
			return fmt.Errorf("delete the deliveries of channel %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM notification_channels WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete channel %s: %w", id, err)
		}
		if err := forgetChannel(ctx, tx, r.PartnerID, id, s.now()); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_channel.delete", ResourceType: "alert_channel", ResourceID: id,
			ResourceName: r.Name, PartnerID: r.PartnerID, OrgID: store.Deref(r.OrgID), Details: channelAudit(r.NotificationChannel)})
	})
}

// forgetChannel removes a deleted channel from the rules and policy steps of its partner that
// name it, at now.
func forgetChannel(ctx context.Context, tx *sql.Tx, partnerID, id string, now time.Time) error {
	if err := alerts.ForgetChannel(ctx, tx, partnerID, id, now); err != nil {
		return err
	}
	type change struct{ id, steps string }
	named, err := store.QueryAll(ctx, tx, `SELECT id, steps FROM alert_policies WHERE partner_id = $1 AND steps LIKE $2`,
		[]any{partnerID, "%" + id + "%"}, func(sc store.Scanner) (c change, err error) {
			err = sc.Scan(&c.id, &c.steps)
			return c, err
		})
	if err != nil {
		return fmt.Errorf("find the policies naming channel %s: %w", id, err)
	}
	for _, c := range named {
		var steps []PolicyStep
		if json.Unmarshal([]byte(c.steps), &steps) != nil {
			continue
		}
		for i := range steps {
			steps[i].ChannelIDs = slices.DeleteFunc(steps[i].ChannelIDs, func(s string) bool { return s == id })
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_policies SET steps = $1, updated_at = $2 WHERE id = $3`, store.EncodeJSON(steps),
			now, c.id); err != nil {
			return fmt.Errorf("remove channel %s from policy %s: %w", id, c.id, err)
		}
	}
	return nil
}
