-- +goose Up
-- Patch policies: which patches a partner (org_id NULL) or one organization approves by
-- itself, and when its target devices install the approved ones. auto_approve, schedule,
-- targets and rings are JSON. A policy runs on a schedule (next_run_at: its next run) or in
-- the occurrences of a maintenance window (last_occurrence_id: the occurrence it last served);
-- the conditional UPDATE of either column claims a run, so one node starts it.
CREATE TABLE patch_policies (
    id                    TEXT PRIMARY KEY,
    partner_id            TEXT NOT NULL REFERENCES partners(id),
    org_id                TEXT REFERENCES organizations(id),
    name                  TEXT NOT NULL,
    description           TEXT NOT NULL DEFAULT '',
    enabled               BOOLEAN NOT NULL,
    auto_approve          TEXT,
    deferral_days         INTEGER NOT NULL DEFAULT 0,
    deadline_days         INTEGER,
    reboot_behavior       TEXT NOT NULL,
    schedule              TEXT,
    maintenance_window_id TEXT,
    targets               TEXT NOT NULL,
    rings                 TEXT NOT NULL DEFAULT '[]',
    next_run_at           TIMESTAMP,
    last_run_at           TIMESTAMP,
    last_occurrence_id    TEXT,
    last_job_ids          TEXT NOT NULL DEFAULT '[]',
    last_approved         INTEGER NOT NULL DEFAULT 0,
    created_by            TEXT,
    created_at            TIMESTAMP NOT NULL,
    updated_at            TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX patch_policies_name ON patch_policies (partner_id, COALESCE(org_id, ''), lower(name));
CREATE INDEX patch_policies_partner ON patch_policies (partner_id, id);
CREATE INDEX patch_policies_due ON patch_policies (next_run_at) WHERE enabled;
CREATE INDEX patch_policies_windows ON patch_policies (maintenance_window_id) WHERE enabled AND maintenance_window_id IS NOT NULL;

-- +goose Down
DROP TABLE patch_policies;
