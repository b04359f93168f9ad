-- +goose Up
-- An alert names what raised it: a device (rules, scripts, automations) or something that is
-- not a device (a monitor, an SNMP device), which has no device_id.
ALTER TABLE alerts ADD COLUMN source_type TEXT NOT NULL DEFAULT 'device';
ALTER TABLE alerts ADD COLUMN source_id UUID;
UPDATE alerts SET source_id = device_id;
CREATE INDEX alerts_source ON alerts (source_type, source_id, status);
-- The cooldown of a source looks up when its last alert of a condition resolved.
CREATE INDEX alerts_source_key ON alerts (source_key, resolved_at) WHERE source_key IS NOT NULL;

-- +goose Down
DROP INDEX alerts_source_key;
DROP INDEX alerts_source;
ALTER TABLE alerts DROP COLUMN source_id;
ALTER TABLE alerts DROP COLUMN source_type;
