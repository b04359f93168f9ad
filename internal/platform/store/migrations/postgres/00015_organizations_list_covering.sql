-- +goose Up
-- A list of organizations reads the IDs and row versions of its page first (the row cache):
-- with the version and the deleted mark in the index, that read can be an index-only scan.
DROP INDEX organizations_partner_name;
DROP INDEX organizations_name;
CREATE INDEX organizations_partner_name ON organizations (partner_id, name, id) INCLUDE (deleted_at, row_version);
CREATE INDEX organizations_name ON organizations (name, id) INCLUDE (deleted_at, row_version);

-- +goose Down
DROP INDEX organizations_partner_name;
DROP INDEX organizations_name;
CREATE INDEX organizations_partner_name ON organizations (partner_id, name, id);
CREATE INDEX organizations_name ON organizations (name, id);
