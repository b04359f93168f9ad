-- +goose Up
-- Patches a partner's devices were offered, unique per partner by (source, external_id). A
-- Linux update's external_id is <manager>:<name>:<arch>:<version>, so every version of a
-- package is a patch of its own.
CREATE TABLE patches (
    id              TEXT PRIMARY KEY,
    partner_id      TEXT NOT NULL REFERENCES partners(id),
    source          TEXT NOT NULL,
    external_id     TEXT NOT NULL,
    package_id      TEXT NOT NULL,
    title           TEXT NOT NULL,
    version         TEXT NOT NULL,
    vendor          TEXT,
    cve_ids         TEXT NOT NULL DEFAULT '[]',
    severity        TEXT NOT NULL,
    category        TEXT NOT NULL,
    requires_reboot BOOLEAN NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX patches_external ON patches (partner_id, source, external_id);
CREATE INDEX patches_partner ON patches (partner_id, id);

-- A partner's decision on a patch: for all its organizations (org_key '') or for one
-- (org_key = org_id); the organization's decision wins over the partner's. Unique per
-- (patch, org_key), so two decisions racing end in one row.
CREATE TABLE patch_approvals (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL REFERENCES partners(id),
    patch_id         TEXT NOT NULL REFERENCES patches(id) ON DELETE CASCADE,
    org_id           TEXT REFERENCES organizations(id),
    org_key          TEXT NOT NULL,
    status           TEXT NOT NULL,
    note             TEXT NOT NULL DEFAULT '',
    deferred_until   TIMESTAMP,
    decided_by       TEXT,
    decided_by_email TEXT,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX patch_approvals_patch ON patch_approvals (patch_id, org_key);
CREATE INDEX patch_approvals_partner ON patch_approvals (partner_id, id);

-- A patch on one device: pending while offered, installed, failed, skipped or missing, with
-- the versions seen. previous_version is what an install replaced (what a rollback goes back
-- to); offered_at is when a scan first offered it.
CREATE TABLE patch_devices (
    device_id         TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    patch_id          TEXT NOT NULL REFERENCES patches(id) ON DELETE CASCADE,
    partner_id        TEXT NOT NULL,
    org_id            TEXT NOT NULL,
    source            TEXT NOT NULL,
    status            TEXT NOT NULL,
    installed_version TEXT NOT NULL DEFAULT '',
    available_version TEXT NOT NULL DEFAULT '',
    previous_version  TEXT NOT NULL DEFAULT '',
    error             TEXT,
    offered_at        TIMESTAMP NOT NULL,
    installed_at      TIMESTAMP,
    updated_at        TIMESTAMP NOT NULL,
    PRIMARY KEY (device_id, patch_id)
);
CREATE INDEX patch_devices_patch ON patch_devices (patch_id, status);

-- Per device, what its patches add up to, kept with every change of them so compliance reads
-- one row per device.
CREATE TABLE patch_device_summaries (
    device_id        TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    partner_id       TEXT NOT NULL,
    org_id           TEXT NOT NULL,
    pending          INTEGER NOT NULL,
    critical_pending INTEGER NOT NULL,
    installed        INTEGER NOT NULL,
    failed           INTEGER NOT NULL,
    reboot_required  BOOLEAN NOT NULL,
    last_scan_at     TIMESTAMP,
    updated_at       TIMESTAMP NOT NULL
);
CREATE INDEX patch_device_summaries_partner ON patch_device_summaries (partner_id, org_id);

-- A scan, install or rollback over devices. org_id is set for a job started by an
-- organization's caller (it reaches that organization's devices only).
CREATE TABLE patch_jobs (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL REFERENCES partners(id),
    org_id           TEXT REFERENCES organizations(id),
    kind             TEXT NOT NULL,
    status           TEXT NOT NULL,
    patch_id         TEXT REFERENCES patches(id) ON DELETE SET NULL,
    skipped          INTEGER NOT NULL DEFAULT 0,
    created_by       TEXT,
    created_by_email TEXT,
    created_at       TIMESTAMP NOT NULL,
    completed_at     TIMESTAMP
);
CREATE INDEX patch_jobs_partner ON patch_jobs (partner_id, id);
CREATE INDEX patch_jobs_running ON patch_jobs (status) WHERE status = 'running';

-- A job's work on one device: waiting (held by a maintenance window, packages kept for
-- later), queued (its command is out), then completed or failed.
CREATE TABLE patch_job_devices (
    job_id     TEXT NOT NULL REFERENCES patch_jobs(id) ON DELETE CASCADE,
    device_id  TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    partner_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    command_id TEXT,
    status     TEXT NOT NULL,
    packages   TEXT,
    error      TEXT,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (job_id, device_id)
);
CREATE UNIQUE INDEX patch_job_devices_command ON patch_job_devices (command_id);
CREATE INDEX patch_job_devices_waiting ON patch_job_devices (status) WHERE status = 'waiting';

-- Compliance reports, built in the background into blob storage. progress counts the rows
-- written so far.
CREATE TABLE patch_reports (
    id               TEXT PRIMARY KEY,
    partner_id       TEXT NOT NULL REFERENCES partners(id),
    org_id           TEXT REFERENCES organizations(id),
    format           TEXT NOT NULL,
    status           TEXT NOT NULL,
    progress         INTEGER NOT NULL DEFAULT 0,
    blob_key         TEXT,
    size_bytes       BIGINT,
    error            TEXT,
    created_by       TEXT,
    created_by_email TEXT,
    created_at       TIMESTAMP NOT NULL,
    started_at       TIMESTAMP,
    updated_at       TIMESTAMP NOT NULL,
    completed_at     TIMESTAMP
);
CREATE INDEX patch_reports_partner ON patch_reports (partner_id, id);
CREATE INDEX patch_reports_queued ON patch_reports (status, created_at) WHERE status IN ('queued', 'running');

-- +goose Down
DROP TABLE patch_reports;
DROP TABLE patch_job_devices;
DROP TABLE patch_jobs;
DROP TABLE patch_device_summaries;
DROP TABLE patch_devices;
DROP TABLE patch_approvals;
DROP TABLE patches;
