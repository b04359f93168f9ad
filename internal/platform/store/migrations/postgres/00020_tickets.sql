-- +goose Up
-- Single-use tickets (internal/domains/authtickets): short-lived secrets, stored as hashes, that let a
-- browser open what it cannot send a bearer token to (a terminal WebSocket, a tunnel). A
-- ticket is bound to what it opens (kind, subject) and to the user it was issued to.
CREATE TABLE tickets (
    hash       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ
);
CREATE INDEX tickets_expiry ON tickets (expires_at);

-- +goose Down
DROP TABLE tickets;
