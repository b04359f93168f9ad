-- +goose Up
-- The LLDP neighbours an SNMP asset reported at its last SNMP answer (a JSON list), for the
-- topology's links between switches, routers and what is plugged into them.
ALTER TABLE discovery_assets ADD COLUMN neighbors JSONB NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE discovery_assets DROP COLUMN neighbors;
