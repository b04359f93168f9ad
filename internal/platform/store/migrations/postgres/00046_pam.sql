-- +goose Up
-- Privileged access management. pam_rules decide elevation requests of an organization's
-- devices: the first enabled rule (by priority, created_at, id) whose match fields, site and
-- time window all hold gives its verdict (auto_approve, auto_deny, require_approval,
-- ignore). window_days is a JSON list of weekdays (0 = Sunday).
CREATE TABLE pam_signer_groups (
    id          UUID PRIMARY KEY,
    partner_id  UUID NOT NULL REFERENCES partners(id),
    org_id      UUID NOT NULL REFERENCES organizations(id),
    name        TEXT NOT NULL,
    signers     TEXT NOT NULL,
    thumbprints TEXT NOT NULL,
    created_by  TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX pam_signer_groups_org ON pam_signer_groups (partner_id, org_id, id);

CREATE TABLE pam_rules (
    id                      UUID PRIMARY KEY,
    partner_id              UUID NOT NULL REFERENCES partners(id),
    org_id                  UUID NOT NULL REFERENCES organizations(id),
    site_id                 UUID,
    name                    TEXT NOT NULL,
    priority                INTEGER NOT NULL,
    verdict                 TEXT NOT NULL,
    approval_minutes        INTEGER NOT NULL,
    enabled                 BOOLEAN NOT NULL,
    match_signer            TEXT NOT NULL DEFAULT '',
    match_signer_thumbprint TEXT NOT NULL DEFAULT '',
    match_signer_group_id   UUID REFERENCES pam_signer_groups(id),
    match_hash              TEXT NOT NULL DEFAULT '',
    match_path_glob         TEXT NOT NULL DEFAULT '',
    match_parent_image      TEXT NOT NULL DEFAULT '',
    match_command_line      TEXT NOT NULL DEFAULT '',
    match_user              TEXT NOT NULL DEFAULT '',
    match_ad_group          TEXT NOT NULL DEFAULT '',
    window_start            TEXT NOT NULL DEFAULT '',
    window_end              TEXT NOT NULL DEFAULT '',
    window_days             TEXT NOT NULL DEFAULT '[]',
    window_timezone         TEXT NOT NULL DEFAULT '',
    created_by              TEXT,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL
);
CREATE INDEX pam_rules_org ON pam_rules (org_id, priority, created_at, id);
CREATE INDEX pam_rules_group ON pam_rules (match_signer_group_id);

-- One row per organization that changed its PAM settings: the default verdict of unmatched
-- requests, and rules_version, bumped by every change of rules, signer groups or this row, so
-- that every node's compiled rule cache sees the change at its next decision.
CREATE TABLE pam_config (
    org_id          UUID PRIMARY KEY REFERENCES organizations(id),
    partner_id      UUID NOT NULL REFERENCES partners(id),
    default_verdict TEXT NOT NULL,
    rules_version   INTEGER NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

-- Elevation requests. status: pending, approved, denied, ignored, revoked, expired. An
-- approved request is active until expires_at.
CREATE TABLE pam_requests (
    id                UUID PRIMARY KEY,
    partner_id        UUID NOT NULL REFERENCES partners(id),
    org_id            UUID NOT NULL REFERENCES organizations(id),
    site_id           UUID,
    device_id         UUID NOT NULL,
    local_id          TEXT NOT NULL,
    subject_user      TEXT NOT NULL,
    subject_uid       INTEGER NOT NULL,
    subject_groups    TEXT NOT NULL,
    path              TEXT NOT NULL,
    sha256            TEXT NOT NULL,
    signer            TEXT NOT NULL,
    signer_thumbprint TEXT NOT NULL,
    parent_image      TEXT NOT NULL,
    command_line      TEXT NOT NULL,
    grant_mode        BOOLEAN NOT NULL,
    status            TEXT NOT NULL,
    decided_via       TEXT NOT NULL,
    rule_id           UUID,
    decided_by        TEXT,
    decided_at        TIMESTAMPTZ,
    reason            TEXT NOT NULL DEFAULT '',
    duration_minutes  INTEGER NOT NULL,
    expires_at        TIMESTAMPTZ,
    requested_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX pam_requests_org ON pam_requests (partner_id, org_id, id);
CREATE INDEX pam_requests_status ON pam_requests (status, expires_at);
CREATE INDEX pam_requests_time ON pam_requests (org_id, requested_at);

-- +goose Down
DROP TABLE pam_requests;
DROP TABLE pam_config;
DROP TABLE pam_rules;
DROP TABLE pam_signer_groups;
