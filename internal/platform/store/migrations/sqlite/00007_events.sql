-- +goose Up
-- Domain events (alert opened, device offline, audit entry, ...), written in the transaction of
-- the change they describe. Consumers (webhooks, notification channels, in-app notifications)
-- each process every event once: event_consumptions records which they have handled, in the
-- same transaction as their own work.
CREATE TABLE events (
    id            TEXT PRIMARY KEY,
    type          TEXT NOT NULL,
    partner_id    TEXT,
    org_id        TEXT,
    resource_type TEXT NOT NULL DEFAULT '',
    resource_id   TEXT NOT NULL DEFAULT '',
    data          TEXT NOT NULL,
    occurred_at   TIMESTAMP NOT NULL
);
CREATE INDEX events_occurred ON events (occurred_at, id);

CREATE TABLE event_consumptions (
    consumer    TEXT NOT NULL,
    event_id    TEXT NOT NULL REFERENCES events(id) ON DELETE CASCADE,
    consumed_at TIMESTAMP NOT NULL,
    PRIMARY KEY (consumer, event_id)
);
CREATE INDEX event_consumptions_event ON event_consumptions (event_id);

-- One node at a time runs a consumer: it holds the lease until leased_until.
CREATE TABLE event_consumer_leases (
    consumer     TEXT PRIMARY KEY,
    holder       TEXT NOT NULL,
    leased_until TIMESTAMP NOT NULL
);

-- +goose Down
DROP TABLE event_consumer_leases;
DROP TABLE event_consumptions;
DROP TABLE events;
