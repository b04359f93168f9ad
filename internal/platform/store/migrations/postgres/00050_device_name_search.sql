-- +goose Up
-- A search for part of a device's name reads trigram indexes instead of every device. pg_trgm
-- ships with PostgreSQL and is a trusted extension (a database owner may create it); where it
-- cannot be created the searches still work, by reading every device of the scope.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): device name searches read every device', SQLERRM;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX devices_hostname_trgm ON devices USING gin (LOWER(hostname) gin_trgm_ops);
        CREATE INDEX devices_display_name_trgm ON devices USING gin (LOWER(display_name) gin_trgm_ops);
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS devices_display_name_trgm;
DROP INDEX IF EXISTS devices_hostname_trgm;
