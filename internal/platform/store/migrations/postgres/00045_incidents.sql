-- +goose Up
-- EDR connectors of an organization: a provider (edr_a or edr_b) polled every
-- poll_interval_seconds at base_url with api_key (sealed with APP_ENCRYPTION_KEY, never
-- returned). position is the provider's watermark (the newest change time seen). next_poll_at
-- is when the poller claims the connector next; the claim moves it conditionally, so one node
-- polls each due connector. A failing poll sets last_error, counts consecutive_failures and
-- backs off.
CREATE TABLE incident_edr_connectors (
    id                    UUID PRIMARY KEY,
    partner_id            UUID NOT NULL REFERENCES partners(id),
    org_id                UUID NOT NULL REFERENCES organizations(id),
    name                  TEXT NOT NULL,
    provider              TEXT NOT NULL,
    base_url              TEXT NOT NULL,
    api_key               TEXT NOT NULL,
    enabled               BOOLEAN NOT NULL,
    poll_interval_seconds INTEGER NOT NULL,
    position              TEXT NOT NULL DEFAULT '',
    next_poll_at          TIMESTAMPTZ NOT NULL,
    last_polled_at        TIMESTAMPTZ,
    last_success_at       TIMESTAMPTZ,
    last_error            TEXT,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    findings_seen         INTEGER NOT NULL DEFAULT 0,
    created_by            TEXT,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);
CREATE INDEX incident_edr_connectors_org ON incident_edr_connectors (partner_id, org_id, id);
CREATE INDEX incident_edr_connectors_due ON incident_edr_connectors (next_poll_at);

-- Tracked incidents (kind tracked, source native) and EDR findings (kind finding, source
-- edr_a or edr_b) in one table, so the feed is one indexed scan. severity is the rank 1..4
-- (p1..p4). Tracked rows: origin alert, threat, finding or manual with origin_ref the alert,
-- threat or finding row that opened it (unique: each opens one incident). Finding rows:
-- origin edr, unique by (connector_id, source_id); tracked_incident_id is the incident a
-- promotion made, and a promoted finding leaves the feed (in_feed false).
CREATE TABLE incidents (
    id                  UUID PRIMARY KEY,
    partner_id          UUID NOT NULL REFERENCES partners(id),
    org_id              UUID NOT NULL REFERENCES organizations(id),
    kind                TEXT NOT NULL,
    source              TEXT NOT NULL,
    source_id           TEXT NOT NULL,
    origin              TEXT NOT NULL,
    origin_ref          TEXT,
    connector_id        UUID,
    title               TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    severity            INTEGER NOT NULL,
    status              TEXT NOT NULL,
    edr_status          TEXT,
    device_id           UUID,
    hostname            TEXT,
    detected_at         TIMESTAMPTZ NOT NULL,
    tracked_incident_id UUID,
    link_out            TEXT,
    in_feed             BOOLEAN NOT NULL,
    created_by          TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL,
    resolved_at         TIMESTAMPTZ
);
CREATE UNIQUE INDEX incidents_origin ON incidents (origin, origin_ref);
CREATE UNIQUE INDEX incidents_finding ON incidents (connector_id, source_id);
-- The feed's indexes: the scope's leading column, then the order; the trailing columns let
-- the filters (live organization, kind, source) and the count run on the index alone.
CREATE INDEX incidents_feed_partner ON incidents (partner_id, in_feed, severity, detected_at DESC, id DESC, org_id, kind);
CREATE INDEX incidents_feed_partner_kind ON incidents (partner_id, in_feed, kind, severity, detected_at DESC, id DESC, org_id, source);
CREATE INDEX incidents_feed_org ON incidents (org_id, in_feed, severity, detected_at DESC, id DESC, kind);
CREATE INDEX incidents_feed_org_kind ON incidents (org_id, in_feed, kind, severity, detected_at DESC, id DESC, source);


-- The feed's row counts by organization, kind and source (the feed's total without counting
-- rows), kept by a trigger on every insert, delete and change of in_feed.
CREATE TABLE incident_feed_counts (
    partner_id UUID NOT NULL,
    org_id     UUID NOT NULL,
    kind       TEXT NOT NULL,
    source     TEXT NOT NULL,
    n          BIGINT NOT NULL,
    PRIMARY KEY (org_id, kind, source)
);
CREATE INDEX incident_feed_counts_partner ON incident_feed_counts (partner_id);

-- +goose StatementBegin
CREATE FUNCTION incidents_feed_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') AND OLD.in_feed THEN
        UPDATE incident_feed_counts SET n = n - 1 WHERE org_id = OLD.org_id AND kind = OLD.kind AND source = OLD.source;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.in_feed THEN
        INSERT INTO incident_feed_counts (partner_id, org_id, kind, source, n) VALUES (NEW.partner_id, NEW.org_id, NEW.kind, NEW.source, 1)
            ON CONFLICT (org_id, kind, source) DO UPDATE SET n = incident_feed_counts.n + 1;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER incidents_feed_count AFTER INSERT OR DELETE OR UPDATE OF in_feed, org_id, kind, source ON incidents
    FOR EACH ROW EXECUTE FUNCTION incidents_feed_count();

-- +goose Down
DROP TABLE incident_feed_counts;
DROP TABLE incidents;
DROP FUNCTION incidents_feed_count;
DROP TABLE incident_edr_connectors;
