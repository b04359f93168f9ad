-- +goose Up
-- Automation names are unique in their scope (a partner's own, or one organization's), like
-- script names. Names that repeat already keep their oldest holder; the others get their ID
-- appended, so the index can be built.
UPDATE automations SET name = name || ' (' || id::text || ')'
WHERE EXISTS (SELECT 1 FROM automations older
              WHERE older.partner_id = automations.partner_id
                AND older.org_id IS NOT DISTINCT FROM automations.org_id
                AND lower(older.name) = lower(automations.name)
                AND (older.created_at < automations.created_at
                     OR (older.created_at = automations.created_at AND older.id < automations.id)));
CREATE UNIQUE INDEX automations_name ON automations (partner_id, COALESCE(org_id::text, ''), lower(name));

-- +goose Down
DROP INDEX automations_name;
