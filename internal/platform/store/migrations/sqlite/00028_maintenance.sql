-- +goose Up
-- Maintenance windows of an organization. start_local and end_local are the first
-- occurrence's wall-clock times in timezone (YYYY-MM-DDTHH:MM:SS); recurrence is once, daily,
-- weekly, monthly or custom (rrule: an RFC 5545 RRULE). target_ids is a JSON list of the
-- sites, groups or devices the window covers (empty for all). expanded_until is how far ahead
-- occurrences are written; NULL once the recurrence has no further occurrence.
CREATE TABLE maintenance_windows (
    id                   TEXT PRIMARY KEY,
    partner_id           TEXT NOT NULL REFERENCES partners(id),
    org_id               TEXT NOT NULL REFERENCES organizations(id),
    name                 TEXT NOT NULL,
    description          TEXT NOT NULL DEFAULT '',
    timezone             TEXT NOT NULL,
    start_local          TEXT NOT NULL,
    end_local            TEXT NOT NULL,
    recurrence           TEXT NOT NULL,
    rrule                TEXT,
    recurrence_end       TIMESTAMP,
    target_type          TEXT NOT NULL,
    target_ids           TEXT NOT NULL,
    suppress_alerts      BOOLEAN NOT NULL,
    suppress_patches     BOOLEAN NOT NULL,
    suppress_automations BOOLEAN NOT NULL,
    suppress_scripts     BOOLEAN NOT NULL,
    status               TEXT NOT NULL,
    expanded_until       TIMESTAMP,
    created_by           TEXT,
    created_at           TIMESTAMP NOT NULL,
    updated_at           TIMESTAMP NOT NULL,
    cancelled_at         TIMESTAMP,
    cancelled_by         TEXT
);
CREATE INDEX maintenance_windows_org ON maintenance_windows (partner_id, org_id, id);
CREATE INDEX maintenance_windows_expansion ON maintenance_windows (expanded_until) WHERE status = 'active';

-- The occurrences of a window, written 90 days ahead. A window's occurrence starts once
-- (the unique index lets concurrent expansions write it once); status moves scheduled,
-- active, completed, or scheduled to cancelled.
CREATE TABLE maintenance_occurrences (
    id         TEXT PRIMARY KEY,
    window_id  TEXT NOT NULL REFERENCES maintenance_windows(id) ON DELETE CASCADE,
    partner_id TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    starts_at  TIMESTAMP NOT NULL,
    ends_at    TIMESTAMP NOT NULL,
    status     TEXT NOT NULL,
    started_at TIMESTAMP,
    ended_at   TIMESTAMP,
    started_by TEXT,
    ended_by   TEXT
);
CREATE UNIQUE INDEX maintenance_occurrences_start ON maintenance_occurrences (window_id, starts_at);
CREATE INDEX maintenance_occurrences_org ON maintenance_occurrences (partner_id, org_id, starts_at);
CREATE INDEX maintenance_occurrences_due ON maintenance_occurrences (starts_at) WHERE status = 'scheduled';
CREATE INDEX maintenance_occurrences_active ON maintenance_occurrences (ends_at) WHERE status = 'active';

-- +goose Down
DROP TABLE maintenance_occurrences;
DROP TABLE maintenance_windows;
