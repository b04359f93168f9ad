-- +goose Up
-- Every heartbeat confirms its device's cached alert rules by counting them and taking their
-- latest change; this index answers that from the index alone, without visiting the rules.
CREATE INDEX alert_rules_signature ON alert_rules (partner_id, org_id, updated_at);

-- +goose Down
DROP INDEX alert_rules_signature;
