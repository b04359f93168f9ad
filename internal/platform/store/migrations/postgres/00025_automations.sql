-- +goose Up
-- Automations of a partner (org_id NULL: every organization of it) or of one organization:
-- a trigger, optional conditions per device, ordered actions and targets. A webhook trigger's
-- signing secret is sealed with APP_ENCRYPTION_KEY; next_run_at is a schedule's next
-- occurrence.
CREATE TABLE automations (
    id                  UUID PRIMARY KEY,
    partner_id          UUID NOT NULL REFERENCES partners(id),
    org_id              UUID REFERENCES organizations(id),
    name                TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    enabled             BOOLEAN NOT NULL,
    trigger_type        TEXT NOT NULL,
    trigger_config      TEXT NOT NULL,
    event_type          TEXT,
    webhook_secret      TEXT,
    webhook_secret_hint TEXT,
    conditions          TEXT NOT NULL,
    actions             TEXT NOT NULL,
    targets             TEXT,
    on_failure          TEXT NOT NULL,
    notify_channel_ids  TEXT NOT NULL,
    created_by          TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    last_run_at         TIMESTAMPTZ,
    next_run_at         TIMESTAMPTZ
);
CREATE INDEX automations_partner ON automations (partner_id, org_id);
CREATE INDEX automations_due ON automations (next_run_at) WHERE trigger_type = 'schedule' AND enabled;
CREATE INDEX automations_event ON automations (event_type, partner_id) WHERE trigger_type = 'event' AND enabled;

-- One run of an automation. definition is the automation as it stood when the run started;
-- current_action is the action under way (-1 before the first). scheduled_for is the
-- occurrence a schedule run stands for: the unique index lets exactly one node start it.
CREATE TABLE automation_runs (
    id               UUID PRIMARY KEY,
    automation_id    UUID NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    partner_id       TEXT NOT NULL,
    org_id           TEXT,
    status           TEXT NOT NULL,
    triggered_by     TEXT NOT NULL,
    trigger_event_id TEXT,
    origin_run_id    TEXT,
    depth            INTEGER NOT NULL DEFAULT 0,
    payload          TEXT,
    definition       TEXT NOT NULL,
    device_ids       TEXT,
    current_action   INTEGER NOT NULL DEFAULT -1,
    scheduled_for    TIMESTAMPTZ,
    error            TEXT,
    created_by       TEXT,
    started_at       TIMESTAMPTZ NOT NULL,
    completed_at     TIMESTAMPTZ
);
CREATE UNIQUE INDEX automation_runs_occurrence ON automation_runs (automation_id, scheduled_for);
CREATE INDEX automation_runs_automation ON automation_runs (automation_id, id);
CREATE INDEX automation_runs_running ON automation_runs (status) WHERE status = 'running';

-- What one action did on one device (or once, for notify): a script execution (of a batch),
-- a device command or an alert, and how it ended.
CREATE TABLE automation_run_steps (
    id           UUID PRIMARY KEY,
    run_id       UUID NOT NULL REFERENCES automation_runs(id) ON DELETE CASCADE,
    action_index INTEGER NOT NULL,
    action_type  TEXT NOT NULL,
    device_id    TEXT,
    status       TEXT NOT NULL,
    execution_id TEXT,
    batch_id     TEXT,
    command_id   TEXT,
    alert_id     TEXT,
    exit_code    INTEGER,
    output       TEXT,
    error        TEXT,
    started_at   TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ
);
CREATE INDEX automation_run_steps_run ON automation_run_steps (run_id, action_index, id);
CREATE INDEX automation_run_steps_execution ON automation_run_steps (execution_id);

-- Signatures of inbound webhook calls already accepted, kept until their timestamp leaves
-- the accepted skew: the same signed call is refused a second time.
CREATE TABLE automation_webhook_signatures (
    automation_id UUID NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    signature     TEXT NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (automation_id, signature)
);
CREATE INDEX automation_webhook_signatures_expiry ON automation_webhook_signatures (expires_at);

-- +goose Down
DROP TABLE automation_webhook_signatures;
DROP TABLE automation_run_steps;
DROP TABLE automation_runs;
DROP TABLE automations;
