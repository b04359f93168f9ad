-- +goose Up
-- Configuration policies of a partner (org_id NULL: every organization of it) or of one
-- organization: rules a device must meet, how they are enforced, how often the agents check
-- them, and an optional remediation script. next_evaluation_at is when the schedule next
-- queues evaluations; the schedule claims a policy by moving it conditionally.
CREATE TABLE policies (
    id                     TEXT PRIMARY KEY,
    partner_id             TEXT NOT NULL REFERENCES partners(id),
    org_id                 TEXT REFERENCES organizations(id),
    name                   TEXT NOT NULL,
    description            TEXT NOT NULL DEFAULT '',
    status                 TEXT NOT NULL,
    enforcement            TEXT NOT NULL,
    check_interval_minutes INTEGER NOT NULL,
    rules                  TEXT NOT NULL,
    remediation_script_id  TEXT,
    target_type            TEXT NOT NULL,
    created_by             TEXT,
    created_at             TIMESTAMP NOT NULL,
    updated_at             TIMESTAMP NOT NULL,
    last_evaluated_at      TIMESTAMP,
    next_evaluation_at     TIMESTAMP
);
CREATE UNIQUE INDEX policies_name ON policies (partner_id, COALESCE(org_id, ''), lower(name));
CREATE INDEX policies_due ON policies (next_evaluation_at) WHERE status = 'active';
CREATE INDEX policies_changed ON policies (partner_id, updated_at, id);

-- The assignments: one row per target of a policy (target_id NULL: every organization in the
-- policy's scope). target_key is target_id, or '' for that one row, so rows have a key.
CREATE TABLE policy_targets (
    policy_id   TEXT NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    target_key  TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_id   TEXT,
    partner_id  TEXT NOT NULL,
    org_id      TEXT,
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (policy_id, target_key)
);
CREATE INDEX policy_targets_partner ON policy_targets (partner_id, policy_id, target_key);
CREATE INDEX policy_targets_changed ON policy_targets (partner_id, created_at, policy_id, target_key);

-- Compliance of each device a policy is assigned to: a row per device in its targets, kept in
-- step whenever the targets are resolved (pending until its first result). command_id is the
-- outstanding policy_evaluate; follow_up is enforcement work due after a transition (raise
-- the alert, run the remediation, resolve the alert, evaluate again once a remediation ended).
CREATE TABLE policy_compliance (
    policy_id                TEXT NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    device_id                TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    partner_id               TEXT NOT NULL,
    org_id                   TEXT NOT NULL,
    state                    TEXT NOT NULL,
    results                  TEXT,
    error                    TEXT,
    evaluated_at             TIMESTAMP,
    changed_at               TIMESTAMP NOT NULL,
    command_id               TEXT,
    queued_at                TIMESTAMP,
    follow_up                TEXT,
    alert_id                 TEXT,
    remediation_execution_id TEXT,
    remediation_command_id   TEXT,
    remediated_at            TIMESTAMP,
    PRIMARY KEY (policy_id, device_id)
);
CREATE INDEX policy_compliance_device ON policy_compliance (device_id);
CREATE INDEX policy_compliance_command ON policy_compliance (command_id) WHERE command_id IS NOT NULL;
CREATE INDEX policy_compliance_remediation ON policy_compliance (remediation_command_id) WHERE remediation_command_id IS NOT NULL;
CREATE INDEX policy_compliance_follow_up ON policy_compliance (follow_up) WHERE follow_up IS NOT NULL;

-- +goose Down
DROP TABLE policy_compliance;
DROP TABLE policy_targets;
DROP TABLE policies;
