-- +goose Up
-- Groups belong to one organization: a group never mixes customers' devices.
CREATE TABLE device_groups (
    id          UUID PRIMARY KEY,
    partner_id  UUID NOT NULL REFERENCES partners(id),
    org_id      UUID NOT NULL REFERENCES organizations(id),
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    type        TEXT NOT NULL,
    filter      JSONB,
    created_by  TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX device_groups_org_name ON device_groups (org_id, lower(name));
CREATE INDEX device_groups_partner ON device_groups (partner_id, name, id);

-- source: static (added by hand), dynamic (matches the filter); pinned keeps a device in a
-- dynamic group whether or not it matches.
CREATE TABLE device_group_members (
    group_id  UUID NOT NULL REFERENCES device_groups(id) ON DELETE CASCADE,
    device_id UUID NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    source    TEXT NOT NULL,
    pinned    BOOLEAN NOT NULL DEFAULT FALSE,
    added_at  TIMESTAMPTZ NOT NULL,
    added_by  TEXT,
    PRIMARY KEY (group_id, device_id)
);
CREATE INDEX device_group_members_device ON device_group_members (device_id);

CREATE TABLE device_group_log (
    id         UUID PRIMARY KEY,
    group_id   UUID NOT NULL REFERENCES device_groups(id) ON DELETE CASCADE,
    device_id  UUID NOT NULL,
    hostname   TEXT NOT NULL DEFAULT '',
    action     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id   TEXT,
    occurred_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX device_group_log_group ON device_group_log (group_id, id);

-- Custom field definitions belong to a partner (org_id NULL: every organization of it) or to
-- one organization.
CREATE TABLE custom_fields (
    id            UUID PRIMARY KEY,
    partner_id    UUID NOT NULL REFERENCES partners(id),
    org_id        UUID REFERENCES organizations(id),
    key           TEXT NOT NULL,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    type          TEXT NOT NULL,
    options       JSONB,
    required      BOOLEAN NOT NULL DEFAULT FALSE,
    default_value JSONB,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX custom_fields_partner_key ON custom_fields (partner_id, key);

CREATE TABLE device_custom_values (
    device_id  UUID NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    field_id   UUID NOT NULL REFERENCES custom_fields(id) ON DELETE CASCADE,
    value      JSONB NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (device_id, field_id)
);
CREATE INDEX device_custom_values_field ON device_custom_values (field_id);

-- +goose Down
DROP TABLE device_custom_values;
DROP TABLE custom_fields;
DROP TABLE device_group_log;
DROP TABLE device_group_members;
DROP TABLE device_groups;
