package thirdparty

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service keeps the catalog and runs its smoke tests.
type Service struct {
	db     *store.DB
	clock  clock.Clock
	client *http.Client
	opts   Options
}

// Options bound the smoke tests' downloads.
type Options struct {
	// MaxBytes caps an installer's size; Timeout a whole download.
	MaxBytes int64
	Timeout  time.Duration
}

// Defaults of Options.
const (
	DefaultMaxBytes = 2 << 30
	DefaultTimeout  = 10 * time.Minute
	// staleAfter is how long a test may stay running before it is taken for interrupted (its
	// node stopped): longer than any download may take.
	staleAfter = 30 * time.Minute
)

// Deps is what the catalog's service is built from.
type Deps struct {
	DB *store.DB
	// Clock is the time tests are queued, claimed and taken for interrupted on; nil: the
	// system clock.
	Clock clock.Clock
}

// New returns a Service.
func New(d Deps, opts Options) *Service {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Service{db: d.DB, clock: clock.Or(d.Clock), client: &http.Client{Timeout: opts.Timeout}, opts: opts}
}

// requireSystem refuses callers below the platform: the catalog is the platform's.
func requireSystem(ctx context.Context) error {
	if !access.ScopeFrom(ctx).IsSystem() {
		return apperr.Forbidden("the third-party catalog is kept by the platform's administrators")
	}
	return nil
}

const packageColumns = `p.id, p.vendor, p.name, p.description, p.homepage, p.os_types, p.package_names, p.default_severity,
	p.created_at, p.updated_at`

func scanPackage(r store.Scanner) (Package, error) {
	var p Package
	var osTypes, names string
	if err := r.Scan(&p.ID, &p.Vendor, &p.Name, &p.Description, &p.Homepage, &osTypes, &names, &p.DefaultSeverity,
		&p.CreatedAt, &p.UpdatedAt); err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	if err := errors.Join(json.Unmarshal([]byte(osTypes), &p.OSTypes), json.Unmarshal([]byte(names), &p.PackageNames)); err != nil {
		return p, fmt.Errorf("third-party package %s: %w", p.ID, err)
	}
	return p, nil
}

// ListFilter narrows List.
type ListFilter struct {
	Vendor         string
	PlatformTested *bool
	Search         string
}

// List lists the catalog, oldest entry first, with each entry's versions and last test.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Package, string, *int, error) {
	if err := requireSystem(ctx); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"TRUE"}
	if f.Vendor != "" {
		conds = append(conds, "lower(p.vendor) = "+a.Add(strings.ToLower(f.Vendor)))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "p.name", "p.vendor"))
	}
	if f.PlatformTested != nil {
		latestTested := `EXISTS (SELECT 1 FROM third_party_versions v WHERE v.package_id = p.id AND v.position = 0 AND v.platform_tested)`
		if !*f.PlatformTested {
			latestTested = "NOT " + latestTested
		}
		conds = append(conds, latestTested)
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: packageColumns, From: " FROM third_party_packages p",
		Conds: conds, Args: &a, SortKey: "p.id", SortID: "p.id"}, page, scanPackage, func(p Package) (string, string) { return p.ID, p.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list third-party packages: %w", err)
	}
	if err := s.complete(ctx, s.db, rows); err != nil {
		return nil, "", nil, err
	}
	return rows, next, total, nil
}

// complete adds their versions and last test to entries.
func (s *Service) complete(ctx context.Context, q store.Querier, ps []Package) error {
	if len(ps) == 0 {
		return nil
	}
	at := map[string]*Package{}
	ids := make([]string, len(ps))
	for i := range ps {
		ps[i].Versions = []Version{}
		at[ps[i].ID], ids[i] = &ps[i], ps[i].ID
	}
	type packageVersion struct {
		packageID string
		Version
	}
	var a store.Args
	versions, err := store.QueryAll(ctx, q, `SELECT package_id, version, download_url, sha256, file_type, os_type, cve_ids, released_at,
		platform_tested, tested_at FROM third_party_versions WHERE package_id IN `+a.In(ids)+` ORDER BY package_id, position`, a.Values(),
		func(r store.Scanner) (packageVersion, error) {
			var pv packageVersion
			var cves string
			if err := r.Scan(&pv.packageID, &pv.Version.Version, &pv.DownloadURL, &pv.SHA256, &pv.FileType, &pv.OSType, &cves,
				&pv.ReleasedAt, &pv.PlatformTested, &pv.TestedAt); err != nil {
				return pv, err
			}
			if err := json.Unmarshal([]byte(cves), &pv.CVEIDs); err != nil {
				return pv, fmt.Errorf("third-party version %s %s: %w", pv.packageID, pv.Version.Version, err)
			}
			pv.ReleasedAt, pv.TestedAt = utc(pv.ReleasedAt), utc(pv.TestedAt)
			return pv, nil
		})
	if err != nil {
		return fmt.Errorf("read third-party versions: %w", err)
	}
	for _, pv := range versions {
		at[pv.packageID].Versions = append(at[pv.packageID].Versions, pv.Version)
	}
	for i := range ps {
		if len(ps[i].Versions) > 0 {
			ps[i].LatestVersion, ps[i].PlatformTested = &ps[i].Versions[0].Version, ps[i].Versions[0].PlatformTested
		}
	}
	var b store.Args
	tests, err := store.QueryAll(ctx, q, `SELECT `+testColumns+` FROM third_party_tests WHERE package_id IN `+b.In(ids)+
		` ORDER BY created_at, id`, b.Values(), scanTest)
	if err != nil {
		return fmt.Errorf("read third-party tests: %w", err)
	}
	for i := range tests {
		at[tests[i].PackageID].LastTest = &tests[i]
	}
	return nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

const testColumns = `id, package_id, version, status, message, size_bytes, created_at, started_at, finished_at`

func scanTest(r store.Scanner) (SmokeTest, error) {
	var t SmokeTest
	err := r.Scan(&t.ID, &t.PackageID, &t.Version, &t.Status, &t.Message, &t.SizeBytes, &t.CreatedAt, &t.StartedAt, &t.FinishedAt)
	t.CreatedAt, t.StartedAt, t.FinishedAt = t.CreatedAt.UTC(), utc(t.StartedAt), utc(t.FinishedAt)
	return t, err
}

// Get returns an entry.
func (s *Service) Get(ctx context.Context, id string) (Package, error) {
	if err := requireSystem(ctx); err != nil {
		return Package{}, err
	}
	return s.get(ctx, s.db, id)
}

func (s *Service) get(ctx context.Context, q store.Querier, id string) (Package, error) {
	var a store.Args
	p, err := store.ByID(ctx, q, "third-party package", `SELECT `+packageColumns+` FROM third_party_packages p`, "p.id", id, &a, nil,
		scanPackage)
	if err != nil {
		return Package{}, err
	}
	ps := []Package{p}
	if err := s.complete(ctx, q, ps); err != nil {
		return Package{}, err
	}
	return ps[0], nil
}

// Create adds an entry.
func (s *Service) Create(ctx context.Context, in PackageInput) (Package, error) {
	if err := requireSystem(ctx); err != nil {
		return Package{}, err
	}
	p := Package{ID: store.NewID(), Vendor: store.Deref(in.Vendor), Name: store.Deref(in.Name), Description: store.Deref(in.Description),
		Homepage: store.Deref(in.Homepage), OSTypes: in.OSTypes, PackageNames: in.PackageNames, DefaultSeverity: "unknown"}
	if in.DefaultSeverity != nil {
		p.DefaultSeverity = *in.DefaultSeverity
	}
	if in.Versions != nil {
		p.Versions = *in.Versions
	}
	if err := validate(&p); err != nil {
		return Package{}, err
	}
	var out Package
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO third_party_packages (id, vendor, name, description, homepage, os_types,
			package_names, default_severity, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`, p.ID, p.Vendor,
			p.Name, p.Description, p.Homepage, store.EncodeJSON(p.OSTypes), store.EncodeJSON(p.PackageNames), p.DefaultSeverity, now); err != nil {
			if store.IsUniqueViolation(err) {
				return nameTaken(p)
			}
			return fmt.Errorf("insert third-party package: %w", err)
		}
		if err := writeVersions(ctx, tx, p.ID, p.Versions, nil); err != nil {
			return err
		}
		var err error
		if out, err = s.get(ctx, tx, p.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "third_party_package.create", ResourceType: "third_party_package",
			ResourceID: p.ID, ResourceName: p.Vendor + " " + p.Name, Details: map[string]any{"versions": len(p.Versions)}})
	})
	if err != nil {
		return out, fmt.Errorf("create third-party package: %w", err)
	}
	return out, nil
}

func nameTaken(p Package) error {
	return apperr.ConflictCode("THIRD_PARTY_PACKAGE_EXISTS", "the catalog already has "+p.Vendor+" "+p.Name)
}

// Update changes the fields in sets; versions given replace the entry's, keeping the test
// results of versions whose installer (address and checksum) did not change.
func (s *Service) Update(ctx context.Context, id string, in PackageInput) (Package, error) {
	if err := requireSystem(ctx); err != nil {
		return Package{}, err
	}
	var out Package
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, id)
		if err != nil {
			return err
		}
		p := before
		store.Assign(&p.Vendor, in.Vendor)
		store.Assign(&p.Name, in.Name)
		store.Assign(&p.Description, in.Description)
		store.Assign(&p.Homepage, in.Homepage)
		store.Assign(&p.DefaultSeverity, in.DefaultSeverity)
		if in.OSTypes != nil {
			p.OSTypes = in.OSTypes
		}
		if in.PackageNames != nil {
			p.PackageNames = in.PackageNames
		}
		if in.Versions != nil {
			p.Versions = *in.Versions
		}
		if err := validate(&p); err != nil {
			return err
		}
		c := store.NewChanges(s.clock.Now())
		c.Set("vendor", p.Vendor)
		c.Set("name", p.Name)
		c.Set("description", p.Description)
		c.Set("homepage", p.Homepage)
		c.Set("os_types", store.EncodeJSON(p.OSTypes))
		c.Set("package_names", store.EncodeJSON(p.PackageNames))
		c.Set("default_severity", p.DefaultSeverity)
		if _, err := tx.ExecContext(ctx, `UPDATE third_party_packages SET `+c.SQL()+` WHERE id = `+c.Args.Add(id), c.Args.Values()...); err != nil {
			if store.IsUniqueViolation(err) {
				return nameTaken(p)
			}
			return fmt.Errorf("update third-party package %s: %w", id, err)
		}
		if in.Versions != nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM third_party_versions WHERE package_id = $1`, id); err != nil {
				return fmt.Errorf("replace third-party versions of %s: %w", id, err)
			}
			if err := writeVersions(ctx, tx, id, p.Versions, before.Versions); err != nil {
				return err
			}
		}
		if out, err = s.get(ctx, tx, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "third_party_package.update", ResourceType: "third_party_package",
			ResourceID: id, ResourceName: p.Vendor + " " + p.Name, Details: map[string]any{"versionsReplaced": in.Versions != nil}})
	})
	if err != nil {
		return out, fmt.Errorf("update third-party package: %w", err)
	}
	return out, nil
}

// writeVersions inserts an entry's versions in order; a version whose installer is the
// same as in before keeps its test result.
func writeVersions(ctx context.Context, tx *sql.Tx, id string, vs, before []Version) error {
	for i, v := range vs {
		for _, b := range before {
			if b.Version == v.Version && b.DownloadURL == v.DownloadURL && b.SHA256 == v.SHA256 {
				v.PlatformTested, v.TestedAt = b.PlatformTested, b.TestedAt
			}
		}
		cves := v.CVEIDs
		if cves == nil {
			cves = []string{}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO third_party_versions (package_id, version, download_url, sha256, file_type, os_type,
			cve_ids, released_at, platform_tested, tested_at, position) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, id, v.Version,
			v.DownloadURL, v.SHA256, v.FileType, v.OSType, store.EncodeJSON(cves), v.ReleasedAt, v.PlatformTested, v.TestedAt, i); err != nil {
			return fmt.Errorf("insert third-party version %s of %s: %w", v.Version, id, err)
		}
	}
	return nil
}

// Delete removes an entry with its versions and tests; a test running meanwhile finds nothing
// to record.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := requireSystem(ctx); err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.get(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM third_party_packages WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete third-party package %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "third_party_package.delete", ResourceType: "third_party_package",
			ResourceID: id, ResourceName: p.Vendor + " " + p.Name})
	})
}

// QueueTest queues a smoke test of one of the entry's versions: 409 TEST_IN_PROGRESS while
// the entry has one queued or running (the database's unique index decides between callers).
func (s *Service) QueueTest(ctx context.Context, id, version string) (SmokeTest, error) {
	if err := requireSystem(ctx); err != nil {
		return SmokeTest{}, err
	}
	var out SmokeTest
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.get(ctx, tx, id)
		if err != nil {
			return err
		}
		known := false
		for _, v := range p.Versions {
			known = known || v.Version == version
		}
		if !known {
			return apperr.Invalid("version", "the entry has no version "+version)
		}
		testID := store.NewID()
		var by any
		if pr := access.PrincipalFrom(ctx); pr != nil && pr.UserID != "" {
			by = pr.UserID
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO third_party_tests (id, package_id, version, status, created_by, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, testID, id, version, TestQueued, by, s.clock.Now()); err != nil {
			if store.IsUniqueViolation(err) {
				return apperr.ConflictCode(CodeTestInProgress, "a smoke test of this entry is queued or running; wait for its result")
			}
			return fmt.Errorf("insert third-party smoke test: %w", err)
		}
		if out, err = scanTest(tx.QueryRowContext(ctx, `SELECT `+testColumns+` FROM third_party_tests WHERE id = $1`, testID)); err != nil {
			return fmt.Errorf("read smoke test %s: %w", testID, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "third_party_package.test", ResourceType: "third_party_package",
			ResourceID: id, ResourceName: p.Vendor + " " + p.Name, Details: map[string]any{"version": version, "testId": testID}})
	})
	if err != nil {
		return out, fmt.Errorf("queue a third-party smoke test: %w", err)
	}
	return out, nil
}

// maxEntries bounds the catalog that domains read whole (detection of applications on
// devices): far above any real catalog.
const maxEntries = 10000

// Entries returns the whole catalog with each entry's versions, for domains that recognise
// its applications on devices (third-party patches). It needs no caller: the catalog is the
// platform's, and what a domain derives from it stays in that domain's tenancy.
func (s *Service) Entries(ctx context.Context, q store.Querier) ([]Package, error) {
	out, err := store.QueryAll(ctx, q, `SELECT `+packageColumns+` FROM third_party_packages p ORDER BY p.id LIMIT $1`, []any{maxEntries},
		scanPackage)
	if err != nil {
		return nil, fmt.Errorf("read the third-party catalog: %w", err)
	}
	return out, s.complete(ctx, q, out)
}
