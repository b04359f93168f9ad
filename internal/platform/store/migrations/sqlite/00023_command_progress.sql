-- +goose Up
-- What a running command printed so far (agentproto.CommandOutput): started_at is when its
-- process started on the agent; the *_live counters are the bytes of each stream appended
-- while it runs, so that each piece is appended once and in order. The final result replaces
-- the output.
ALTER TABLE device_commands ADD COLUMN started_at TIMESTAMP;
ALTER TABLE device_commands ADD COLUMN stdout_live BIGINT NOT NULL DEFAULT 0;
ALTER TABLE device_commands ADD COLUMN stderr_live BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE device_commands DROP COLUMN stderr_live;
ALTER TABLE device_commands DROP COLUMN stdout_live;
ALTER TABLE device_commands DROP COLUMN started_at;
