-- +goose Up
-- Released versions of gale-agent. Versions are stored without a leading "v". At most one
-- version is promoted: the one the download route and install.sh serve by default.
CREATE TABLE agent_versions (
    version     TEXT PRIMARY KEY,
    promoted    BOOLEAN NOT NULL DEFAULT FALSE,
    notes       TEXT NOT NULL DEFAULT '',
    released_at TIMESTAMPTZ,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX agent_versions_one_promoted ON agent_versions (promoted) WHERE promoted;

-- One binary per version and platform. A registered binary never changes: registering other
-- bytes under the same (version, os, arch) is refused.
CREATE TABLE agent_releases (
    version    TEXT NOT NULL REFERENCES agent_versions(version),
    os         TEXT NOT NULL,
    arch       TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    notes      TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (version, os, arch)
);

-- +goose Down
DROP TABLE agent_releases;
DROP TABLE agent_versions;
