-- +goose Up
-- Alert rules belong to a partner, or to one of its organizations (org_id). targets and
-- conditions are JSON documents validated by the alerts package.
CREATE TABLE alert_rules (
    id               UUID PRIMARY KEY,
    partner_id       UUID NOT NULL REFERENCES partners(id),
    org_id           UUID REFERENCES organizations(id),
    name             TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    severity         TEXT NOT NULL,
    enabled          BOOLEAN NOT NULL,
    targets          JSONB NOT NULL,
    conditions       JSONB NOT NULL,
    title_template   TEXT NOT NULL,
    message_template TEXT NOT NULL,
    auto_resolve     BOOLEAN NOT NULL,
    cooldown_minutes INTEGER NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX alert_rules_partner ON alert_rules (partner_id, enabled);

-- Alerts: active, acknowledged and suppressed are open; resolved and dismissed are terminal.
CREATE TABLE alerts (
    id               UUID PRIMARY KEY,
    partner_id       UUID NOT NULL REFERENCES partners(id),
    org_id           UUID NOT NULL REFERENCES organizations(id),
    site_id          UUID,
    device_id        UUID REFERENCES devices(id) ON DELETE CASCADE,
    rule_id          UUID REFERENCES alert_rules(id) ON DELETE SET NULL,
    severity         TEXT NOT NULL,
    status           TEXT NOT NULL,
    title            TEXT NOT NULL,
    message          TEXT NOT NULL,
    context          JSONB NOT NULL,
    triggered_at     TIMESTAMPTZ NOT NULL,
    acknowledged_at  TIMESTAMPTZ,
    acknowledged_by  TEXT,
    resolved_at      TIMESTAMPTZ,
    resolved_by      TEXT,
    resolution_note  TEXT,
    suppressed_until TIMESTAMPTZ,
    dismissed_at     TIMESTAMPTZ,
    dismissed_by     TEXT,
    updated_at       TIMESTAMPTZ NOT NULL
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
    id               UUID PRIMARY KEY,
    partner_id       UUID NOT NULL REFERENCES partners(id),
    org_id           UUID REFERENCES organizations(id),
    name             TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    category         TEXT NOT NULL DEFAULT '',
    severity         TEXT NOT NULL,
    conditions       JSONB NOT NULL,
    title_template   TEXT NOT NULL,
    message_template TEXT NOT NULL,
    auto_resolve     BOOLEAN NOT NULL,
    cooldown_minutes INTEGER NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX alert_templates_partner ON alert_templates (partner_id, name);

-- +goose Down
DROP TABLE alert_templates;
DROP TABLE alerts;
DROP TABLE alert_rules;
