package blob

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// abandonAfter is how old the staged chunks of a Put must be before another Put deletes them:
// a Put cleans up after itself when it fails, and this catches those of a node that died.
const abandonAfter = 24 * time.Hour

// database keeps blobs in the server's database: a row of blobs for each, and its content in
// rows of blob_chunks numbered from 0.
type database struct {
	db    *store.DB
	clock clock.Clock
}

// NewDatabase returns a Store that keeps blobs in db, in the tables blobs and blob_chunks, on
// the system clock.
func NewDatabase(db *store.DB) Store { return &database{db: db, clock: clock.System{}} }

// Put writes each chunk in a short transaction of its own under a staging key, and moves them
// under key in a last one. One transaction for the whole upload would keep every other writer
// waiting on SQLite, and a pooled connection taken on PostgreSQL, for as long as the client
// takes to send the file.
func (d *database) Put(ctx context.Context, key string, r io.Reader, contentType string) (Info, error) {
	if err := validateKey(key); err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	if contentType == "" {
		contentType = defaultContentType
	}
	staging := stagingKey(d.clock.Now())
	seq := 0
	size, sum, err := readChunks(ctx, r, func(chunk []byte) error {
		err := d.db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO blob_chunks (key, seq, data) VALUES ($1, $2, $3)`, staging, seq, chunk)
			return err
		})
		seq++
		return err
	})
	info := Info{Key: key, Size: size, ContentType: contentType, SHA256: sum, CreatedAt: d.clock.Now()}
	if err == nil {
		err = d.commit(ctx, staging, seq, info)
	}
	if err != nil {
		d.discard(ctx, staging)
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	return info, nil
}

// commit makes the chunks staged under staging the content of info.Key, in one transaction.
// It writes the blobs row first: on PostgreSQL that row's lock holds a concurrent commit of the
// same key until this one is done, so that it deletes the chunks this one moved in rather than
// adding its own to them.
func (d *database) commit(ctx context.Context, staging string, chunks int, info Info) error {
	return d.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs (key, size, content_type, sha256, created_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (key) DO UPDATE SET size = excluded.size, content_type = excluded.content_type,
				sha256 = excluded.sha256, created_at = excluded.created_at`,
			info.Key, info.Size, info.ContentType, info.SHA256, info.CreatedAt)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE key = $1`, info.Key); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE blob_chunks SET key = $1 WHERE key = $2`, info.Key, staging)
		if err != nil {
			return err
		}
		// Only the sweep below deletes another Put's staged chunks, and only once they are a
		// day old: an upload that slow must not commit what is left of it.
		moved, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if moved != int64(chunks) {
			return fmt.Errorf("%d of %d staged chunks left to move", moved, chunks)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE key >= '~' AND key < $1`,
			stagingKeyBefore(d.clock.Now().Add(-abandonAfter)))
		return err
	})
}

// discard deletes the staged chunks of a failed Put. It goes ahead when ctx is cancelled, the
// usual reason a Put fails; chunks it cannot delete go with the sweep of abandoned uploads.
func (d *database) discard(ctx context.Context, staging string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = d.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE key = $1`, staging)
		return err
	})
}

// stagingKey names the chunks of a Put started at t: "~" sorts after every byte a key may
// hold, and the fixed-width hex time after it orders staged chunks by age, so that abandoned
// ones are one range of the primary key.
func stagingKey(t time.Time) string {
	return stagingKeyBefore(t) + "/" + store.NewID()
}

// stagingKeyBefore is the bound below which lie the staging keys of Puts started before t.
func stagingKeyBefore(t time.Time) string {
	return fmt.Sprintf("~%016x", t.UnixMilli())
}

func (d *database) Open(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	info, err := d.stat(ctx, key)
	if err != nil {
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, err)
	}
	return &chunkReader{ctx: ctx, db: d.db, info: info}, info, nil
}

func (d *database) Stat(ctx context.Context, key string) (Info, error) {
	info, err := d.stat(ctx, key)
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %q: %w", key, err)
	}
	return info, nil
}

func (d *database) stat(ctx context.Context, key string) (Info, error) {
	if err := validateKey(key); err != nil {
		return Info{}, err
	}
	info := Info{Key: key}
	var created store.NullTime
	err := d.db.QueryRowContext(ctx, `SELECT size, content_type, sha256, `+store.TimeColumns("created_at")+`
		FROM blobs WHERE key = $1`, key).Scan(&info.Size, &info.ContentType, &info.SHA256, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, ErrNotFound
	}
	info.CreatedAt = created.Time
	return info, err
}

// Delete deletes the blobs row before the chunks, taking the row lock in the same order as a
// commit does.
func (d *database) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return fmt.Errorf("delete blob %q: %w", key, err)
	}
	err := d.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE key = $1`, key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE key = $1`, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete blob %q: %w", key, err)
	}
	return nil
}

// chunkReader reads a blob one chunk at a time, each with a query of its own, so that no
// connection or transaction stays taken while the caller works through the content.
type chunkReader struct {
	ctx    context.Context
	db     *store.DB
	info   Info
	seq    int    // the next chunk to fetch
	read   int64  // bytes fetched so far
	buf    []byte // holds the current chunk, reused for the next
	rest   []byte // the part of buf not yet read
	closed bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, fmt.Errorf("read blob %q: %w", r.info.Key, fs.ErrClosed)
	}
	for len(r.rest) == 0 {
		if r.read >= r.info.Size {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, fmt.Errorf("read blob %q: %w", r.info.Key, err)
		}
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// next fetches the next chunk. The query matches the blob's SHA-256 as Open saw it, so that a
// reader whose blob is replaced meanwhile fails rather than going on with the new content.
func (r *chunkReader) next() error {
	rows, err := r.db.QueryContext(r.ctx, `SELECT c.data FROM blob_chunks c JOIN blobs b ON b.key = c.key
		WHERE c.key = $1 AND c.seq = $2 AND b.sha256 = $3`, r.info.Key, r.seq, r.info.SHA256)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return fmt.Errorf("replaced or deleted while being read: %w", ErrNotFound)
	}
	// RawBytes points into the driver's copy of the value: one copy into buf instead of a
	// new slice for every chunk.
	var data sql.RawBytes
	if err := rows.Scan(&data); err != nil {
		return err
	}
	r.buf = append(r.buf[:0], data...)
	r.rest = r.buf
	r.read += int64(len(data))
	r.seq++
	return rows.Close()
}

func (r *chunkReader) Close() error {
	r.closed, r.buf, r.rest = true, nil, nil
	return nil
}
