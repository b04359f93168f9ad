-- +goose Up
-- Alerts raised by something other than a rule (a script's mapped exit code) name their source
-- (script:<scriptId>:<deviceId>); a source has at most one open alert, so a script that keeps
-- failing does not open a new alert at every run, and its next success resolves it.
ALTER TABLE alerts ADD COLUMN source_key TEXT;
CREATE UNIQUE INDEX alerts_one_open_source ON alerts (source_key)
    WHERE source_key IS NOT NULL AND status IN ('active', 'acknowledged', 'suppressed');

-- +goose Down
DROP INDEX alerts_one_open_source;
ALTER TABLE alerts DROP COLUMN source_key;
