-- +goose Up
-- A search for part of a device's name reads this trigram index instead of every device:
-- an FTS5 table over the devices' names, kept by the triggers below.
CREATE VIRTUAL TABLE devices_name_search USING fts5(hostname, display_name, content='devices', content_rowid='rowid',
    tokenize='trigram');

-- +goose StatementBegin
CREATE TRIGGER devices_name_search_insert AFTER INSERT ON devices BEGIN
    INSERT INTO devices_name_search (rowid, hostname, display_name) VALUES (new.rowid, new.hostname, new.display_name);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER devices_name_search_delete AFTER DELETE ON devices BEGIN
    INSERT INTO devices_name_search (devices_name_search, rowid, hostname, display_name)
        VALUES ('delete', old.rowid, old.hostname, old.display_name);
END;
-- +goose StatementEnd

-- An inventory report names the hostname on every update: only a change reaches the index.
-- +goose StatementBegin
CREATE TRIGGER devices_name_search_update AFTER UPDATE OF hostname, display_name ON devices
    WHEN old.hostname IS NOT new.hostname OR old.display_name IS NOT new.display_name BEGIN
    INSERT INTO devices_name_search (devices_name_search, rowid, hostname, display_name)
        VALUES ('delete', old.rowid, old.hostname, old.display_name);
    INSERT INTO devices_name_search (rowid, hostname, display_name) VALUES (new.rowid, new.hostname, new.display_name);
END;
-- +goose StatementEnd

INSERT INTO devices_name_search (devices_name_search) VALUES ('rebuild');

-- +goose Down
DROP TRIGGER devices_name_search_update;
DROP TRIGGER devices_name_search_delete;
DROP TRIGGER devices_name_search_insert;
DROP TABLE devices_name_search;
