-- +goose Up
-- The third-party catalog (internal/domains/thirdparty): applications of other vendors the platform
-- patches (a browser, an archiver), kept by the platform's administrators. An entry names
-- the packages that detect it on a device and its versions with their installers; a smoke test
-- downloads one version's installer and checks it (checksum, file type), and a passing test
-- marks that version platform-tested. At most one test per entry is queued or running.
CREATE TABLE third_party_packages (
    id               UUID PRIMARY KEY,
    vendor           TEXT NOT NULL,
    name             TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    homepage         TEXT NOT NULL DEFAULT '',
    os_types         TEXT NOT NULL,
    package_names    TEXT NOT NULL,
    default_severity TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX third_party_packages_name ON third_party_packages (lower(vendor), lower(name));

CREATE TABLE third_party_versions (
    package_id      UUID NOT NULL REFERENCES third_party_packages(id) ON DELETE CASCADE,
    version         TEXT NOT NULL,
    download_url    TEXT NOT NULL,
    sha256          TEXT NOT NULL,
    file_type       TEXT NOT NULL,
    os_type         TEXT NOT NULL,
    cve_ids         TEXT NOT NULL,
    released_at     TIMESTAMPTZ,
    platform_tested BOOLEAN NOT NULL DEFAULT FALSE,
    tested_at       TIMESTAMPTZ,
    position        INTEGER NOT NULL,
    PRIMARY KEY (package_id, version)
);

CREATE TABLE third_party_tests (
    id          UUID PRIMARY KEY,
    package_id  UUID NOT NULL REFERENCES third_party_packages(id) ON DELETE CASCADE,
    version     TEXT NOT NULL,
    status      TEXT NOT NULL,
    message     TEXT NOT NULL DEFAULT '',
    size_bytes  BIGINT,
    created_by  UUID,
    created_at  TIMESTAMPTZ NOT NULL,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ
);
CREATE INDEX third_party_tests_package ON third_party_tests (package_id, created_at);
CREATE UNIQUE INDEX third_party_tests_one_open ON third_party_tests (package_id) WHERE status IN ('queued', 'running');
CREATE INDEX third_party_tests_queued ON third_party_tests (created_at) WHERE status = 'queued';

-- +goose Down
DROP TABLE third_party_tests;
DROP TABLE third_party_versions;
DROP TABLE third_party_packages;
