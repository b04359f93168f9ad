-- +goose Up
-- Rollouts (the API's deployments) of one organization: a payload (a script, a software
-- version, a patch set) delivered to the devices its targets resolve to, at once or in
-- batches. current_batch is the batch under way (0 before the start); next_batch_at is set
-- once that batch settled: when the next one goes out (or, after the last, when the rollout
-- ends). Every transition is a conditional update on status.
CREATE TABLE rollouts (
    id                   TEXT PRIMARY KEY,
    partner_id           TEXT NOT NULL REFERENCES partners(id),
    org_id               TEXT NOT NULL REFERENCES organizations(id),
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
    next_batch_at        TIMESTAMP,
    pause_reason         TEXT,
    created_by           TEXT,
    created_at           TIMESTAMP NOT NULL,
    updated_at           TIMESTAMP NOT NULL,
    started_at           TIMESTAMP,
    completed_at         TIMESTAMP
);
CREATE INDEX rollouts_partner ON rollouts (partner_id, org_id, id);
CREATE INDEX rollouts_active ON rollouts (status) WHERE status IN ('running', 'paused');

-- One device of a rollout: its batch, its state, the command of its latest attempt.
CREATE TABLE rollout_devices (
    rollout_id   TEXT NOT NULL REFERENCES rollouts(id) ON DELETE CASCADE,
    device_id    TEXT NOT NULL,
    partner_id   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    batch        INTEGER NOT NULL,
    status       TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    command_id   TEXT,
    error        TEXT,
    started_at   TIMESTAMP,
    completed_at TIMESTAMP,
    updated_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (rollout_id, device_id)
);
CREATE INDEX rollout_devices_batch ON rollout_devices (rollout_id, batch, status);
CREATE INDEX rollout_devices_command ON rollout_devices (command_id);

-- +goose Down
DROP TABLE rollout_devices;
DROP TABLE rollouts;
