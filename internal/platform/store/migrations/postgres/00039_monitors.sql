-- +goose Up
-- Monitors of an organization: a check (type icmp_ping, tcp_port, http_check, dns_check,
-- service_check) of target run by an online agent of the site (site_id) or organization every
-- interval_seconds. config and alert_rules are JSON. device_id is the device a service_check
-- runs on. status is online, offline, degraded or unknown; last_* and consecutive_failures
-- describe the last stored result; firing lists the alert rules whose condition held at the
-- last result (only they may have an alert to resolve). next_check_at is when the scheduler
-- claims the monitor next; the claim moves it conditionally, so one node dispatches each due
-- check.
CREATE TABLE monitors (
    id                   UUID PRIMARY KEY,
    partner_id           UUID NOT NULL REFERENCES partners(id),
    org_id               UUID NOT NULL REFERENCES organizations(id),
    site_id              UUID,
    device_id            UUID,
    name                 TEXT NOT NULL,
    type                 TEXT NOT NULL,
    target               TEXT NOT NULL,
    config               TEXT NOT NULL,
    alert_rules          TEXT NOT NULL,
    interval_seconds     INTEGER NOT NULL,
    timeout_seconds      INTEGER NOT NULL,
    enabled              BOOLEAN NOT NULL,
    status               TEXT NOT NULL,
    last_check_at        TIMESTAMPTZ,
    last_response_ms     DOUBLE PRECISION,
    last_error           TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    firing               TEXT NOT NULL DEFAULT '[]',
    next_check_at        TIMESTAMPTZ NOT NULL,
    created_by           TEXT,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL
);
CREATE INDEX monitors_org ON monitors (partner_id, org_id, id);
CREATE INDEX monitors_due ON monitors (next_check_at) WHERE enabled;

-- The stored results of a monitor's checks, kept MONITOR_RESULTS_RETENTION_DAYS.
CREATE TABLE monitor_results (
    id          UUID PRIMARY KEY,
    monitor_id  UUID NOT NULL REFERENCES monitors(id) ON DELETE CASCADE,
    partner_id  UUID NOT NULL,
    org_id      UUID NOT NULL,
    checked_at  TIMESTAMPTZ NOT NULL,
    status      TEXT NOT NULL,
    response_ms DOUBLE PRECISION,
    error       TEXT NOT NULL DEFAULT '',
    details     TEXT NOT NULL
);
CREATE INDEX monitor_results_range ON monitor_results (monitor_id, checked_at, id);
CREATE INDEX monitor_results_age ON monitor_results (checked_at);

-- +goose Down
DROP TABLE monitor_results;
DROP TABLE monitors;
