-- +goose Up
-- Rollouts (the API's deployments) of one organization: a payload (a script, a software
-- version, a patch set) delivered to the devices its targets resolve to, at once or in
-- batches. current_batch is the batch under way (0 before the start); next_batch_at is set
-- once that batch settled: when the next one goes out (or, after the last, when the rollout
-- ends). Every transition is a conditional update on status.
CREATE TABLE rollouts (
    id                   UUID PRIMARY KEY,
    partner_id           UUID NOT NULL REFERENCES partners(id),
    org_id               UUID NOT NULL REFERENCES organizations(id),
    name                 TEXT NOT NULL,
    description          TEXT NOT NULL DEFAULT '',
    status               TEXT NOT NULL,
    payload_type         TEXT NOT NULL,
    payload              TEXT NOT NULL,
    targets              TEXT NOT NULL,
    strategy             TEXT NOT NULL,
    retry                TEXT NOT NULL,
    respect_maintenance  BOOLEAN NOT NULL,
    batch_count          INTEGER NOT NULL DEFAULT 0,
    current_batch        INTEGER NOT NULL DEFAULT 0,
    next_batch_at        TIMESTAMPTZ,
    pause_reason         TEXT,
    created_by           TEXT,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL,
    started_at           TIMESTAMPTZ,
    completed_at         TIMESTAMPTZ
);
CREATE INDEX rollouts_partner ON rollouts (partner_id, org_id, id);
CREATE INDEX rollouts_active ON rollouts (status) WHERE status IN ('running', 'paused');

-- One device of a rollout: its batch, its state, the command of its latest attempt.
CREATE TABLE rollout_devices (
    rollout_id   UUID NOT NULL REFERENCES rollouts(id) ON DELETE CASCADE,
    device_id    UUID NOT NULL,
    partner_id   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    batch        INTEGER NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    command_id   UUID,
    error        TEXT,
    started_at   TIMESTAMPTZ,
    completed_at TIMESTAMPTZ,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (rollout_id, device_id)
);
CREATE INDEX rollout_devices_batch ON rollout_devices (rollout_id, batch, status);
CREATE INDEX rollout_devices_command ON rollout_devices (command_id);

-- +goose Down
DROP TABLE rollout_devices;
DROP TABLE rollouts;
