package snmp

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Threshold operators and severities.
var (
	operators  = []string{"gt", "gte", "lt", "lte", "eq"}
	severities = []string{"critical", "high", "medium", "low", "info"}
)

// SNMPThreshold raises an alert while an OID of a device compares with value by operator
// (for a counter: its rate per second), and resolves it once it no longer does.
type SNMPThreshold struct {
	ID        string    `json:"id"`
	PartnerID string    `json:"partnerId"`
	OrgID     string    `json:"orgId"`
	DeviceID  string    `json:"deviceId"`
	OID       string    `json:"oid"`
	Operator  string    `json:"operator" enum:"gt,gte,lt,lte,eq"`
	Value     float64   `json:"value"`
	Severity  string    `json:"severity" enum:"critical,high,medium,low,info"`
	Breached  bool      `json:"breached" doc:"Whether the last poll breached it."`
	CreatedBy *string   `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SNMPThresholdInput creates a threshold.
type SNMPThresholdInput struct {
	DeviceID string  `json:"deviceId" format:"uuid"`
	OID      string  `json:"oid" maxLength:"600"`
	Operator string  `json:"operator" enum:"gt,gte,lt,lte,eq"`
	Value    float64 `json:"value"`
	Severity string  `json:"severity" enum:"critical,high,medium,low,info"`
}

// SNMPThresholdUpdate changes a threshold: absent fields stay. A change starts it afresh: its
// open alert is resolved and the next poll decides again.
type SNMPThresholdUpdate struct {
	OID      *string  `json:"oid,omitempty" maxLength:"600"`
	Operator *string  `json:"operator,omitempty" enum:"gt,gte,lt,lte,eq"`
	Value    *float64 `json:"value,omitempty"`
	Severity *string  `json:"severity,omitempty" enum:"critical,high,medium,low,info"`
}

const thresholdColumns = `t.id, t.partner_id, t.org_id, t.device_id, t.oid, t.operator, t.value, t.severity, t.breached, t.created_by,
	t.created_at, t.updated_at`

func scanThreshold(row store.Scanner) (SNMPThreshold, error) {
	var t SNMPThreshold
	var by sql.NullString
	err := row.Scan(&t.ID, &t.PartnerID, &t.OrgID, &t.DeviceID, &t.OID, &t.Operator, &t.Value, &t.Severity, &t.Breached, &by,
		&t.CreatedAt, &t.UpdatedAt)
	t.CreatedBy, t.CreatedAt, t.UpdatedAt = store.StringPtr(by), t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return t, err
}

func loadThresholds(ctx context.Context, q store.Querier, deviceIDs []string) (map[string][]threshold, error) {
	var a store.Args
	ths, err := store.QueryAll(ctx, q, `SELECT `+thresholdColumns+` FROM snmp_thresholds t WHERE t.device_id IN `+a.In(deviceIDs)+
		` ORDER BY t.device_id, t.id`, a.Values(), scanThreshold)
	if err != nil {
		return nil, fmt.Errorf("load SNMP thresholds: %w", err)
	}
	out := map[string][]threshold{}
	for _, t := range ths {
		out[t.DeviceID] = append(out[t.DeviceID], threshold{SNMPThreshold: t, breached: t.Breached})
	}
	return out, nil
}

func breaches(v float64, op string, limit float64) bool {
	switch op {
	case "gt":
		return v > limit
	case "gte":
		return v >= limit
	case "lt":
		return v < limit
	case "lte":
		return v <= limit
	case "eq":
		return v == limit
	}
	return false
}

var operatorSigns = map[string]string{"gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "eq": "="}

func thresholdKey(id string) string { return "threshold:" + id }

// evaluate compares a device's thresholds with the values of a poll by probe's agent (rates
// for counters): every breach raises its alert (one open alert per threshold, so one that a
// maintenance window held back opens at the first breach after the window), a return
// resolves it. An OID the poll did not bring (or a counter without a rate yet) leaves its
// thresholds as they are.
func (s *Service) evaluate(ctx context.Context, tx *sql.Tx, d device, probe string, ths []threshold, current map[string]float64) error {
	src := observed(d.SNMPDevice, probe)
	for _, t := range ths {
		v, ok := current[t.OID]
		if !ok {
			continue
		}
		now := breaches(v, t.Operator, t.Value)
		if now {
			shown := strconv.FormatFloat(v, 'g', -1, 64)
			limit := strconv.FormatFloat(t.Value, 'g', -1, 64)
			if _, _, err := s.alerts.RaiseFrom(ctx, tx, src, alerts.SourceAlert{Key: thresholdKey(t.ID), Severity: t.Severity,
				Title:   fmt.Sprintf("%s: %s is %s (threshold %s %s)", d.Name, t.OID, shown, operatorSigns[t.Operator], limit),
				Message: fmt.Sprintf("SNMP device %s (%s): %s = %s, which is %s %s.", d.Name, d.IPAddress, t.OID, shown, operatorSigns[t.Operator], limit),
				Context: map[string]any{"thresholdId": t.ID, "oid": t.OID, "value": v, "operator": t.Operator, "threshold": t.Value}}); err != nil {
				return err
			}
		} else if t.breached {
			if err := s.alerts.ResolveFrom(ctx, tx, src, thresholdKey(t.ID), "the value is back within the threshold"); err != nil {
				return err
			}
		}
		if now != t.breached {
			if _, err := tx.ExecContext(ctx, `UPDATE snmp_thresholds SET breached = $1 WHERE id = $2`, now, t.ID); err != nil {
				return fmt.Errorf("record threshold state: %w", err)
			}
		}
	}
	return nil
}

func checkThreshold(c *checker, oid *string, op, severity string) {
	o, why := validOID(*oid)
	if why != "" {
		c.fail("oid", "%s", why)
	}
	*oid = o
	if !oneOf(op, operators) {
		c.fail("operator", "gt, gte, lt, lte or eq")
	}
	if !oneOf(severity, severities) {
		c.fail("severity", "critical, high, medium, low or info")
	}
}

// ListThresholds returns a device's thresholds, oldest first.
func (s *Service) ListThresholds(ctx context.Context, deviceID string) ([]SNMPThreshold, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if err != nil {
		return nil, err
	}
	ths, err := loadThresholds(ctx, s.db, []string{d.ID})
	if err != nil {
		return nil, err
	}
	out := make([]SNMPThreshold, 0, len(ths[d.ID]))
	for _, t := range ths[d.ID] {
		out = append(out, t.SNMPThreshold)
	}
	return out, nil
}

func (s *Service) getThreshold(ctx context.Context, tx *sql.Tx, id string) (SNMPThreshold, device, error) {
	var a store.Args
	t, err := store.ByID(ctx, tx, "SNMP threshold", `SELECT `+thresholdColumns+` FROM snmp_thresholds t`, "t.id", id, &a, nil,
		scanThreshold)
	if err != nil {
		return t, device{}, err
	}
	d, err := s.getDevice(ctx, tx, access.ScopeFrom(ctx), t.DeviceID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return t, d, apperr.NotFound("SNMP threshold")
	}
	return t, d, err
}

// CreateThreshold adds a threshold to a device in scope (at most 100 a device).
func (s *Service) CreateThreshold(ctx context.Context, in SNMPThresholdInput) (SNMPThreshold, error) {
	var c checker
	checkThreshold(&c, &in.OID, in.Operator, in.Severity)
	if err := c.err(); err != nil {
		return SNMPThreshold{}, err
	}
	var t SNMPThreshold
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		d, err := s.getDevice(ctx, tx, access.ScopeFrom(ctx), in.DeviceID)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM snmp_thresholds WHERE device_id = $1`, d.ID).Scan(&n); err != nil {
			return fmt.Errorf("count thresholds: %w", err)
		}
		if n >= MaxThresholdsPerDevice {
			return apperr.Invalid("deviceId", fmt.Sprintf("a device has at most %d thresholds", MaxThresholdsPerDevice))
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO snmp_thresholds (id, partner_id, org_id, device_id, oid, operator, value, severity,
			created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`, id, d.PartnerID, d.OrgID, d.ID,
			in.OID, in.Operator, in.Value, in.Severity, access.ActorName(ctx), now); err != nil {
			return fmt.Errorf("insert SNMP threshold: %w", err)
		}
		if t, _, err = s.getThreshold(ctx, tx, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_threshold.create", ResourceType: "snmp_threshold", ResourceID: id,
			ResourceName: d.Name + " " + t.OID, PartnerID: t.PartnerID, OrgID: t.OrgID, Details: thresholdView(t)})
	})
	if err != nil {
		return t, fmt.Errorf("create SNMP threshold: %w", err)
	}
	return t, nil
}

func thresholdView(t SNMPThreshold) map[string]any {
	return map[string]any{"deviceId": t.DeviceID, "oid": t.OID, "operator": t.Operator, "value": t.Value, "severity": t.Severity}
}

// UpdateThreshold changes a threshold.
func (s *Service) UpdateThreshold(ctx context.Context, id string, in SNMPThresholdUpdate) (SNMPThreshold, error) {
	var t SNMPThreshold
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, d, err := s.getThreshold(ctx, tx, id)
		if err != nil {
			return err
		}
		after := before
		if in.OID != nil {
			after.OID = *in.OID
		}
		if in.Operator != nil {
			after.Operator = *in.Operator
		}
		if in.Value != nil {
			after.Value = *in.Value
		}
		if in.Severity != nil {
			after.Severity = *in.Severity
		}
		var c checker
		checkThreshold(&c, &after.OID, after.Operator, after.Severity)
		if err := c.err(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE snmp_thresholds SET oid = $1, operator = $2, value = $3, severity = $4, breached = FALSE,
			updated_at = $5 WHERE id = $6`, after.OID, after.Operator, after.Value, after.Severity, s.now(), id); err != nil {
			return fmt.Errorf("update SNMP threshold %s: %w", id, err)
		}
		if err := s.alerts.ResolveFrom(ctx, tx, source(d.SNMPDevice), thresholdKey(id), "the threshold was changed"); err != nil {
			return err
		}
		if t, _, err = s.getThreshold(ctx, tx, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_threshold.update", ResourceType: "snmp_threshold", ResourceID: id,
			ResourceName: d.Name + " " + t.OID, PartnerID: t.PartnerID, OrgID: t.OrgID,
			Details: map[string]any{"before": thresholdView(before), "after": thresholdView(t)}})
	})
	if err != nil {
		return t, fmt.Errorf("update SNMP threshold: %w", err)
	}
	return t, nil
}

// DeleteThreshold removes a threshold and resolves its alert.
func (s *Service) DeleteThreshold(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		t, d, err := s.getThreshold(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := s.alerts.ResolveFrom(ctx, tx, source(d.SNMPDevice), thresholdKey(id), "the threshold was deleted"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM snmp_thresholds WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete SNMP threshold: %w", err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "snmp_threshold.delete", ResourceType: "snmp_threshold", ResourceID: id,
			ResourceName: d.Name + " " + t.OID, PartnerID: t.PartnerID, OrgID: t.OrgID, Details: thresholdView(t)})
	})
}
