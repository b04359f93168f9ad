-- +goose Up
-- The open work of each patch job: a job learns whether anything of it is still waiting or
-- queued from this index, at each device's result, without counting all of its devices.
CREATE INDEX patch_job_devices_open ON patch_job_devices (job_id) WHERE status IN ('waiting', 'queued');

-- +goose Down
DROP INDEX patch_job_devices_open;
