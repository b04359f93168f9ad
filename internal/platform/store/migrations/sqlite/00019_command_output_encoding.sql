-- +goose Up
-- How a command's stdout and stderr are stored: NULL for text, 'base64' when the stream held
-- bytes that are not text (a NUL, invalid UTF-8), which are then kept exactly, encoded.
ALTER TABLE device_commands ADD COLUMN stdout_encoding TEXT;
ALTER TABLE device_commands ADD COLUMN stderr_encoding TEXT;

-- +goose Down
ALTER TABLE device_commands DROP COLUMN stderr_encoding;
ALTER TABLE device_commands DROP COLUMN stdout_encoding;
