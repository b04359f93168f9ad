-- +goose Up
-- Tunnels (internal/domains/tunnels): an HTTP reverse proxy to a machine of a device's network,
-- reached through the device's agent. A tunnel is open until it is closed (closed_at) or
-- expires (expires_at); closed and expired rows stay for the record until purged.
CREATE TABLE tunnels (
    id           UUID PRIMARY KEY,
    partner_id   UUID NOT NULL,
    org_id       UUID NOT NULL,
    device_id    UUID NOT NULL,
    target_host  TEXT NOT NULL,
    target_port  INTEGER NOT NULL,
    scheme       TEXT NOT NULL,
    insecure_tls BOOLEAN NOT NULL DEFAULT FALSE,
    created_by   UUID,
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    closed_at    TIMESTAMPTZ,
    closed_by    UUID
);
CREATE INDEX tunnels_org ON tunnels (org_id, id);
CREATE INDEX tunnels_partner ON tunnels (partner_id, id);
CREATE INDEX tunnels_device ON tunnels (device_id, id);
CREATE INDEX tunnels_expiry ON tunnels (expires_at);

-- +goose Down
DROP TABLE tunnels;
