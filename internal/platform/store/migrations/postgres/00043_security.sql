-- +goose Up
-- The security state of a device as its agent last reported it (security_status): the
-- snapshot as JSON (last, so that reading the other columns never walks it) plus the columns
-- lists filter and score on. A row exists once the status
-- was first asked for; collected_at is NULL until the first answer (such rows are not listed).
-- online mirrors the device's status (kept by the devices hook); state is protected, at_risk,
-- unprotected or offline, judged against the security policy that applies.
CREATE TABLE security_device_status (
    device_id            UUID PRIMARY KEY,
    partner_id           UUID NOT NULL REFERENCES partners(id),
    org_id               UUID NOT NULL REFERENCES organizations(id),
    site_id              UUID,
    hostname             TEXT NOT NULL DEFAULT '',
    os_name              TEXT NOT NULL DEFAULT '',
    os_version           TEXT NOT NULL DEFAULT '',
    online               BOOLEAN NOT NULL DEFAULT TRUE,
    state                TEXT NOT NULL DEFAULT 'unprotected',
    provider             TEXT NOT NULL DEFAULT '',
    av_installed         BOOLEAN NOT NULL DEFAULT FALSE,
    av_running           BOOLEAN NOT NULL DEFAULT FALSE,
    real_time_protection BOOLEAN NOT NULL DEFAULT FALSE,
    signatures_at        TIMESTAMPTZ,
    firewall_enabled     BOOLEAN NOT NULL DEFAULT FALSE,
    firewall_backend     TEXT NOT NULL DEFAULT '',
    encryption_status    TEXT NOT NULL DEFAULT 'unknown',
    password_summary     TEXT NOT NULL DEFAULT '',
    password_max_days    INTEGER NOT NULL DEFAULT 0,
    password_min_length  INTEGER NOT NULL DEFAULT 0,
    admin_count          INTEGER NOT NULL DEFAULT 0,
    extra_root           BOOLEAN NOT NULL DEFAULT FALSE,
    exposed_ports        INTEGER NOT NULL DEFAULT 0,
    auto_updates         BOOLEAN NOT NULL DEFAULT FALSE,
    threat_count         INTEGER NOT NULL DEFAULT 0,
    last_scan_at         TIMESTAMPTZ,
    requested_at         TIMESTAMPTZ,
    collected_at         TIMESTAMPTZ,
    updated_at           TIMESTAMPTZ NOT NULL,
    snapshot             TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX security_device_status_org ON security_device_status (partner_id, org_id, device_id);
CREATE INDEX security_device_status_state ON security_device_status (org_id, state);
CREATE INDEX security_device_status_os ON security_device_status (org_id, os_name, os_version, collected_at);

-- Threats found by scans, one row per (device, file checksum, path). status is active,
-- quarantined or removed and moves only on the agent's confirmation of a threat_action;
-- pending_action and pending_command_id name the action under way, action_seq guards
-- against two actions at once (a conditional update on it).
CREATE TABLE security_threats (
    id                 UUID PRIMARY KEY,
    partner_id         UUID NOT NULL REFERENCES partners(id),
    org_id             UUID NOT NULL REFERENCES organizations(id),
    device_id          UUID NOT NULL,
    name               TEXT NOT NULL,
    category           TEXT NOT NULL,
    severity           TEXT NOT NULL,
    status             TEXT NOT NULL,
    file_path          TEXT NOT NULL,
    sha256             TEXT NOT NULL,
    size               BIGINT NOT NULL DEFAULT 0,
    location           TEXT NOT NULL DEFAULT '',
    scan_id            UUID,
    pending_action     TEXT,
    pending_command_id UUID,
    action_seq         INTEGER NOT NULL DEFAULT 0,
    last_action_error  TEXT,
    detected_at        TIMESTAMPTZ NOT NULL,
    last_seen_at       TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX security_threats_file ON security_threats (device_id, sha256, file_path);
CREATE INDEX security_threats_org ON security_threats (partner_id, org_id, id);
CREATE INDEX security_threats_command ON security_threats (pending_command_id);

-- Scans asked for (POST /security/scan/{deviceId} or a policy's schedule), each with the
-- security_scan command that carries it. status: queued, running, completed, failed.
CREATE TABLE security_scans (
    id            UUID PRIMARY KEY,
    partner_id    UUID NOT NULL REFERENCES partners(id),
    org_id        UUID NOT NULL REFERENCES organizations(id),
    device_id     UUID NOT NULL,
    command_id    UUID NOT NULL,
    scan_type     TEXT NOT NULL,
    paths         TEXT NOT NULL DEFAULT '[]',
    status        TEXT NOT NULL,
    engine        TEXT NOT NULL DEFAULT '',
    files_scanned INTEGER NOT NULL DEFAULT 0,
    threats_found INTEGER NOT NULL DEFAULT 0,
    truncated     BOOLEAN NOT NULL DEFAULT FALSE,
    error         TEXT,
    created_by    TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    completed_at  TIMESTAMPTZ
);
CREATE INDEX security_scans_device ON security_scans (device_id, created_at, id);
CREATE INDEX security_scans_command ON security_scans (command_id);

-- Security policies: what a device's status is judged against. One per organization, and
-- one default per partner (org_id NULL).
CREATE TABLE security_policies (
    id                  UUID PRIMARY KEY,
    partner_id          UUID NOT NULL REFERENCES partners(id),
    org_id              UUID REFERENCES organizations(id),
    name                TEXT NOT NULL,
    require_firewall    BOOLEAN NOT NULL,
    require_encryption  BOOLEAN NOT NULL,
    require_antivirus   BOOLEAN NOT NULL,
    min_password_length INTEGER NOT NULL,
    max_administrators  INTEGER NOT NULL,
    scan_schedule       TEXT NOT NULL DEFAULT 'null',
    last_scheduled_day  TEXT NOT NULL DEFAULT '',
    created_by          TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX security_policies_org ON security_policies (org_id) WHERE org_id IS NOT NULL;
CREATE UNIQUE INDEX security_policies_partner ON security_policies (partner_id) WHERE org_id IS NULL;

-- One snapshot of an organization's security per day (UTC), for trends.
CREATE TABLE security_snapshots (
    org_id         UUID NOT NULL REFERENCES organizations(id),
    day            TEXT NOT NULL,
    partner_id     UUID NOT NULL,
    score          INTEGER NOT NULL,
    devices        INTEGER NOT NULL,
    protected      INTEGER NOT NULL,
    at_risk        INTEGER NOT NULL,
    unprotected    INTEGER NOT NULL,
    offline        INTEGER NOT NULL,
    active_threats INTEGER NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (org_id, day)
);

-- Recommendations an organization completed or dismissed, by key.
CREATE TABLE security_recommendation_states (
    org_id     UUID NOT NULL REFERENCES organizations(id),
    rec_key    TEXT NOT NULL,
    partner_id UUID NOT NULL,
    status     TEXT NOT NULL,
    changed_by TEXT,
    changed_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (org_id, rec_key)
);

-- +goose Down
DROP TABLE security_recommendation_states;
DROP TABLE security_snapshots;
DROP TABLE security_policies;
DROP TABLE security_scans;
DROP TABLE security_threats;
DROP TABLE security_device_status;
