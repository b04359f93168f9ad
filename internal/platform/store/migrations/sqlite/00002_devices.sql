-- +goose Up
CREATE TABLE enrollment_keys (
    id             TEXT PRIMARY KEY,
    partner_id     TEXT NOT NULL REFERENCES partners(id),
    org_id         TEXT NOT NULL REFERENCES organizations(id),
    site_id        TEXT REFERENCES sites(id),
    name           TEXT NOT NULL,
    key_hash       TEXT NOT NULL UNIQUE,
    key_prefix     TEXT NOT NULL,
    secret_hash    TEXT,
    max_usage      INTEGER NOT NULL,
    usage_count    INTEGER NOT NULL DEFAULT 0,
    expires_at     TIMESTAMP NOT NULL,
    revoked_at     TIMESTAMP,
    -- device_id is set on the single-use key of a provisioned device: enrolling claims it.
    device_id      TEXT,
    source         TEXT NOT NULL DEFAULT 'api',
    created_by     TEXT,
    last_used_at   TIMESTAMP,
    created_at     TIMESTAMP NOT NULL,
    updated_at     TIMESTAMP NOT NULL
);
CREATE INDEX enrollment_keys_partner ON enrollment_keys (partner_id, id);
CREATE INDEX enrollment_keys_org ON enrollment_keys (org_id, id);

CREATE TABLE devices (
    id                      TEXT PRIMARY KEY,
    partner_id              TEXT NOT NULL REFERENCES partners(id),
    org_id                  TEXT NOT NULL REFERENCES organizations(id),
    site_id                 TEXT NOT NULL REFERENCES sites(id),
    hostname                TEXT NOT NULL,
    display_name            TEXT,
    status                  TEXT NOT NULL DEFAULT 'pending',
    os_type                 TEXT NOT NULL DEFAULT '',
    os_name                 TEXT NOT NULL DEFAULT '',
    os_version              TEXT NOT NULL DEFAULT '',
    os_build                TEXT NOT NULL DEFAULT '',
    architecture            TEXT NOT NULL DEFAULT '',
    agent_version           TEXT NOT NULL DEFAULT '',
    manufacturer            TEXT NOT NULL DEFAULT '',
    model                   TEXT NOT NULL DEFAULT '',
    serial_number           TEXT NOT NULL DEFAULT '',
    cpu_model               TEXT NOT NULL DEFAULT '',
    cpu_cores               INTEGER NOT NULL DEFAULT 0,
    memory_bytes            INTEGER NOT NULL DEFAULT 0,
    ip_address              TEXT NOT NULL DEFAULT '',
    mac_address             TEXT NOT NULL DEFAULT '',
    last_user               TEXT NOT NULL DEFAULT '',
    uptime_seconds          INTEGER NOT NULL DEFAULT 0,
    pending_reboot          BOOLEAN NOT NULL DEFAULT FALSE,
    metrics                 TEXT,
    agent_token_hash        TEXT UNIQUE,
    watchdog_token_hash     TEXT UNIQUE,
    watchdog_status         TEXT,
    watchdog_seen_at        TIMESTAMP,
    main_agent_silent_since TIMESTAMP,
    enrollment_key_id       TEXT,
    created_by              TEXT,
    created_at              TIMESTAMP NOT NULL,
    updated_at              TIMESTAMP NOT NULL,
    enrolled_at             TIMESTAMP,
    last_seen_at            TIMESTAMP,
    inventory_at            TIMESTAMP,
    decommissioned_at       TIMESTAMP
);
-- One index per list sort, led by the tenant column the scope filter uses.
CREATE INDEX devices_partner_hostname ON devices (partner_id, hostname, id);
CREATE INDEX devices_org_hostname ON devices (org_id, hostname, id);
CREATE INDEX devices_partner_seen ON devices (partner_id, (COALESCE(last_seen_at, created_at)), id);
CREATE INDEX devices_partner_enrolled ON devices (partner_id, (COALESCE(enrolled_at, created_at)), id);
CREATE INDEX devices_site ON devices (site_id);
CREATE INDEX devices_status_seen ON devices (status, last_seen_at);

CREATE TABLE device_tags (
    device_id  TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    partner_id TEXT NOT NULL,
    tag        TEXT NOT NULL,
    PRIMARY KEY (device_id, tag)
);
CREATE INDEX device_tags_partner_tag ON device_tags (partner_id, tag);

CREATE TABLE device_inventory (
    device_id    TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    os           TEXT NOT NULL,
    hardware     TEXT NOT NULL,
    disks        TEXT NOT NULL,
    network      TEXT NOT NULL,
    users        TEXT NOT NULL,
    errors       TEXT NOT NULL,
    software_count INTEGER NOT NULL DEFAULT 0,
    collected_at TIMESTAMP NOT NULL,
    received_at  TIMESTAMP NOT NULL
);

CREATE TABLE device_software (
    id           TEXT PRIMARY KEY,
    device_id    TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    version      TEXT NOT NULL,
    publisher    TEXT NOT NULL DEFAULT '',
    architecture TEXT NOT NULL DEFAULT '',
    install_date TEXT NOT NULL DEFAULT '',
    size_bytes   INTEGER NOT NULL DEFAULT 0,
    source       TEXT NOT NULL
);
CREATE INDEX device_software_device ON device_software (device_id, name, id);
CREATE INDEX device_software_name ON device_software (name);

CREATE TABLE device_metrics (
    device_id    TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    recorded_at  TIMESTAMP NOT NULL,
    cpu_percent  REAL NOT NULL,
    ram_percent  REAL NOT NULL,
    disk_percent REAL NOT NULL,
    sample       TEXT NOT NULL,
    PRIMARY KEY (device_id, recorded_at)
);
CREATE INDEX device_metrics_time ON device_metrics (recorded_at);

CREATE TABLE device_commands (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL,
    org_id           TEXT NOT NULL,
    device_id        TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    type             TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL,
    timeout_seconds  INTEGER NOT NULL,
    created_by       TEXT,
    created_by_email TEXT,
    created_at       TIMESTAMP NOT NULL,
    sent_at          TIMESTAMP,
    completed_at     TIMESTAMP,
    expires_at       TIMESTAMP NOT NULL,
    exit_code        INTEGER,
    stdout           TEXT,
    stderr           TEXT,
    truncated        BOOLEAN NOT NULL DEFAULT FALSE,
    duration_ms      INTEGER,
    result           TEXT,
    error            TEXT
);
CREATE INDEX device_commands_device ON device_commands (device_id, status, created_at);
CREATE INDEX device_commands_expiry ON device_commands (status, expires_at);
-- At most one refresh_inventory waiting per device; the loser of a race gets ALREADY_PENDING.
CREATE UNIQUE INDEX device_commands_one_pending_inventory ON device_commands (device_id)
    WHERE type = 'refresh_inventory' AND status IN ('queued', 'sent');

CREATE TABLE agent_calls (
    id          TEXT PRIMARY KEY,
    device_id   TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    method      TEXT NOT NULL,
    args        TEXT NOT NULL,
    status      TEXT NOT NULL,
    result      TEXT,
    error_code  TEXT,
    error       TEXT,
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    answered_at TIMESTAMP
);
CREATE INDEX agent_calls_expiry ON agent_calls (expires_at);

-- +goose Down
DROP TABLE agent_calls;
DROP TABLE device_commands;
DROP TABLE device_metrics;
DROP TABLE device_software;
DROP TABLE device_inventory;
DROP TABLE device_tags;
DROP TABLE devices;
DROP TABLE enrollment_keys;
