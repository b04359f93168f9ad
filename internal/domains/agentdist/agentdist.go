// Package agentdist keeps the released gale-agent binaries and serves them to endpoints: an
// operator registers a binary per version and platform (gale agent-release), promotes one
// version, and endpoints download it or run the install script without a credential.
//
// Binaries live in the database (agent_releases.data) and are read back in chunks, so a
// download never holds a whole binary in memory.
package agentdist

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// OSes and Archs are the platforms a binary may be registered for.
var (
	OSes  = []string{"linux", "windows", "darwin"}
	Archs = []string{"amd64", "arm64"}
)

// MaxBinaryBytes bounds a registered binary; gale-agent builds are a few tens of MiB.
const MaxBinaryBytes = 256 << 20

const maxNotesLen = 10000

// chunkBytes is how much of a binary one query reads while streaming it.
const chunkBytes = 1 << 20

// Options configure the service.
type Options struct {
	// PublicURL is the address endpoints reach the server at; the install script downloads
	// from it and enrolls the agent against it.
	PublicURL string
}

// Service registers, promotes and serves agent releases.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	opts    Options
	install []byte
}

// Deps are what the service works with.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock stamps registrations and releases (nil: the system clock).
	Clock clock.Clock
}

// New returns the service.
func New(d Deps, opts Options) *Service {
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), opts: opts, install: renderInstallScript(opts.PublicURL)}
}

// AgentPlatform is one registered binary of a version.
type AgentPlatform struct {
	OS        string `json:"os" enum:"linux,windows,darwin"`
	Arch      string `json:"arch" enum:"amd64,arm64"`
	SHA256    string `json:"sha256" doc:"Hex-encoded SHA-256 of the binary."`
	SizeBytes int64  `json:"sizeBytes"`
}

// AgentVersion is a registered agent version with its binaries.
type AgentVersion struct {
	Version  string `json:"version" doc:"Without a leading v."`
	Promoted bool   `json:"promoted" doc:"The version downloads and install.sh serve by default; at most one is."`
	Notes    string `json:"notes"`
	// ReleasedAt is set by the first promotion.
	ReleasedAt *time.Time      `json:"releasedAt" doc:"When the version was first promoted; null until then."`
	CreatedAt  time.Time       `json:"createdAt" doc:"When its first binary was registered."`
	Platforms  []AgentPlatform `json:"platforms"`
}

// Binary names one registered binary.
type Binary struct {
	Version string
	AgentPlatform
}

// ValidPlatform checks os and arch against the supported platforms.
func ValidPlatform(goos, arch string) error {
	if !slices.Contains(OSes, goos) {
		return apperr.Invalid("os", "use linux, windows or darwin")
	}
	if !slices.Contains(Archs, arch) {
		return apperr.Invalid("arch", "use amd64 or arm64")
	}
	return nil
}

// Register stores the binary read from r as the release of version for goos/arch and
// reports whether it was new. Registering the same bytes again is a no-op (so a directory
// can be registered twice); other bytes under the same version and platform are a conflict,
// because endpoints may already run the first ones.
func (s *Service) Register(ctx context.Context, version, goos, arch string, r io.Reader, notes string) (Binary, bool, error) {
	version, err := NormalizeVersion(version)
	if err != nil {
		return Binary{}, false, err
	}
	if err := ValidPlatform(goos, arch); err != nil {
		return Binary{}, false, err
	}
	if len(notes) > maxNotesLen {
		return Binary{}, false, apperr.Invalid("notes", fmt.Sprintf("at most %d characters", maxNotesLen))
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxBinaryBytes+1))
	if err != nil {
		return Binary{}, false, fmt.Errorf("read binary: %w", err)
	}
	if len(data) == 0 {
		return Binary{}, false, apperr.Invalid("file", "the binary is empty")
	}
	if len(data) > MaxBinaryBytes {
		return Binary{}, false, apperr.Invalid("file", fmt.Sprintf("the binary is larger than %d MiB", MaxBinaryBytes>>20))
	}
	sum := sha256.Sum256(data)
	b := Binary{Version: version, AgentPlatform: AgentPlatform{OS: goos, Arch: arch, SHA256: hex.EncodeToString(sum[:]), SizeBytes: int64(len(data))}}
	conflict := apperr.Conflict(fmt.Sprintf("agent %s for %s/%s is already registered with other bytes; register the new build under a new version",
		version, goos, arch))
	created := false
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		var existing string
		err := tx.QueryRowContext(ctx, `SELECT sha256 FROM agent_releases WHERE version = $1 AND os = $2 AND arch = $3`,
			version, goos, arch).Scan(&existing)
		if err == nil {
			if existing == b.SHA256 {
				return nil
			}
			return conflict
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO agent_versions (version, promoted, notes, created_at) VALUES ($1, FALSE, $2, $3)
			ON CONFLICT (version) DO UPDATE SET notes = excluded.notes WHERE excluded.notes <> ''`, version, notes, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO agent_releases (version, os, arch, sha256, size_bytes, data, notes, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (version, os, arch) DO NOTHING`,
			version, goos, arch, b.SHA256, b.SizeBytes, data, notes, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			// Registered by someone else meanwhile (several nodes registering their shipped
			// builds at once): the same bytes are the same release.
			if err := tx.QueryRowContext(ctx, `SELECT sha256 FROM agent_releases WHERE version = $1 AND os = $2 AND arch = $3`,
				version, goos, arch).Scan(&existing); err != nil {
				return err
			}
			if existing == b.SHA256 {
				return nil
			}
			return conflict
		}
		created = true
		return audit.Record(ctx, tx, audit.Entry{Action: "agent_release.register", ResourceType: "agent_release",
			ResourceID: version + "/" + goos + "/" + arch, ResourceName: "gale-agent " + version, Actor: actor(ctx),
			Details: map[string]any{"os": goos, "arch": arch, "sha256": b.SHA256, "sizeBytes": b.SizeBytes}})
	})
	if err != nil {
		return b, created, fmt.Errorf("register agent release: %w", err)
	}
	return b, created, nil
}

// actor is the caller, or the system when an operator command acts without one.
func actor(ctx context.Context) *audit.Actor {
	if access.PrincipalFrom(ctx) != nil {
		return nil
	}
	return &audit.Actor{Type: access.ActorSystem}
}

// Promote makes version the one downloads serve by default and returns the version promoted
// before ("" when none). The version needs at least one binary. The database allows one
// promoted version (a partial unique index); promotions run one at a time (SQLite's write
// transactions are serial, PostgreSQL takes a table lock), so concurrent promotions all
// succeed and the last one wins.
func (s *Service) Promote(ctx context.Context, version string) (string, error) {
	version, err := NormalizeVersion(version)
	if err != nil {
		return "", err
	}
	var previous string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		// Readers (downloads) pass; no other writer does.
		if err := s.db.LockTableWrites(ctx, tx, "agent_versions"); err != nil {
			return err
		}
		var binaries int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM agent_releases WHERE version = $1`, version).Scan(&binaries); err != nil {
			return err
		}
		if binaries == 0 {
			return apperr.NotFound("agent version " + version)
		}
		err := tx.QueryRowContext(ctx, `SELECT version FROM agent_versions WHERE promoted`).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if previous == version {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agent_versions SET promoted = FALSE WHERE promoted`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agent_versions SET promoted = TRUE, released_at = COALESCE(released_at, $2)
			WHERE version = $1`, version, s.clock.Now()); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "agent_release.promote", ResourceType: "agent_version",
			ResourceID: version, ResourceName: "gale-agent " + version, Actor: actor(ctx),
			Details: map[string]any{"previous": previous}})
	})
	if err != nil {
		return previous, fmt.Errorf("promote agent version: %w", err)
	}
	return previous, nil
}

// List returns every registered version, newest first by semantic-version order.
func (s *Service) List(ctx context.Context) ([]AgentVersion, error) {
	out, err := store.QueryAll(ctx, s.db, `SELECT version, promoted, notes, released_at, created_at FROM agent_versions`, nil,
		func(row store.Scanner) (AgentVersion, error) {
			v := AgentVersion{Platforms: []AgentPlatform{}}
			var released sql.NullTime
			err := row.Scan(&v.Version, &v.Promoted, &v.Notes, &released, &v.CreatedAt)
			v.ReleasedAt = store.TimePtr(released)
			return v, err
		})
	if err != nil {
		return nil, fmt.Errorf("list agent versions: %w", err)
	}
	if len(out) == 0 {
		return nil, nil // the API has always answered an empty list with null
	}
	index := make(map[string]int, len(out))
	for i, v := range out {
		index[v.Version] = i
	}
	type release struct {
		version string
		p       AgentPlatform
	}
	releases, err := store.QueryAll(ctx, s.db, `SELECT version, os, arch, sha256, size_bytes FROM agent_releases ORDER BY os, arch`,
		nil, func(row store.Scanner) (release, error) {
			var r release
			return r, row.Scan(&r.version, &r.p.OS, &r.p.Arch, &r.p.SHA256, &r.p.SizeBytes)
		})
	if err != nil {
		return nil, fmt.Errorf("list agent binaries: %w", err)
	}
	for _, r := range releases {
		if i, ok := index[r.version]; ok {
			out[i].Platforms = append(out[i].Platforms, r.p)
		}
	}
	slices.SortFunc(out, func(a, b AgentVersion) int { return CompareVersions(b.Version, a.Version) })
	return out, nil
}

// Latest returns the promoted version or, when none is promoted, the highest registered one.
func (s *Service) Latest(ctx context.Context) (AgentVersion, error) {
	all, err := s.List(ctx)
	if err != nil {
		return AgentVersion{}, err
	}
	if len(all) == 0 {
		return AgentVersion{}, apperr.NotFound("agent version")
	}
	for _, v := range all {
		if v.Promoted {
			return v, nil
		}
	}
	return all[0], nil
}

// Open returns a registered binary and a reader of its bytes. An empty version means the
// promoted one: endpoints install what the operator promoted, never merely the newest upload.
func (s *Service) Open(ctx context.Context, version, goos, arch string) (Binary, io.ReadCloser, error) {
	if err := ValidPlatform(goos, arch); err != nil {
		return Binary{}, nil, err
	}
	var a store.Args
	cond := "v.promoted"
	if version != "" {
		v, err := NormalizeVersion(version)
		if err != nil {
			return Binary{}, nil, err
		}
		cond = "v.version = " + a.Add(v)
	}
	b := Binary{AgentPlatform: AgentPlatform{OS: goos, Arch: arch}}
	var sum sql.NullString
	var size sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT v.version, r.sha256, r.size_bytes FROM agent_versions v
		LEFT JOIN agent_releases r ON r.version = v.version AND r.os = `+a.Add(goos)+` AND r.arch = `+a.Add(arch)+`
		WHERE `+cond, a.Values()...).Scan(&b.Version, &sum, &size)
	platform := goos + "/" + arch
	switch {
	case errors.Is(err, sql.ErrNoRows) && version == "":
		return b, nil, &apperr.Error{Kind: apperr.KindNotFound, Code: apperr.CodeNotFound, Message: "no agent release is promoted for " +
			platform + "; register one with gale agent-release register and promote it with gale agent-release promote"}
	case errors.Is(err, sql.ErrNoRows):
		return b, nil, apperr.NotFound("agent version " + version)
	case err != nil:
		return b, nil, fmt.Errorf("look up agent release: %w", err)
	case !sum.Valid:
		return b, nil, &apperr.Error{Kind: apperr.KindNotFound, Code: apperr.CodeNotFound, Message: fmt.Sprintf(
			"agent %s has no build for %s; register one with gale agent-release register --version %s --os %s --arch %s --file PATH",
			b.Version, platform, b.Version, goos, arch)}
	}
	b.SHA256, b.SizeBytes = sum.String, size.Int64
	return b, &blobReader{ctx: ctx, db: s.db, bin: b}, nil
}

// blobReader streams a binary out of the database a chunk at a time. Registered binaries
// never change, so reading them in several queries is consistent.
type blobReader struct {
	ctx context.Context
	db  *store.DB
	bin Binary
	off int64
	buf []byte
}

func (r *blobReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.off >= r.bin.SizeBytes {
			return 0, io.EOF
		}
		n := min(int64(chunkBytes), r.bin.SizeBytes-r.off)
		// substr counts from 1 and works on bytes of a BLOB (SQLite) and a bytea (PostgreSQL).
		err := r.db.QueryRowContext(r.ctx, `SELECT substr(data, $1, $2) FROM agent_releases WHERE version = $3 AND os = $4 AND arch = $5`,
			r.off+1, n, r.bin.Version, r.bin.OS, r.bin.Arch).Scan(&r.buf)
		if err != nil {
			return 0, fmt.Errorf("read agent binary: %w", err)
		}
		if len(r.buf) == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		r.off += int64(len(r.buf))
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *blobReader) Close() error { return nil }
