-- +goose Up
-- A row version the database keeps: every change of an organization or device row, and every
-- change of a device's tags, raises it, on whichever node the change is made. Lists read the
-- versions of a page and take unchanged rows from the node's row cache (store.RowCache).
ALTER TABLE organizations ADD COLUMN row_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE devices ADD COLUMN row_version INTEGER NOT NULL DEFAULT 1;

-- SQLite cannot change NEW in a trigger: the row is raised by a second update, which the
-- WHEN clause keeps from firing the trigger again (and lets a statement that sets the
-- version itself stand).
-- +goose StatementBegin
CREATE TRIGGER organizations_row_version AFTER UPDATE ON organizations
FOR EACH ROW WHEN NEW.row_version = OLD.row_version
BEGIN
    UPDATE organizations SET row_version = OLD.row_version + 1 WHERE rowid = NEW.rowid;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER devices_row_version AFTER UPDATE ON devices
FOR EACH ROW WHEN NEW.row_version = OLD.row_version
BEGIN
    UPDATE devices SET row_version = OLD.row_version + 1 WHERE rowid = NEW.rowid;
END;
-- +goose StatementEnd
-- A device's tags are part of its list row.
-- +goose StatementBegin
CREATE TRIGGER device_tags_added AFTER INSERT ON device_tags
BEGIN
    UPDATE devices SET row_version = row_version + 1 WHERE id = NEW.device_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER device_tags_removed AFTER DELETE ON device_tags
BEGIN
    UPDATE devices SET row_version = row_version + 1 WHERE id = OLD.device_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER device_tags_changed AFTER UPDATE ON device_tags
BEGIN
    UPDATE devices SET row_version = row_version + 1 WHERE id IN (OLD.device_id, NEW.device_id);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER device_tags_changed;
DROP TRIGGER device_tags_removed;
DROP TRIGGER device_tags_added;
DROP TRIGGER devices_row_version;
DROP TRIGGER organizations_row_version;
ALTER TABLE devices DROP COLUMN row_version;
ALTER TABLE organizations DROP COLUMN row_version;
