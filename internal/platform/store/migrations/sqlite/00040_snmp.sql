-- +goose Up
-- SNMP devices of an organization, polled through an online agent of site_id (or the agent of
-- probe_device_id). credentials is the sealed JSON of the community or the v3 user and its
-- passwords; username, auth_protocol and priv_protocol repeat what may be shown. template_id
-- names a built-in template (kept in code) or a row of snmp_templates. status is unknown,
-- online or offline; consecutive_failures counts failed polls since the last success.
-- next_poll_at is when the dispatcher claims the device next (conditionally, so one node
-- polls it).
CREATE TABLE snmp_devices (
    id                   TEXT PRIMARY KEY,
    partner_id           TEXT NOT NULL REFERENCES partners(id),
    org_id               TEXT NOT NULL REFERENCES organizations(id),
    site_id              TEXT NOT NULL,
    probe_device_id      TEXT,
    name                 TEXT NOT NULL,
    ip_address           TEXT NOT NULL,
    port                 INTEGER NOT NULL,
    version              TEXT NOT NULL,
    credentials          TEXT NOT NULL,
    username             TEXT,
    auth_protocol        TEXT,
    priv_protocol        TEXT,
    template_id          TEXT NOT NULL,
    interval_seconds     INTEGER NOT NULL,
    enabled              BOOLEAN NOT NULL,
    status               TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_poll_at         TIMESTAMP,
    last_success_at      TIMESTAMP,
    last_error           TEXT,
    next_poll_at         TIMESTAMP NOT NULL,
    created_by           TEXT,
    created_at           TIMESTAMP NOT NULL,
    updated_at           TIMESTAMP NOT NULL
);
CREATE INDEX snmp_devices_org ON snmp_devices (partner_id, org_id, id);
CREATE INDEX snmp_devices_due ON snmp_devices (next_poll_at) WHERE enabled;
CREATE INDEX snmp_devices_template ON snmp_devices (template_id);
CREATE UNIQUE INDEX snmp_devices_address ON snmp_devices (org_id, ip_address, port);

-- Custom templates of an organization; device_count counts the devices using one, so a
-- template in use cannot be deleted (the conditional DELETE and the devices' increments meet
-- on the row).
CREATE TABLE snmp_templates (
    id           TEXT PRIMARY KEY,
    partner_id   TEXT NOT NULL REFERENCES partners(id),
    org_id       TEXT NOT NULL REFERENCES organizations(id),
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    device_count INTEGER NOT NULL DEFAULT 0,
    created_by   TEXT,
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL
);
CREATE INDEX snmp_templates_org ON snmp_templates (partner_id, org_id, id);
CREATE UNIQUE INDEX snmp_templates_name ON snmp_templates (org_id, name);

-- The OIDs of a custom template, in order.
CREATE TABLE snmp_template_oids (
    template_id TEXT NOT NULL REFERENCES snmp_templates(id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    partner_id  TEXT NOT NULL,
    org_id      TEXT NOT NULL,
    oid         TEXT NOT NULL,
    name        TEXT NOT NULL,
    label       TEXT NOT NULL,
    unit        TEXT NOT NULL,
    type        TEXT NOT NULL,
    PRIMARY KEY (template_id, position)
);
CREATE INDEX snmp_template_oids_oid ON snmp_template_oids (oid);

-- Numeric samples of polled OIDs: collected_at in Unix seconds; rate is the per-second rate
-- of a counter (NULL for other types, a first sample and a reset). Kept
-- SNMP_METRICS_RETENTION_DAYS.
CREATE TABLE snmp_metrics (
    device_id    TEXT NOT NULL,
    oid          TEXT NOT NULL,
    collected_at INTEGER NOT NULL,
    partner_id   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    value        REAL NOT NULL,
    rate         REAL,
    PRIMARY KEY (device_id, oid, collected_at)
) WITHOUT ROWID;
CREATE INDEX snmp_metrics_age ON snmp_metrics (collected_at);

-- Hourly aggregates of the samples (for a counter, of its rates): history in buckets of an
-- hour or more reads these. hour is the hour's start in Unix seconds.
CREATE TABLE snmp_rollups (
    device_id  TEXT NOT NULL,
    oid        TEXT NOT NULL,
    hour       INTEGER NOT NULL,
    partner_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    total      REAL NOT NULL,
    lowest     REAL NOT NULL,
    highest    REAL NOT NULL,
    samples    INTEGER NOT NULL,
    PRIMARY KEY (device_id, oid, hour)
) WITHOUT ROWID;
CREATE INDEX snmp_rollups_age ON snmp_rollups (hour);

-- The last value of each OID of a device (numbers and text), the raw counter rates are
-- computed from.
CREATE TABLE snmp_latest (
    device_id    TEXT NOT NULL REFERENCES snmp_devices(id) ON DELETE CASCADE,
    oid          TEXT NOT NULL,
    partner_id   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    type         TEXT NOT NULL,
    value        REAL,
    text         TEXT,
    rate         REAL,
    collected_at TIMESTAMP NOT NULL,
    PRIMARY KEY (device_id, oid)
);

-- Thresholds of an OID of a device; breached is the state at the last poll.
CREATE TABLE snmp_thresholds (
    id         TEXT PRIMARY KEY,
    partner_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    device_id  TEXT NOT NULL REFERENCES snmp_devices(id) ON DELETE CASCADE,
    oid        TEXT NOT NULL,
    operator   TEXT NOT NULL,
    value      REAL NOT NULL,
    severity   TEXT NOT NULL,
    breached   BOOLEAN NOT NULL DEFAULT FALSE,
    created_by TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX snmp_thresholds_device ON snmp_thresholds (device_id, id);

-- One row per poll of a device (ok or not), kept a day, for the dashboard.
CREATE TABLE snmp_polls (
    device_id  TEXT NOT NULL,
    polled_at  TIMESTAMP NOT NULL,
    partner_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    ok         BOOLEAN NOT NULL
);
CREATE INDEX snmp_polls_org ON snmp_polls (org_id, polled_at);
CREATE INDEX snmp_polls_age ON snmp_polls (polled_at);

-- +goose Down
DROP TABLE snmp_polls;
DROP TABLE snmp_thresholds;
DROP TABLE snmp_latest;
DROP TABLE snmp_rollups;
DROP TABLE snmp_metrics;
DROP TABLE snmp_template_oids;
DROP TABLE snmp_templates;
DROP TABLE snmp_devices;
