-- +goose Up
-- In-app notifications: one row per user who may see an alert event, written by the "inapp"
-- event consumer; push tokens of users' phones and the push messages queued for them.
CREATE TABLE notifications (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- partner_id and org_id place the notification's resource: a user sees a notification only
    -- while the organization is in scope.
    partner_id    TEXT NOT NULL,
    org_id        TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    type          TEXT NOT NULL,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL,
    severity      TEXT,
    resource_type TEXT NOT NULL,
    resource_id   TEXT NOT NULL,
    link          TEXT NOT NULL,
    read_at       TIMESTAMP,
    created_at    TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX notifications_user_event ON notifications (user_id, event_id);
CREATE INDEX notifications_user ON notifications (user_id, id);
CREATE INDEX notifications_unread ON notifications (user_id, read_at);

-- push_tokens: a phone's FCM or APNs token; a token belongs to the last user who registered it.
CREATE TABLE push_tokens (
    token       TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    platform    TEXT NOT NULL,
    device_name TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
CREATE INDEX push_tokens_user ON push_tokens (user_id);

-- push_messages: one push of a notification to one token, sent by the push worker with retries.
-- status: pending, sent, failed (attempts exhausted), dropped (the token was reported invalid).
CREATE TABLE push_messages (
    notification_id TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
    token           TEXT NOT NULL,
    platform        TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP NOT NULL,
    last_error      TEXT,
    created_at      TIMESTAMP NOT NULL,
    sent_at         TIMESTAMP,
    PRIMARY KEY (notification_id, token)
);
CREATE INDEX push_messages_due ON push_messages (status, next_attempt_at);

-- +goose Down
DROP TABLE push_messages;
DROP TABLE push_tokens;
DROP TABLE notifications;
