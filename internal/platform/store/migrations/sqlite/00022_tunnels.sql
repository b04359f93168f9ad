-- +goose Up
-- Tunnels (internal/domains/tunnels): an HTTP reverse proxy to a machine of a device's network,
-- reached through the device's agent. A tunnel is open until it is closed (closed_at) or
-- expires (expires_at); closed and expired rows stay for the record until purged.
CREATE TABLE tunnels (
    id           TEXT PRIMARY KEY,
    partner_id   TEXT NOT NULL,
    org_id       TEXT NOT NULL,
    device_id    TEXT NOT NULL,
    target_host  TEXT NOT NULL,
    target_port  INTEGER NOT NULL,
    scheme       TEXT NOT NULL,
    insecure_tls BOOLEAN NOT NULL DEFAULT FALSE,
    created_by   TEXT,
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP NOT NULL,
    closed_at    TIMESTAMP,
    closed_by    TEXT
);
CREATE INDEX tunnels_org ON tunnels (org_id, id);
CREATE INDEX tunnels_partner ON tunnels (partner_id, id);
CREATE INDEX tunnels_device ON tunnels (device_id, id);
CREATE INDEX tunnels_expiry ON tunnels (expires_at);

-- +goose Down
DROP TABLE tunnels;
