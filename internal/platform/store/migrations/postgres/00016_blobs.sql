-- +goose Up
-- Files kept in the database (internal/platform/blob): a row per blob, and its content in chunks of
-- about 1 MiB so that no statement moves a whole file. A Put writes its chunks under a
-- staging key starting with '~' (a character keys may not hold) and moves them under the
-- blob's key when it commits. Keys compare byte-wise (COLLATE "C", as on SQLite), so that the
-- staging keys are one range of the primary key, after every blob's.
CREATE TABLE blobs (
    key          TEXT COLLATE "C" PRIMARY KEY,
    size         BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE blob_chunks (
    key  TEXT COLLATE "C" NOT NULL,
    seq  INTEGER NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (key, seq)
);

-- +goose Down
DROP TABLE blob_chunks;
DROP TABLE blobs;
