-- +goose Up
-- A heartbeat asks whether its device has calls waiting, and delivery takes them: both look a
-- device's calls up by device and status.
CREATE INDEX agent_calls_device ON agent_calls (device_id, status);

-- +goose Down
DROP INDEX agent_calls_device;
