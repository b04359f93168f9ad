-- +goose Up
-- Outbound webhooks: subscriptions of a partner (every organization's events) or of one
-- organization, and one delivery row per event and subscription, sent by a worker on every
-- node that claims due rows with a conditional update.
CREATE TABLE webhooks (
    id            TEXT PRIMARY KEY,
    partner_id    TEXT NOT NULL REFERENCES partners(id),
    org_id        TEXT REFERENCES organizations(id),
    name          TEXT NOT NULL,
    url           TEXT NOT NULL,
    events        TEXT NOT NULL,
    -- headers: the JSON object of extra request headers, sealed (they often carry credentials).
    headers       TEXT NOT NULL,
    header_names  TEXT NOT NULL DEFAULT '[]',
    -- secret: the signing secret sealed with APP_ENCRYPTION_KEY; secret_hint its last characters.
    secret        TEXT NOT NULL,
    secret_hint   TEXT NOT NULL,
    enabled       BOOLEAN NOT NULL DEFAULT TRUE,
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);
CREATE INDEX webhooks_partner ON webhooks (partner_id, org_id);

CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    -- payload: the exact body sent on every attempt.
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    next_attempt_at TIMESTAMP,
    claim_token     TEXT,
    claimed_until   TIMESTAMP,
    response_status INTEGER,
    response_body   TEXT,
    duration_ms     INTEGER,
    error           TEXT,
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL,
    delivered_at    TIMESTAMP
);
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (webhook_id, event_id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);

-- One row per attempt: what was answered and how long it took.
CREATE TABLE webhook_delivery_attempts (
    id              TEXT PRIMARY KEY,
    delivery_id     TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    attempt         INTEGER NOT NULL,
    started_at      TIMESTAMP NOT NULL,
    response_status INTEGER,
    response_body   TEXT,
    duration_ms     INTEGER NOT NULL,
    error           TEXT
);
CREATE INDEX webhook_delivery_attempts_delivery ON webhook_delivery_attempts (delivery_id, attempt);

-- +goose Down
DROP TABLE webhook_delivery_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
