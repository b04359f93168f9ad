-- +goose Up
-- Notification channels (email, Slack, Teams, webhook, PagerDuty, SMS), escalation and
-- routing policies, and one delivery row per alert notification and channel, sent by a
-- worker on every node that claims due rows with a conditional update.
CREATE TABLE notification_channels (
    id          TEXT PRIMARY KEY,
    partner_id  TEXT NOT NULL REFERENCES partners(id),
    org_id      TEXT REFERENCES organizations(id),
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    -- config: the JSON config with its secrets masked; sealed: the full config, sealed with
    -- APP_ENCRYPTION_KEY.
    config      TEXT NOT NULL,
    sealed      TEXT NOT NULL,
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    throttle    TEXT,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
CREATE INDEX notification_channels_partner ON notification_channels (partner_id, org_id);

CREATE TABLE alert_policies (
    id          TEXT PRIMARY KEY,
    partner_id  TEXT NOT NULL REFERENCES partners(id),
    org_id      TEXT REFERENCES organizations(id),
    name        TEXT NOT NULL,
    priority    INTEGER NOT NULL,
    match       TEXT NOT NULL,
    time_window TEXT,
    steps       TEXT NOT NULL,
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
CREATE INDEX alert_policies_partner ON alert_policies (partner_id, priority);

-- Later escalation steps of a policy for one alert: fired by the alerts-escalate job when
-- due and the alert is still active; cancelled by acknowledge or resolve.
CREATE TABLE alert_escalations (
    id          TEXT PRIMARY KEY,
    alert_id    TEXT NOT NULL,
    policy_id   TEXT NOT NULL,
    step        INTEGER NOT NULL,
    channel_ids TEXT NOT NULL,
    due_at      TIMESTAMP NOT NULL,
    status      TEXT NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX alert_escalations_step ON alert_escalations (alert_id, step);
CREATE INDEX alert_escalations_due ON alert_escalations (status, due_at);

CREATE TABLE notification_deliveries (
    id              TEXT PRIMARY KEY,
    channel_id      TEXT NOT NULL REFERENCES notification_channels(id) ON DELETE CASCADE,
    alert_id        TEXT,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    -- step: the escalation step that sent it (0 at trigger), -1 for resolution and tests.
    step            INTEGER NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    next_attempt_at TIMESTAMP,
    claim_token     TEXT,
    claimed_until   TIMESTAMP,
    response_status INTEGER,
    error           TEXT,
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL,
    delivered_at    TIMESTAMP
);
CREATE UNIQUE INDEX notification_deliveries_event ON notification_deliveries (channel_id, event_id, step);
CREATE INDEX notification_deliveries_due ON notification_deliveries (status, next_attempt_at);
CREATE INDEX notification_deliveries_alert ON notification_deliveries (alert_id);

-- The channels an alert rule notifies directly (before any policy).
ALTER TABLE alert_rules ADD COLUMN channel_ids TEXT NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE alert_rules DROP COLUMN channel_ids;
DROP TABLE notification_deliveries;
DROP TABLE alert_escalations;
DROP TABLE alert_policies;
DROP TABLE notification_channels;
