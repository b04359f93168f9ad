-- +goose Up
-- When a browser session (the console's cookie holds its refresh token) last made a request:
-- the session ends after the console's idle timeout without one.
ALTER TABLE refresh_tokens ADD COLUMN used_at TIMESTAMP;

-- +goose Down
ALTER TABLE refresh_tokens DROP COLUMN used_at;
