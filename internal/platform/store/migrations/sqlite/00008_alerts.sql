-- +goose Up
-- Alert rules belong to a partner, or to one of its organizations (org_id). targets and
-- conditions are JSON documents validated by the alerts package.
CREATE TABLE alert_rules (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL REFERENCES partners(id),
    org_id           TEXT REFERENCES organizations(id),
    name             TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    severity         TEXT NOT NULL,
    enabled          BOOLEAN NOT NULL,
    targets          TEXT NOT NULL,
    conditions       TEXT NOT NULL,
    title_template   TEXT NOT NULL,
    message_template TEXT NOT NULL,
    auto_resolve     BOOLEAN NOT NULL,
    cooldown_minutes INTEGER NOT NULL,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL
);
CREATE INDEX alert_rules_partner ON alert_rules (partner_id, enabled);

-- Alerts: active, acknowledged and suppressed are open; resolved and dismissed are terminal.
CREATE TABLE alerts (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL REFERENCES partners(id),
    org_id           TEXT NOT NULL REFERENCES organizations(id),
    site_id          TEXT,
    device_id        TEXT REFERENCES devices(id) ON DELETE CASCADE,
    rule_id          TEXT REFERENCES alert_rules(id) ON DELETE SET NULL,
    severity         TEXT NOT NULL,
    status           TEXT NOT NULL,
    title            TEXT NOT NULL,
    message          TEXT NOT NULL,
    context          TEXT NOT NULL,
    triggered_at     TIMESTAMP NOT NULL,
    acknowledged_at  TIMESTAMP,
    acknowledged_by  TEXT,
    resolved_at      TIMESTAMP,
    resolved_by      TEXT,
    resolution_note  TEXT,
    suppressed_until TIMESTAMP,
    dismissed_at     TIMESTAMP,
    dismissed_by     TEXT,
    updated_at       TIMESTAMP NOT NULL
);
-- One open alert per (rule, device): concurrent evaluations cannot open a second one.
CREATE UNIQUE INDEX alerts_one_open ON alerts (rule_id, device_id)
    WHERE status IN ('active', 'acknowledged', 'suppressed');
CREATE INDEX alerts_rule_device ON alerts (rule_id, device_id, resolved_at);
CREATE INDEX alerts_partner ON alerts (partner_id, status, id);
CREATE INDEX alerts_org ON alerts (org_id, status, id);
CREATE INDEX alerts_device ON alerts (device_id, status);

-- Custom alert templates: the reusable part of a rule (conditions, severity, texts). Built-in
-- templates live in the code.
CREATE TABLE alert_templates (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL REFERENCES partners(id),
    org_id           TEXT REFERENCES organizations(id),
    name             TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    category         TEXT NOT NULL DEFAULT '',
    severity         TEXT NOT NULL,
    conditions       TEXT NOT NULL,
    title_template   TEXT NOT NULL,
    message_template TEXT NOT NULL,
    auto_resolve     BOOLEAN NOT NULL,
    cooldown_minutes INTEGER NOT NULL,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL
);
CREATE INDEX alert_templates_partner ON alert_templates (partner_id, name);

-- +goose Down
DROP TABLE alert_templates;
DROP TABLE alerts;
DROP TABLE alert_rules;
