-- +goose Up
-- Why a watchdog gave up on its device's main agent (a start that keeps failing), as its
-- heartbeat said; NULL while the watchdog reports anything else.
ALTER TABLE devices ADD COLUMN watchdog_reason TEXT;

-- +goose Down
ALTER TABLE devices DROP COLUMN watchdog_reason;
