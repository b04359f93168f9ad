-- +goose Up
-- Slugs are ASCII and compare byte-wise (COLLATE "C", as on SQLite), so a prefix range
-- over the unique index finds "acme" and its "acme-N" siblings.
CREATE TABLE partners (
    id                UUID PRIMARY KEY,
    name              TEXT NOT NULL,
    slug              TEXT COLLATE "C" NOT NULL UNIQUE,
    status            TEXT NOT NULL DEFAULT 'active',
    max_organizations INTEGER,
    org_count         INTEGER NOT NULL DEFAULT 0,
    billing_email     TEXT,
    settings          JSONB NOT NULL DEFAULT '{}',
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    deleted_at        TIMESTAMPTZ
);

CREATE TABLE organizations (
    id                             UUID PRIMARY KEY,
    partner_id                     UUID NOT NULL REFERENCES partners(id),
    name                           TEXT NOT NULL,
    slug                           TEXT COLLATE "C" NOT NULL UNIQUE,
    type                           TEXT NOT NULL DEFAULT 'customer',
    status                         TEXT NOT NULL DEFAULT 'active',
    max_enrollment_key_ttl_minutes INTEGER,
    contract_start                 DATE,
    contract_end                   DATE,
    billing_contact                JSONB,
    settings                       JSONB NOT NULL DEFAULT '{}',
    created_at                     TIMESTAMPTZ NOT NULL,
    updated_at                     TIMESTAMPTZ NOT NULL,
    deleted_at                     TIMESTAMPTZ
);
CREATE INDEX organizations_partner_name ON organizations (partner_id, name, id);
CREATE INDEX organizations_name ON organizations (name, id);

CREATE TABLE sites (
    id         UUID PRIMARY KEY,
    partner_id UUID NOT NULL REFERENCES partners(id),
    org_id     UUID NOT NULL REFERENCES organizations(id),
    name       TEXT NOT NULL,
    timezone   TEXT NOT NULL DEFAULT 'UTC',
    address    JSONB,
    contact    JSONB,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX sites_org_name ON sites (org_id, lower(name));
CREATE INDEX sites_partner ON sites (partner_id, name, id);

CREATE TABLE roles (
    id          UUID PRIMARY KEY,
    tenant_key  TEXT NOT NULL,
    partner_id  UUID REFERENCES partners(id),
    org_id      UUID REFERENCES organizations(id),
    scope       TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    built_in    BOOLEAN NOT NULL DEFAULT FALSE,
    permissions JSONB NOT NULL DEFAULT '[]',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX roles_tenant_name ON roles (tenant_key, lower(name));

CREATE TABLE users (
    id                 UUID PRIMARY KEY,
    email              TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL,
    password_hash      TEXT,
    status             TEXT NOT NULL,
    scope              TEXT NOT NULL,
    partner_id         UUID REFERENCES partners(id),
    org_id             UUID REFERENCES organizations(id),
    role_id            UUID NOT NULL REFERENCES roles(id),
    org_access         TEXT NOT NULL DEFAULT 'all',
    mfa_enabled        BOOLEAN NOT NULL DEFAULT FALSE,
    mfa_secret         TEXT,
    mfa_pending_secret TEXT,
    mfa_last_step      BIGINT NOT NULL DEFAULT 0,
    token_epoch        INTEGER NOT NULL DEFAULT 0,
    last_login_at      TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX users_partner ON users (partner_id, email);
CREATE INDEX users_org ON users (org_id, email);
CREATE INDEX users_role ON users (role_id);

CREATE TABLE user_org_access (
    user_id UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    org_id  UUID NOT NULL REFERENCES organizations(id),
    PRIMARY KEY (user_id, org_id)
);

CREATE TABLE refresh_tokens (
    id                UUID PRIMARY KEY,
    user_id           UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    family_id         UUID NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    mfa               BOOLEAN NOT NULL DEFAULT FALSE,
    expires_at        TIMESTAMPTZ NOT NULL,
    family_expires_at TIMESTAMPTZ NOT NULL,
    rotated_at        TIMESTAMPTZ,
    revoked_at        TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (family_expires_at);

CREATE TABLE user_tokens (
    id         UUID PRIMARY KEY,
    user_id    UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ,
    revoked_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX user_tokens_user ON user_tokens (user_id, kind);
CREATE INDEX user_tokens_expiry ON user_tokens (expires_at);

CREATE TABLE mfa_recovery_codes (
    id         UUID PRIMARY KEY,
    user_id    UUID NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash  TEXT NOT NULL,
    used_at    TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX mfa_recovery_codes_user ON mfa_recovery_codes (user_id);

CREATE TABLE api_keys (
    id           UUID PRIMARY KEY,
    partner_id   UUID REFERENCES partners(id),
    org_id       UUID REFERENCES organizations(id),
    scope        TEXT NOT NULL,
    created_by   UUID REFERENCES users(id) ON DELETE SET NULL,
    name         TEXT NOT NULL,
    key_prefix   TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    permissions  JSONB NOT NULL DEFAULT '[]',
    expires_at   TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX api_keys_partner ON api_keys (partner_id, id);
CREATE INDEX api_keys_org ON api_keys (org_id, id);

CREATE TABLE access_reviews (
    id           UUID PRIMARY KEY,
    partner_id   UUID REFERENCES partners(id),
    org_id       UUID REFERENCES organizations(id),
    scope        TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL,
    due_at       TIMESTAMPTZ,
    created_by   UUID,
    created_at   TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ,
    completed_by UUID
);
CREATE INDEX access_reviews_partner ON access_reviews (partner_id, id);

CREATE TABLE access_review_items (
    id          UUID PRIMARY KEY,
    review_id   UUID NOT NULL REFERENCES access_reviews(id) ON DELETE CASCADE,
    user_id     UUID NOT NULL,
    user_email  TEXT NOT NULL,
    user_name   TEXT NOT NULL,
    role_id     UUID NOT NULL,
    role_name   TEXT NOT NULL,
    partner_id  UUID,
    org_id      UUID,
    org_access  TEXT NOT NULL,
    decision    TEXT NOT NULL DEFAULT 'pending',
    note        TEXT NOT NULL DEFAULT '',
    decided_by  UUID,
    decided_at  TIMESTAMPTZ,
    applied_at  TIMESTAMPTZ
);
CREATE INDEX access_review_items_review ON access_review_items (review_id, id);

CREATE TABLE rate_limits (
    key          TEXT PRIMARY KEY,
    window_start TIMESTAMPTZ NOT NULL,
    count        INTEGER NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX rate_limits_expiry ON rate_limits (expires_at);

CREATE TABLE audit_logs (
    id            UUID PRIMARY KEY,
    occurred_at   TIMESTAMPTZ NOT NULL,
    partner_id    UUID,
    org_id        UUID,
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
    details       JSONB NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_logs_partner ON audit_logs (partner_id, id);
CREATE INDEX audit_logs_org ON audit_logs (org_id, id);
CREATE INDEX audit_logs_actor ON audit_logs (actor_id, id);
CREATE INDEX audit_logs_action ON audit_logs (action, id);
CREATE INDEX audit_logs_time ON audit_logs (occurred_at);

-- +goose StatementBegin
CREATE FUNCTION audit_logs_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit log rows cannot be changed or deleted';
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER audit_logs_append_only BEFORE UPDATE OR DELETE ON audit_logs
    FOR EACH ROW EXECUTE FUNCTION audit_logs_append_only();

-- +goose Down
DROP TABLE audit_logs;
DROP FUNCTION audit_logs_append_only();
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
