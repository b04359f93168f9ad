-- +goose Up
-- Network discovery. A profile says what a site's agent scans (subnets, excludes, methods,
-- ports: JSON lists) and when (schedule: JSON; next_run_at: its next run, claimed by a
-- conditional UPDATE so one node starts it; JSON is JSONB). snmp holds the sealed SNMP
-- credentials.
CREATE TABLE discovery_profiles (
    id              UUID PRIMARY KEY,
    partner_id      UUID NOT NULL REFERENCES partners(id),
    org_id          UUID NOT NULL REFERENCES organizations(id),
    site_id         UUID NOT NULL REFERENCES sites(id),
    name            TEXT NOT NULL,
    subnets         JSONB NOT NULL,
    excludes        JSONB NOT NULL DEFAULT '[]',
    methods         JSONB NOT NULL,
    ports           JSONB NOT NULL DEFAULT '[]',
    snmp            TEXT,
    deep_scan       BOOLEAN NOT NULL DEFAULT FALSE,
    schedule        JSONB NOT NULL,
    timeout_ms      INTEGER NOT NULL,
    concurrency     INTEGER NOT NULL,
    agent_device_id UUID,
    next_run_at     TIMESTAMPTZ,
    last_run_at     TIMESTAMPTZ,
    created_by      TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX discovery_profiles_name ON discovery_profiles (site_id, lower(name));
CREATE INDEX discovery_profiles_org ON discovery_profiles (org_id, id);
CREATE INDEX discovery_profiles_partner ON discovery_profiles (partner_id, id);
CREATE INDEX discovery_profiles_due ON discovery_profiles (next_run_at) WHERE next_run_at IS NOT NULL;

-- A scan of a profile, carried out by one agent through a network_scan command. At most one
-- job of a profile is scheduled or running (the unique index decides between two starts).
CREATE TABLE discovery_jobs (
    id              UUID PRIMARY KEY,
    partner_id      UUID NOT NULL REFERENCES partners(id),
    org_id          UUID NOT NULL REFERENCES organizations(id),
    site_id         UUID NOT NULL REFERENCES sites(id),
    profile_id      UUID NOT NULL REFERENCES discovery_profiles(id) ON DELETE CASCADE,
    agent_device_id UUID NOT NULL,
    command_id      UUID,
    status          TEXT NOT NULL,
    trigger_kind    TEXT NOT NULL,
    hosts_total     INTEGER NOT NULL DEFAULT 0,
    hosts_scanned   INTEGER NOT NULL DEFAULT 0,
    hosts_found     INTEGER NOT NULL DEFAULT 0,
    new_assets      INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    created_by      TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    started_at      TIMESTAMPTZ,
    completed_at    TIMESTAMPTZ
);
CREATE UNIQUE INDEX discovery_jobs_one_active ON discovery_jobs (profile_id) WHERE status IN ('scheduled', 'running');
CREATE INDEX discovery_jobs_org ON discovery_jobs (org_id, id);
CREATE INDEX discovery_jobs_partner ON discovery_jobs (partner_id, id);
CREATE INDEX discovery_jobs_command ON discovery_jobs (command_id);
CREATE INDEX discovery_jobs_open ON discovery_jobs (status) WHERE status IN ('scheduled', 'running');

-- What discovery found, one row per address of an organization. ip_key orders addresses
-- numerically (8 hex digits). open_ports and monitor_ids are JSON lists.
CREATE TABLE discovery_assets (
    id                 UUID PRIMARY KEY,
    partner_id         UUID NOT NULL REFERENCES partners(id),
    org_id             UUID NOT NULL REFERENCES organizations(id),
    site_id            UUID NOT NULL REFERENCES sites(id),
    ip                 TEXT NOT NULL,
    ip_key             TEXT NOT NULL,
    mac                TEXT NOT NULL DEFAULT '',
    hostname           TEXT NOT NULL DEFAULT '',
    asset_type         TEXT NOT NULL,
    open_ports         JSONB NOT NULL DEFAULT '[]',
    sys_name           TEXT NOT NULL DEFAULT '',
    sys_descr          TEXT NOT NULL DEFAULT '',
    sys_object_id      TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL,
    link_source        TEXT,
    linked_device_id   UUID,
    ignore_reason      TEXT,
    monitoring_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    snmp_device_id     UUID,
    monitor_ids        JSONB NOT NULL DEFAULT '[]',
    last_job_id        UUID,
    first_seen_at      TIMESTAMPTZ NOT NULL,
    last_seen_at       TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX discovery_assets_ip ON discovery_assets (org_id, ip);
CREATE INDEX discovery_assets_org_key ON discovery_assets (org_id, ip_key, id);
CREATE INDEX discovery_assets_partner_key ON discovery_assets (partner_id, ip_key, id);
CREATE INDEX discovery_assets_site ON discovery_assets (site_id, ip_key, id);

-- The networks a site's agents reported they sit on, with their gateways, for the topology.
CREATE TABLE discovery_routes (
    partner_id UUID NOT NULL REFERENCES partners(id),
    org_id     UUID NOT NULL REFERENCES organizations(id),
    site_id    UUID NOT NULL REFERENCES sites(id),
    subnet     TEXT NOT NULL,
    gateway    TEXT NOT NULL DEFAULT '',
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (site_id, subnet, gateway)
);
CREATE INDEX discovery_routes_org ON discovery_routes (org_id);

-- +goose Down
DROP TABLE discovery_routes;
DROP TABLE discovery_assets;
DROP TABLE discovery_jobs;
DROP TABLE discovery_profiles;
