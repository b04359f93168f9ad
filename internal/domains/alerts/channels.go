package alerts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// The notification channels that rules name live in the notification channels module, built
// after this one: it declares the check of a rule's channels, and reads a rule's channels and
// alerts through the functions below.

// ChannelCheck is what the notification channels module declares for alerts (see
// module.Kernel.Declare): Check refuses, under field, the IDs among ids that are not
// channels of partnerID usable for organization orgID (partner-wide ones or its own).
type ChannelCheck struct {
	Check func(ctx context.Context, q store.Querier, field string, ids []string, partnerID, orgID string) error
}

// useChannelCheck takes the channel check declared by the notification channels module.
func (s *Service) useChannelCheck(checks []ChannelCheck) error {
	if len(checks) > 1 {
		return fmt.Errorf("%d channel checks declared for alert rules, want one", len(checks))
	}
	if len(checks) == 1 {
		s.channels = checks[0]
	}
	return nil
}

// checkChannels refuses notification channel IDs that are not channels of the rule's partner
// usable for its organization. Without a channels module there is no channel to name.
func (s *Service) checkChannels(ctx context.Context, q store.Querier, ids []string, partnerID, orgID string) error {
	if len(ids) > 20 {
		return apperr.Invalid("channelIds", "at most 20 channels")
	}
	if s.channels.Check == nil {
		if len(ids) > 0 {
			return apperr.Invalid("channelIds", "no such channel: "+ids[0])
		}
		return nil
	}
	return s.channels.Check(ctx, q, "channelIds", ids, partnerID, orgID)
}

// RuleChannels returns the notification channels the rule ruleID names; none when the rule
// names none or does not exist.
func RuleChannels(ctx context.Context, q store.Querier, ruleID string) ([]string, error) {
	var raw string
	err := q.QueryRowContext(ctx, `SELECT channel_ids FROM alert_rules WHERE id = $1`, ruleID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load the channels of alert rule %s: %w", ruleID, err)
	}
	ids, _ := store.DecodeStrings(raw)
	return ids, nil
}

// ForgetChannel removes a deleted notification channel from the rules of its partner that
// name it, in the transaction that deletes it at now.
func ForgetChannel(ctx context.Context, tx *sql.Tx, partnerID, channelID string, now time.Time) error {
	type change struct{ id, channels string }
	named, err := store.QueryAll(ctx, tx, `SELECT id, channel_ids FROM alert_rules WHERE partner_id = $1 AND channel_ids LIKE $2`,
		[]any{partnerID, "%" + channelID + "%"}, func(sc store.Scanner) (c change, err error) {
			err = sc.Scan(&c.id, &c.channels)
			return c, err
		})
	if err != nil {
		return fmt.Errorf("find the alert rules naming channel %s: %w", channelID, err)
	}
	for _, c := range named {
		ids, _ := store.DecodeStrings(c.channels)
		kept := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == channelID })
		if len(kept) == len(ids) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_rules SET channel_ids = $1, updated_at = $2 WHERE id = $3`,
			store.EncodeStrings(kept), now, c.id); err != nil {
			return fmt.Errorf("remove channel %s from alert rule %s: %w", channelID, c.id, err)
		}
	}
	return nil
}

// Lookup returns the alert id whatever its scope, for a domain that works on an alert it was
// told of (an escalation); apperr.NotFound when there is none.
func Lookup(ctx context.Context, q store.Querier, id string) (Alert, error) {
	return getAlert(ctx, q, access.SystemScope(), id)
}
