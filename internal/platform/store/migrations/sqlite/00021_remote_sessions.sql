-- +goose Up
-- Remote sessions (internal/domains/remote): a terminal, desktop or file transfer a user opens on a
-- device. Active ones (pending, connecting, active) count against the caps of the
-- organization and of the user; ended ones (disconnected, failed, denied) are the history.
CREATE TABLE remote_sessions (
    id                  TEXT PRIMARY KEY,
    partner_id          TEXT NOT NULL,
    org_id              TEXT NOT NULL,
    device_id           TEXT NOT NULL,
    user_id             TEXT NOT NULL,
    type                TEXT NOT NULL,
    status              TEXT NOT NULL,
    status_at           TIMESTAMP NOT NULL,
    created_at          TIMESTAMP NOT NULL,
    updated_at          TIMESTAMP NOT NULL,
    started_at          TIMESTAMP,
    ended_at            TIMESTAMP,
    end_reason          TEXT,
    screen_capture      TEXT,
    capture_note        TEXT
);
CREATE INDEX remote_sessions_org_status ON remote_sessions (org_id, status);
CREATE INDEX remote_sessions_user_status ON remote_sessions (user_id, status);
CREATE INDEX remote_sessions_status_at ON remote_sessions (status, status_at);

-- +goose Down
DROP TABLE remote_sessions;
