-- +goose Up
-- What an install job does once a device's install succeeded: never reboot it, reboot it when
-- the system says a reboot is pending (if_required), or always; a patch policy's
-- rebootBehavior decides for the jobs it starts.
ALTER TABLE patch_jobs ADD COLUMN reboot_behavior TEXT NOT NULL DEFAULT 'never';

-- +goose Down
ALTER TABLE patch_jobs DROP COLUMN reboot_behavior;
