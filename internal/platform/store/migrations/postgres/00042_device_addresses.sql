-- +goose Up
-- Discovery links what it finds to managed devices by MAC or IP address within an
-- organization.
CREATE INDEX devices_org_mac ON devices (org_id, (LOWER(mac_address)));
CREATE INDEX devices_org_ip ON devices (org_id, ip_address);

-- +goose Down
DROP INDEX devices_org_ip;
DROP INDEX devices_org_mac;
