-- +goose Up
-- Files kept in the database (internal/platform/blob): a row per blob, and its content in chunks of
-- about 1 MiB so that no statement moves a whole file. A Put writes its chunks under a
-- staging key starting with '~' (a character keys may not hold) and moves them under the
-- blob's key when it commits.
CREATE TABLE blobs (
    key          TEXT PRIMARY KEY,
    size         INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL
);

CREATE TABLE blob_chunks (
    key  TEXT NOT NULL,
    seq  INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (key, seq)
);

-- +goose Down
DROP TABLE blob_chunks;
DROP TABLE blobs;
