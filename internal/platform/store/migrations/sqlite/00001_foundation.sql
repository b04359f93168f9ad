-- +goose Up
CREATE TABLE partners (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    slug              TEXT NOT NULL UNIQUE,
    status            TEXT NOT NULL DEFAULT 'active',
    max_organizations INTEGER,
    org_count         INTEGER NOT NULL DEFAULT 0,
    billing_email     TEXT,
    settings          TEXT NOT NULL DEFAULT '{}',
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL,
    deleted_at        TIMESTAMP
);

CREATE TABLE organizations (
    id                             TEXT PRIMARY KEY,
    partner_id                     TEXT NOT NULL REFERENCES partners(id),
    name                           TEXT NOT NULL,
    slug                           TEXT NOT NULL UNIQUE,
    type                           TEXT NOT NULL DEFAULT 'customer',
    status                         TEXT NOT NULL DEFAULT 'active',
    max_enrollment_key_ttl_minutes INTEGER,
    contract_start                 DATE,
    contract_end                   DATE,
    billing_contact                TEXT,
    settings                       TEXT NOT NULL DEFAULT '{}',
    created_at                     TIMESTAMP NOT NULL,
    updated_at                     TIMESTAMP NOT NULL,
    deleted_at                     TIMESTAMP
);
CREATE INDEX organizations_partner_name ON organizations (partner_id, name, id);
CREATE INDEX organizations_name ON organizations (name, id);

CREATE TABLE sites (
    id         TEXT PRIMARY KEY,
    partner_id TEXT NOT NULL REFERENCES partners(id),
    org_id     TEXT NOT NULL REFERENCES organizations(id),
    name       TEXT NOT NULL,
    timezone   TEXT NOT NULL DEFAULT 'UTC',
    address    TEXT,
    contact    TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX sites_org_name ON sites (org_id, lower(name));
CREATE INDEX sites_partner ON sites (partner_id, name, id);

CREATE TABLE roles (
    id          TEXT PRIMARY KEY,
    tenant_key  TEXT NOT NULL,
    partner_id  TEXT REFERENCES partners(id),
    org_id      TEXT REFERENCES organizations(id),
    scope       TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    built_in    BOOLEAN NOT NULL DEFAULT FALSE,
    permissions TEXT NOT NULL DEFAULT '[]',
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX roles_tenant_name ON roles (tenant_key, lower(name));

CREATE TABLE users (
    id                 TEXT PRIMARY KEY,
    email              TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL,
    password_hash      TEXT,
    status             TEXT NOT NULL,
    scope              TEXT NOT NULL,
    partner_id         TEXT REFERENCES partners(id),
    org_id             TEXT REFERENCES organizations(id),
    role_id            TEXT NOT NULL REFERENCES roles(id),
    org_access         TEXT NOT NULL DEFAULT 'all',
    mfa_enabled        BOOLEAN NOT NULL DEFAULT FALSE,
    mfa_secret         TEXT,
    mfa_pending_secret TEXT,
    mfa_last_step      INTEGER NOT NULL DEFAULT 0,
    token_epoch        INTEGER NOT NULL DEFAULT 0,
    last_login_at      TIMESTAMP,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL
);
CREATE INDEX users_partner ON users (partner_id, email);
CREATE INDEX users_org ON users (org_id, email);
CREATE INDEX users_role ON users (role_id);

CREATE TABLE user_org_access (
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    org_id  TEXT NOT NULL REFERENCES organizations(id),
    PRIMARY KEY (user_id, org_id)
);

CREATE TABLE refresh_tokens (
    id                TEXT PRIMARY KEY,
    user_id           TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    family_id         TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    mfa               BOOLEAN NOT NULL DEFAULT FALSE,
    expires_at        TIMESTAMP NOT NULL,
    family_expires_at TIMESTAMP NOT NULL,
    rotated_at        TIMESTAMP,
    revoked_at        TIMESTAMP,
    created_at        TIMESTAMP NOT NULL
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (family_expires_at);

CREATE TABLE user_tokens (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    expires_at TIMESTAMP NOT NULL,
    used_at    TIMESTAMP,
    revoked_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX user_tokens_user ON user_tokens (user_id, kind);
CREATE INDEX user_tokens_expiry ON user_tokens (expires_at);

CREATE TABLE mfa_recovery_codes (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash  TEXT NOT NULL,
    used_at    TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX mfa_recovery_codes_user ON mfa_recovery_codes (user_id);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    partner_id   TEXT REFERENCES partners(id),
    org_id       TEXT REFERENCES organizations(id),
    scope        TEXT NOT NULL,
    created_by   TEXT REFERENCES users(id) ON DELETE SET NULL,
    name         TEXT NOT NULL,
    key_prefix   TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    permissions  TEXT NOT NULL DEFAULT '[]',
    expires_at   TIMESTAMP,
    revoked_at   TIMESTAMP,
    last_used_at TIMESTAMP,
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL
);
CREATE INDEX api_keys_partner ON api_keys (partner_id, id);
CREATE INDEX api_keys_org ON api_keys (org_id, id);

CREATE TABLE access_reviews (
    id           TEXT PRIMARY KEY,
    partner_id   TEXT REFERENCES partners(id),
    org_id       TEXT REFERENCES organizations(id),
    scope        TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL,
    due_at       TIMESTAMP,
    created_by   TEXT,
    created_at   TIMESTAMP NOT NULL,
    completed_at TIMESTAMP,
    completed_by TEXT
);
CREATE INDEX access_reviews_partner ON access_reviews (partner_id, id);

CREATE TABLE access_review_items (
    id          TEXT PRIMARY KEY,
    review_id   TEXT NOT NULL REFERENCES access_reviews(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    user_email  TEXT NOT NULL,
    user_name   TEXT NOT NULL,
    role_id     TEXT NOT NULL,
    role_name   TEXT NOT NULL,
    partner_id  TEXT,
    org_id      TEXT,
    org_access  TEXT NOT NULL,
    decision    TEXT NOT NULL DEFAULT 'pending',
    note        TEXT NOT NULL DEFAULT '',
    decided_by  TEXT,
    decided_at  TIMESTAMP,
    applied_at  TIMESTAMP
);
CREATE INDEX access_review_items_review ON access_review_items (review_id, id);

CREATE TABLE rate_limits (
    key          TEXT PRIMARY KEY,
    window_start TIMESTAMP NOT NULL,
    count        INTEGER NOT NULL,
    expires_at   TIMESTAMP NOT NULL
);
CREATE INDEX rate_limits_expiry ON rate_limits (expires_at);

CREATE TABLE audit_logs (
    id            TEXT PRIMARY KEY,
    occurred_at   TIMESTAMP NOT NULL,
    partner_id    TEXT,
    org_id        TEXT,
    category      TEXT NOT NULL,
    result        TEXT NOT NULL,
    actor_type    TEXT NOT NULL,
    actor_id      TEXT,
    actor_email   TEXT,
    action        TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_id   TEXT,
    resource_name TEXT,
    ip            TEXT,
    user_agent    TEXT,
    request_id    TEXT,
    details       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_logs_partner ON audit_logs (partner_id, id);
CREATE INDEX audit_logs_org ON audit_logs (org_id, id);
CREATE INDEX audit_logs_actor ON audit_logs (actor_id, id);
CREATE INDEX audit_logs_action ON audit_logs (action, id);
CREATE INDEX audit_logs_time ON audit_logs (occurred_at);


-- +goose StatementBegin
CREATE TRIGGER audit_logs_no_update BEFORE UPDATE ON audit_logs
BEGIN
    SELECT RAISE(ABORT, 'audit log rows cannot be changed or deleted');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_logs_no_delete BEFORE DELETE ON audit_logs
BEGIN
    SELECT RAISE(ABORT, 'audit log rows cannot be changed or deleted');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE audit_logs;
DROP TABLE rate_limits;
DROP TABLE access_review_items;
DROP TABLE access_reviews;
DROP TABLE api_keys;
DROP TABLE mfa_recovery_codes;
DROP TABLE user_tokens;
DROP TABLE refresh_tokens;
DROP TABLE user_org_access;
DROP TABLE users;
DROP TABLE roles;
DROP TABLE sites;
DROP TABLE organizations;
DROP TABLE partners;
