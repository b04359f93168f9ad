package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Store keeps blobs by key. Keys are chosen by callers ("tickets/<orgId>/<attachmentId>"):
// 1 to 512 bytes of [A-Za-z0-9/._-], with no leading slash, no ".." and no "//". Every method
// rejects any other key with an error satisfying errors.Is(err, ErrInvalidKey).
type Store interface {
	// Put stores r under key, replacing any blob there, and returns the stored Info (size and
	// SHA-256 computed while streaming). An empty contentType stores
	// "application/octet-stream". A Put that fails, because r or ctx did, stores nothing and
	// leaves the blob it would have replaced as it was.
	Put(ctx context.Context, key string, r io.Reader, contentType string) (Info, error)
	// Open streams the blob; the caller closes the reader. ctx bounds the reads too. Missing →
	// errors.Is(err, ErrNotFound).
	Open(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat returns the blob's Info. Missing → errors.Is(err, ErrNotFound).
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the blob; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// Info describes a stored blob.
type Info struct {
	Key         string
	Size        int64
	ContentType string
	// SHA256 is the SHA-256 of the content in lowercase hex.
	SHA256 string
	// CreatedAt is when the blob was stored, in UTC to the microsecond.
	CreatedAt time.Time
}

var (
	// ErrNotFound reports a key with no blob.
	ErrNotFound = errors.New("blob not found")
	// ErrInvalidKey reports a key outside the rules of Store.
	ErrInvalidKey = errors.New("invalid blob key")
	// ErrTooLarge reports a Put over Config.MaxSize.
	ErrTooLarge = errors.New("blob too large")
)

const (
	maxKeyLen          = 512
	defaultContentType = "application/octet-stream"
	// chunkSize is how much of a blob is read, hashed and written at a time: one row of
	// blob_chunks, and about the most of a blob either implementation holds in memory.
	chunkSize = 1 << 20
)

// validateKey checks key against the rules of Store.
func validateKey(key string) error {
	if len(key) == 0 || len(key) > maxKeyLen {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", ErrInvalidKey, len(key), maxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/._-", c) >= 0) {
			return fmt.Errorf("%w: byte %q at %d is not one of [A-Za-z0-9/._-]", ErrInvalidKey, c, i)
		}
	}
	switch {
	case key[0] == '/':
		return fmt.Errorf("%w: leading slash", ErrInvalidKey)
	case strings.Contains(key, ".."):
		return fmt.Errorf("%w: contains \"..\"", ErrInvalidKey)
	case strings.Contains(key, "//"):
		return fmt.Errorf("%w: contains \"//\"", ErrInvalidKey)
	}
	return nil
}

// readChunks reads r to its end in chunks of chunkSize (the last one shorter, none for an
// empty r) and hands each to fn, which must not keep it. It returns the size and SHA-256 of
// everything read, and stops at the first error of r, fn or ctx.
func readChunks(ctx context.Context, r io.Reader, fn func(chunk []byte) error) (size int64, sum string, err error) {
	buf := make([]byte, chunkSize)
	h := sha256.New()
	for {
		n, rerr := fill(r, buf)
		if rerr != nil && rerr != io.EOF {
			return 0, "", rerr
		}
		// A reader that has already ended the request may still yield data (a body read from a
		// buffer); stop at the next chunk rather than at the end of the blob.
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		if n > 0 {
			h.Write(buf[:n])
			size += int64(n)
			if err := fn(buf[:n]); err != nil {
				return 0, "", err
			}
		}
		if rerr == io.EOF {
			return size, hex.EncodeToString(h.Sum(nil)), nil
		}
	}
}

// fill reads into buf until it is full or r ends (io.EOF). Unlike io.ReadFull it passes on a
// reader's own io.ErrUnexpectedEOF (a truncated upload) as an error, not as the end of the
// blob.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Config chooses and configures the Store the server uses.
type Config struct {
	// Backend is "database" (the default when empty) or "s3".
	Backend string
	// MaxSize, when positive, is the largest blob in bytes that Put accepts; 0 is no limit.
	MaxSize int64
	// S3 configures the "s3" backend.
	S3 S3Config
	// Clock stamps blobs and ages abandoned uploads; nil is the system clock.
	Clock clock.Clock
}

// Open returns the Store that cfg chooses: db's own tables, or an S3 bucket.
func Open(ctx context.Context, db *store.DB, cfg Config) (Store, error) {
	if cfg.MaxSize < 0 {
		return nil, fmt.Errorf("blob store: MaxSize is %d, want 0 (no limit) or more", cfg.MaxSize)
	}
	var s Store
	switch cfg.Backend {
	case "", "database":
		s = &database{db: db, clock: clock.Or(cfg.Clock)}
	case "s3":
		var err error
		if s, err = newS3(ctx, cfg.S3, clock.Or(cfg.Clock)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("blob store: unknown Backend %q, want database or s3", cfg.Backend)
	}
	if cfg.MaxSize > 0 {
		s = limited{Store: s, max: cfg.MaxSize}
	}
	return s, nil
}

// limited refuses blobs over max bytes. Its reader fails as soon as the content passes the
// limit, and a Put whose reader fails stores nothing.
type limited struct {
	Store
	max int64
}

func (l limited) Put(ctx context.Context, key string, r io.Reader, contentType string) (Info, error) {
	return l.Store.Put(ctx, key, &limitReader{r: r, max: l.max}, contentType)
}

type limitReader struct {
	r    io.Reader
	max  int64
	read int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.read += int64(n)
	if l.read > l.max {
		return 0, fmt.Errorf("%w: over %d bytes", ErrTooLarge, l.max)
	}
	return n, err
}
