-- +goose Up
-- The software catalog: packages of a partner (org_id NULL: every organization of it) or of
-- one organization. The name is unique among the live items of one scope; a deleted item
-- keeps its versions and deployments readable.
CREATE TABLE software_catalog (
    id           UUID PRIMARY KEY,
    partner_id   UUID NOT NULL REFERENCES partners(id),
    org_id       UUID REFERENCES organizations(id),
    name         TEXT NOT NULL,
    package_name TEXT NOT NULL,
    vendor       TEXT NOT NULL DEFAULT '',
    description  TEXT NOT NULL DEFAULT '',
    category     TEXT NOT NULL DEFAULT '',
    supported_os JSONB NOT NULL,
    created_by   TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    deleted_at   TIMESTAMPTZ
);
CREATE UNIQUE INDEX software_catalog_name ON software_catalog (partner_id, COALESCE(org_id::text, ''), lower(name)) WHERE deleted_at IS NULL;

-- A version of a catalog item: a file at an https address, or one uploaded to blob storage
-- (blob_key). sha256 is the file's, given with an address, computed for an upload.
CREATE TABLE software_versions (
    id            UUID PRIMARY KEY,
    catalog_id    UUID NOT NULL REFERENCES software_catalog(id),
    partner_id    UUID NOT NULL,
    org_id        UUID,
    version       TEXT NOT NULL,
    download_url  TEXT,
    blob_key      TEXT,
    sha256        TEXT NOT NULL,
    size_bytes    BIGINT,
    file_type     TEXT NOT NULL,
    silent_args   TEXT NOT NULL DEFAULT '',
    supported_os  JSONB NOT NULL,
    release_notes TEXT NOT NULL DEFAULT '',
    created_by    TEXT,
    created_at    TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX software_versions_number ON software_versions (catalog_id, version);

-- A deployment of one version to the devices its targets resolved to, in one organization.
CREATE TABLE software_deployments (
    id            UUID PRIMARY KEY,
    partner_id    UUID NOT NULL,
    org_id        UUID NOT NULL REFERENCES organizations(id),
    name          TEXT NOT NULL,
    catalog_id    UUID NOT NULL REFERENCES software_catalog(id),
    version_id    UUID NOT NULL REFERENCES software_versions(id),
    targets       JSONB NOT NULL,
    schedule_mode TEXT NOT NULL,
    window_id     UUID,
    status        TEXT NOT NULL,
    created_by    TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    completed_at  TIMESTAMPTZ
);
CREATE INDEX software_deployments_org ON software_deployments (org_id, id);
CREATE INDEX software_deployments_catalog ON software_deployments (catalog_id, status);
CREATE INDEX software_deployments_open ON software_deployments (status);

-- One device of a deployment: held (waiting, no command yet), queued with its
-- software_install command, or ended (installed, failed, skipped, cancelled).
CREATE TABLE software_deployment_devices (
    id                UUID PRIMARY KEY,
    deployment_id     UUID NOT NULL REFERENCES software_deployments(id),
    partner_id        UUID NOT NULL,
    org_id            UUID NOT NULL,
    device_id         UUID NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    version_id        UUID NOT NULL,
    status            TEXT NOT NULL,
    command_id        UUID UNIQUE,
    reason            TEXT,
    installed_version TEXT,
    previous_version  TEXT,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX software_deployment_devices_device ON software_deployment_devices (deployment_id, device_id);
CREATE INDEX software_deployment_devices_status ON software_deployment_devices (status, deployment_id);
CREATE INDEX software_deployment_devices_file ON software_deployment_devices (device_id, version_id);

-- +goose Down
DROP TABLE software_deployment_devices;
DROP TABLE software_deployments;
DROP TABLE software_versions;
DROP TABLE software_catalog;
