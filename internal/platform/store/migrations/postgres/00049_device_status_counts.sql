-- +goose Up
-- Counting a fleet's devices by status (the console's tabs and dashboard) reads these
-- indexes alone, not every device row.
CREATE INDEX devices_partner_status ON devices (partner_id, status) WHERE decommissioned_at IS NULL;
CREATE INDEX devices_org_status ON devices (org_id, status) WHERE decommissioned_at IS NULL;

-- +goose Down
DROP INDEX devices_org_status;
DROP INDEX devices_partner_status;
