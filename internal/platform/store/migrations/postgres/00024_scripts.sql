-- +goose Up
-- Script library categories (nestable) and tags, of a partner (org_id NULL) or an organization.
CREATE TABLE script_categories (
    id          UUID PRIMARY KEY,
    partner_id  UUID NOT NULL REFERENCES partners(id),
    org_id      UUID REFERENCES organizations(id),
    parent_id   UUID REFERENCES script_categories(id),
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    color       TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX script_categories_name ON script_categories
    (partner_id, COALESCE(org_id::text, ''), COALESCE(parent_id::text, ''), lower(name));

CREATE TABLE script_tags (
    id         UUID PRIMARY KEY,
    partner_id UUID NOT NULL REFERENCES partners(id),
    org_id     UUID REFERENCES organizations(id),
    name       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX script_tags_name ON script_tags (partner_id, COALESCE(org_id::text, ''), lower(name));

-- Scripts of a partner (org_id NULL: every organization of it) or of one organization. The
-- name is unique among the live scripts of one scope; deleted ones keep their executions.
CREATE TABLE scripts (
    id                 UUID PRIMARY KEY,
    partner_id         UUID NOT NULL REFERENCES partners(id),
    org_id             UUID REFERENCES organizations(id),
    name               TEXT NOT NULL,
    description        TEXT NOT NULL DEFAULT '',
    category_id        UUID REFERENCES script_categories(id),
    os_types           JSONB NOT NULL,
    language           TEXT NOT NULL,
    content            TEXT NOT NULL,
    parameters         JSONB NOT NULL,
    timeout_seconds    INTEGER NOT NULL,
    run_as             TEXT NOT NULL,
    exit_code_mapping  JSONB,
    version            INTEGER NOT NULL,
    source             TEXT,
    created_by         TEXT,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    deleted_at         TIMESTAMPTZ
);
CREATE UNIQUE INDEX scripts_name ON scripts (partner_id, COALESCE(org_id::text, ''), lower(name)) WHERE deleted_at IS NULL;
CREATE INDEX scripts_category ON scripts (category_id);

CREATE TABLE script_tag_links (
    script_id UUID NOT NULL REFERENCES scripts(id) ON DELETE CASCADE,
    tag_id    UUID NOT NULL REFERENCES script_tags(id) ON DELETE CASCADE,
    PRIMARY KEY (script_id, tag_id)
);
CREATE INDEX script_tag_links_tag ON script_tag_links (tag_id);

-- Every saved state of a script, with a note; rollback saves an old one as a new version.
CREATE TABLE script_versions (
    id                UUID PRIMARY KEY,
    script_id         UUID NOT NULL REFERENCES scripts(id) ON DELETE CASCADE,
    version           INTEGER NOT NULL,
    name              TEXT NOT NULL,
    os_types          JSONB NOT NULL,
    language          TEXT NOT NULL,
    content           TEXT NOT NULL,
    parameters        JSONB NOT NULL,
    timeout_seconds   INTEGER NOT NULL,
    run_as            TEXT NOT NULL,
    exit_code_mapping JSONB,
    note              TEXT NOT NULL DEFAULT '',
    created_by        TEXT,
    created_at        TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX script_versions_number ON script_versions (script_id, version);

-- One run of a script on one device, carried by a run_script device command; executions of
-- one request share a batch. outcome is the result as the script's exit-code mapping reads
-- it (completed or failed), set when the agent's result is recorded.
CREATE TABLE script_executions (
    id                 UUID PRIMARY KEY,
    partner_id         UUID NOT NULL,
    org_id             UUID NOT NULL,
    script_id          UUID NOT NULL REFERENCES scripts(id),
    script_version     INTEGER NOT NULL,
    batch_id           UUID NOT NULL,
    device_id          UUID NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    command_id         UUID NOT NULL UNIQUE,
    parameters         JSONB NOT NULL,
    run_as             TEXT NOT NULL,
    exit_code_mapping  JSONB,
    outcome            TEXT,
    severity           TEXT,
    triggered_by       TEXT,
    triggered_by_email TEXT,
    created_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX script_executions_script ON script_executions (script_id, id);
CREATE INDEX script_executions_batch ON script_executions (batch_id);

-- +goose Down
DROP TABLE script_executions;
DROP TABLE script_versions;
DROP TABLE script_tag_links;
DROP TABLE scripts;
DROP TABLE script_tags;
DROP TABLE script_categories;
