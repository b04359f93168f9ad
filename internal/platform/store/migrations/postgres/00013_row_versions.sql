-- +goose Up
-- A row version the database keeps: every change of an organization or device row, and every
-- change of a device's tags, raises it, on whichever node the change is made. Lists read the
-- versions of a page and take unchanged rows from the node's row cache (store.RowCache).
ALTER TABLE organizations ADD COLUMN row_version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE devices ADD COLUMN row_version BIGINT NOT NULL DEFAULT 1;

-- +goose StatementBegin
CREATE FUNCTION raise_row_version() RETURNS trigger AS $$
BEGIN
    NEW.row_version := OLD.row_version + 1;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER organizations_row_version BEFORE UPDATE ON organizations
    FOR EACH ROW EXECUTE FUNCTION raise_row_version();
CREATE TRIGGER devices_row_version BEFORE UPDATE ON devices
    FOR EACH ROW EXECUTE FUNCTION raise_row_version();

-- A device's tags are part of its list row.
-- +goose StatementBegin
CREATE FUNCTION device_tags_raise_device() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE devices SET row_version = row_version + 1 WHERE id = OLD.device_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        UPDATE devices SET row_version = row_version + 1 WHERE id = NEW.device_id;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER device_tags_raise_device AFTER INSERT OR UPDATE OR DELETE ON device_tags
    FOR EACH ROW EXECUTE FUNCTION device_tags_raise_device();

-- +goose Down
DROP TRIGGER device_tags_raise_device ON device_tags;
DROP FUNCTION device_tags_raise_device();
DROP TRIGGER devices_row_version ON devices;
DROP TRIGGER organizations_row_version ON organizations;
DROP FUNCTION raise_row_version();
ALTER TABLE devices DROP COLUMN row_version;
ALTER TABLE organizations DROP COLUMN row_version;
