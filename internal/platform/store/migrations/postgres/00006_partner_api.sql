-- +goose Up
-- Service principals are a partner's machine credentials for the partner API (/partner-api):
-- scopes (JSON array of scope names), an optional expiry, source-CIDR allowlist (JSON array)
-- and write-rate limit per hour.
CREATE TABLE service_principals (
    id           UUID PRIMARY KEY,
    partner_id   UUID NOT NULL REFERENCES partners(id),
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    scopes       JSONB NOT NULL DEFAULT '[]',
    status       TEXT NOT NULL DEFAULT 'active',
    expires_at   TIMESTAMPTZ,
    source_cidrs JSONB NOT NULL DEFAULT '[]',
    rate_limit   INTEGER,
    created_by   UUID REFERENCES users(id) ON DELETE SET NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX service_principals_partner_name ON service_principals (partner_id, lower(name));

-- The keys (svc_sp_...) of a principal, stored only as hashes.
CREATE TABLE service_principal_keys (
    id           UUID PRIMARY KEY,
    principal_id UUID NOT NULL REFERENCES service_principals(id),
    partner_id   UUID NOT NULL REFERENCES partners(id),
    name         TEXT NOT NULL,
    key_prefix   TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    expires_at   TIMESTAMPTZ,
    rate_limit   INTEGER,
    revoked_at   TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    created_by   UUID REFERENCES users(id) ON DELETE SET NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX service_principal_keys_principal ON service_principal_keys (principal_id, id);

-- X-Idempotency-Key of enrollment-key creation: the row is inserted first in the minting
-- transaction, so a concurrent duplicate waits for it and then replays the stored answer
-- (sealed with APP_ENCRYPTION_KEY: it holds the raw key).
CREATE TABLE partner_api_idempotency (
    principal_id UUID NOT NULL REFERENCES service_principals(id),
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    response     TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (principal_id, key)
);
CREATE INDEX partner_api_idempotency_expiry ON partner_api_idempotency (expires_at);

-- Orders of the large exports: by ID, and by change time for updatedSince.
CREATE INDEX devices_partner_id ON devices (partner_id, id);
CREATE INDEX devices_partner_updated ON devices (partner_id, updated_at, id);
CREATE INDEX device_inventory_received ON device_inventory (received_at, device_id);
CREATE INDEX device_custom_values_updated ON device_custom_values (updated_at, device_id, field_id);
-- Exports leave out the rows of deleted organizations by filtering on these few.
CREATE INDEX organizations_deleted ON organizations (id) WHERE deleted_at IS NOT NULL;

-- +goose Down
DROP INDEX organizations_deleted;
DROP INDEX device_custom_values_updated;
DROP INDEX device_inventory_received;
DROP INDEX devices_partner_updated;
DROP INDEX devices_partner_id;
DROP TABLE partner_api_idempotency;
DROP TABLE service_principal_keys;
DROP TABLE service_principals;
