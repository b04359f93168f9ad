-- +goose Up
-- What the main agent's last heartbeat said of its live channel (up, connecting, down; NULL:
-- nothing), so that a request needing the channel waits briefly for an agent that is opening
-- it instead of failing at once.
ALTER TABLE devices ADD COLUMN live_channel TEXT;

-- +goose Down
ALTER TABLE devices DROP COLUMN live_channel;
