-- +goose Up
-- Patch policies: which patches a partner (org_id NULL) or one organization approves by
-- itself, and when its target devices install the approved ones. auto_approve, schedule,
-- targets and rings are JSON (JSONB). A policy runs on a schedule (next_run_at: its next run) or in
-- the occurrences of a maintenance window (last_occurrence_id: the occurrence it last served);
-- the conditional UPDATE of either column claims a run, so one node starts it.
CREATE TABLE patch_policies (
    id                    UUID PRIMARY KEY,
    partner_id            UUID NOT NULL REFERENCES partners(id),
    org_id                UUID REFERENCES organizations(id),
    name                  TEXT NOT NULL,
    description           TEXT NOT NULL DEFAULT '',
    enabled               BOOLEAN NOT NULL,
    auto_approve          JSONB,
    deferral_days         INTEGER NOT NULL DEFAULT 0,
    deadline_days         INTEGER,
    reboot_behavior       TEXT NOT NULL,
    schedule              JSONB,
    maintenance_window_id UUID,
    targets               JSONB NOT NULL,
    rings                 JSONB NOT NULL DEFAULT '[]',
    next_run_at           TIMESTAMPTZ,
    last_run_at           TIMESTAMPTZ,
    last_occurrence_id    UUID,
    last_job_ids          JSONB NOT NULL DEFAULT '[]',
    last_approved         INTEGER NOT NULL DEFAULT 0,
    created_by            TEXT,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX patch_policies_name ON patch_policies (partner_id, COALESCE(org_id::text, ''), lower(name));
CREATE INDEX patch_policies_partner ON patch_policies (partner_id, id);
CREATE INDEX patch_policies_due ON patch_policies (next_run_at) WHERE enabled;
CREATE INDEX patch_policies_windows ON patch_policies (maintenance_window_id) WHERE enabled AND maintenance_window_id IS NOT NULL;

-- +goose Down
DROP TABLE patch_policies;
