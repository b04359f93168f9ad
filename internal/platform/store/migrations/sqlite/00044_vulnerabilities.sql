-- +goose Up
-- CVEs known to the server (global data, not tenant rows). severity is critical, high,
-- medium, low or unknown; severity_source says where it came from: "urgency" (the Debian
-- changelog entry's urgency, until an import says more) or "import" (an OSV or Debian
-- Security Tracker import, CVSS when it carries one).
CREATE TABLE vuln_cves (
    cve_id          TEXT PRIMARY KEY,
    severity        TEXT NOT NULL,
    severity_source TEXT NOT NULL,
    cvss_score      REAL,
    known_exploited BOOLEAN NOT NULL DEFAULT FALSE,
    epss_score      REAL,
    summary         TEXT NOT NULL DEFAULT '',
    updated_at      TIMESTAMP NOT NULL
);

-- Advisories: a package (by its installed name) is affected by a CVE below fixed_version.
-- source is debian_changelog, osv or debian_tracker; release the distribution release an
-- import named ('' for all).
CREATE TABLE vuln_advisories (
    id            TEXT PRIMARY KEY,
    source        TEXT NOT NULL,
    package       TEXT NOT NULL,
    cve_id        TEXT NOT NULL,
    fixed_version TEXT NOT NULL,
    release       TEXT NOT NULL DEFAULT '',
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL,
    UNIQUE (source, package, cve_id)
);
CREATE INDEX vuln_advisories_package ON vuln_advisories (package);

-- The changelog of each (package, candidate version) of a pending security upgrade, fetched
-- once for the whole fleet by one agent that has it pending. status is pending, requested,
-- done or failed.
CREATE TABLE vuln_changelog_fetches (
    package       TEXT NOT NULL,
    version       TEXT NOT NULL,
    since_version TEXT NOT NULL,
    status        TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    device_id     TEXT,
    command_id    TEXT,
    error         TEXT,
    cve_count     INTEGER NOT NULL DEFAULT 0,
    requested_at  TIMESTAMP,
    done_at       TIMESTAMP,
    created_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (package, version)
);
CREATE INDEX vuln_changelog_fetches_status ON vuln_changelog_fetches (status, requested_at);

-- Findings: a CVE of a package installed on a device. status is open, accepted, mitigated or
-- patched; severity and known_exploited copy the CVE's for the grouped views; patch_id is the
-- device's pending patch that reaches fixed_version (null: none).
CREATE TABLE vuln_findings (
    id                TEXT PRIMARY KEY,
    partner_id        TEXT NOT NULL REFERENCES partners(id),
    org_id            TEXT NOT NULL REFERENCES organizations(id),
    device_id         TEXT NOT NULL,
    cve_id            TEXT NOT NULL,
    package           TEXT NOT NULL,
    group_key         TEXT NOT NULL,
    installed_version TEXT NOT NULL,
    fixed_version     TEXT NOT NULL,
    severity          TEXT NOT NULL,
    severity_rank     INTEGER NOT NULL,
    known_exploited   BOOLEAN NOT NULL DEFAULT FALSE,
    status            TEXT NOT NULL,
    patch_id          TEXT,
    first_seen        TIMESTAMP NOT NULL,
    last_seen         TIMESTAMP NOT NULL,
    accepted_until    TIMESTAMP,
    note              TEXT NOT NULL DEFAULT '',
    decided_by        TEXT,
    decided_at        TIMESTAMP,
    patched_at        TIMESTAMP,
    updated_at        TIMESTAMP NOT NULL,
    UNIQUE (device_id, cve_id, package)
);
CREATE INDEX vuln_findings_group ON vuln_findings (partner_id, status, group_key, org_id);
CREATE INDEX vuln_findings_cve ON vuln_findings (cve_id, status);
CREATE INDEX vuln_findings_accepted ON vuln_findings (accepted_until) WHERE status = 'accepted';

CREATE INDEX vuln_findings_org_group ON vuln_findings (org_id, group_key);

-- The by-software view's counts per (organization, group, status), recomputed from the
-- findings in the transaction that changes them. vuln_group_keys holds one row per
-- (organization, group): recomputing takes its row lock first, so two transactions
-- recomputing one group take turns. fixed_version is the highest one the findings need.
CREATE TABLE vuln_group_keys (
    org_id    TEXT NOT NULL,
    group_key TEXT NOT NULL,
    PRIMARY KEY (org_id, group_key)
);
CREATE TABLE vuln_group_stats (
    partner_id      TEXT NOT NULL,
    org_id          TEXT NOT NULL,
    group_key       TEXT NOT NULL,
    status          TEXT NOT NULL,
    findings        INTEGER NOT NULL,
    devices         INTEGER NOT NULL,
    critical        INTEGER NOT NULL,
    known_exploited INTEGER NOT NULL,
    patch_ready     INTEGER NOT NULL,
    risk            INTEGER NOT NULL,
    fixed_version   TEXT NOT NULL,
    PRIMARY KEY (org_id, group_key, status)
);
CREATE INDEX vuln_group_stats_partner ON vuln_group_stats (partner_id, status, group_key);

-- The inventory time a device's findings were last correlated against.
CREATE TABLE vuln_device_marks (
    device_id    TEXT PRIMARY KEY,
    inventory_at TIMESTAMP
);

-- +goose Down
DROP TABLE vuln_group_stats;
DROP TABLE vuln_group_keys;
DROP TABLE vuln_device_marks;
DROP TABLE vuln_findings;
DROP TABLE vuln_changelog_fetches;
DROP TABLE vuln_advisories;
DROP TABLE vuln_cves;
