package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// backend is one implementation under the contract tests, with a view of what it holds.
type backend struct {
	store Store
	// blobs lists the keys of the stored blobs.
	blobs func(t *testing.T) []string
	// leftovers lists what belongs to no blob: staged chunks, spooled files.
	leftovers func(t *testing.T) []string
}

// eachBackend runs test against a fresh database store (on the backend storetest picks) and
// a fresh S3 store on an in-process fake.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Run("database-"+storetest.Backend(), func(t *testing.T) { test(t, newDatabaseBackend(t)) })
	t.Run("s3", func(t *testing.T) { test(t, newS3Backend(t)) })
}

func newDatabaseBackend(t *testing.T) backend {
	db := storetest.Open(t)
	return backend{
		store: NewDatabase(db),
		blobs: func(t *testing.T) []string {
			return queryStrings(t, db, `SELECT key FROM blobs ORDER BY key`)
		},
		leftovers: func(t *testing.T) []string {
			return queryStrings(t, db, `SELECT DISTINCT key FROM blob_chunks WHERE key NOT IN (SELECT key FROM blobs) ORDER BY key`)
		},
	}
}

func queryStrings(t *testing.T, db *store.DB, query string) []string {
	t.Helper()
	rows, err := db.SQL.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	testBucket = "gale-test"
	testPrefix = "gale"
)

// newS3Backend serves an in-memory gofakes3 on loopback. Puts spool to a directory of the
// test's own (TMPDIR), so that leftovers can list what they leave there.
func newS3Backend(t *testing.T) backend {
	spool := t.TempDir()
	t.Setenv("TMPDIR", spool)
	mem := s3mem.New()
	if err := mem.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	s, err := NewS3(context.Background(), S3Config{
		Endpoint: srv.URL, Region: "us-east-1", Bucket: testBucket, Prefix: testPrefix,
		AccessKeyID: "test", SecretAccessKey: "test", PathStyle: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := s.(*s3Store).client
	return backend{
		store: s,
		blobs: func(t *testing.T) []string {
			out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(testBucket)})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range out.Contents {
				key, ok := strings.CutPrefix(aws.ToString(o.Key), testPrefix+"/")
				if !ok {
					t.Errorf("object %q is outside the prefix %q", aws.ToString(o.Key), testPrefix)
				}
				keys = append(keys, key)
			}
			return keys
		},
		leftovers: func(t *testing.T) []string {
			entries, err := os.ReadDir(spool)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			return names
		},
	}
}

// content is n deterministic pseudo-random bytes, the same for the same seed, generated as
// they are read.
func content(seed uint64, n int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

func contentSum(t *testing.T, seed uint64, n int64) string {
	t.Helper()
	return readSum(t, content(seed, n))
}

func readSum(t *testing.T, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func put(t *testing.T, s Store, key string, seed uint64, n int64) Info {
	t.Helper()
	info, err := s.Put(context.Background(), key, content(seed, n), "application/pdf")
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

// openSum reads the blob under key to its end and returns its Info and the SHA-256 and length
// of what was read.
func openSum(t *testing.T, s Store, key string) (Info, string, int64) {
	t.Helper()
	rc, info, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return info, hex.EncodeToString(h.Sum(nil)), n
}

func sameInfo(a, b Info) bool {
	return a.Key == b.Key && a.Size == b.Size && a.ContentType == b.ContentType && a.SHA256 == b.SHA256 &&
		a.CreatedAt.Equal(b.CreatedAt)
}

// checkBlob asserts that key holds the content of seed and n, the same through Open and Stat.
func checkBlob(t *testing.T, s Store, key string, seed uint64, n int64) Info {
	t.Helper()
	want := contentSum(t, seed, n)
	info, got, read := openSum(t, s, key)
	if got != want || read != n {
		t.Fatalf("%s: read %d bytes with SHA-256 %s, want %d with %s", key, read, got, n, want)
	}
	if info.Key != key || info.Size != n || info.SHA256 != want {
		t.Errorf("%s: Open's info %+v, want size %d and SHA-256 %s", key, info, n, want)
	}
	stat, err := s.Stat(context.Background(), key)
	if err != nil {
		t.Fatalf("stat %s: %v", key, err)
	}
	if !sameInfo(stat, info) {
		t.Errorf("%s: Stat %+v, Open %+v", key, stat, info)
	}
	return info
}

func checkEmpty(t *testing.T, got []string, what string) {
	t.Helper()
	if len(got) != 0 {
		t.Errorf("%s: %q, want none", what, got)
	}
}

func TestRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for i, size := range []int64{0, 1, chunkSize, chunkSize + 1, 64 << 20} {
			key := "tickets/org-1/attachment-" + string(rune('a'+i))
			before := store.Now()
			info := put(t, b.store, key, uint64(i), size)
			if want := contentSum(t, uint64(i), size); info.Key != key || info.Size != size || info.SHA256 != want ||
				info.ContentType != "application/pdf" {
				t.Errorf("size %d: Put returned %+v, want size %d and SHA-256 %s", size, info, size, want)
			}
			if info.CreatedAt.Before(before) || info.CreatedAt.After(store.Now()) || info.CreatedAt.Location() != time.UTC {
				t.Errorf("size %d: CreatedAt %v, want the time of the Put in UTC", size, info.CreatedAt)
			}
			if got := checkBlob(t, b.store, key, uint64(i), size); !sameInfo(got, info) {
				t.Errorf("size %d: Open %+v, Put %+v", size, got, info)
			}
		}
		info, err := b.store.Put(context.Background(), "untyped", strings.NewReader("x"), "")
		if err != nil || info.ContentType != "application/octet-stream" {
			t.Errorf("Put without a content type: %+v, %v; want application/octet-stream", info, err)
		}
		checkEmpty(t, b.leftovers(t), "leftovers")
	})
}

func TestReplace(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const key = "reports/org-1/monthly.pdf"
		put(t, b.store, key, 1, 3*chunkSize+5)
		second, err := b.store.Put(context.Background(), key, content(2, chunkSize/2), "text/csv")
		if err != nil {
			t.Fatal(err)
		}
		if got := checkBlob(t, b.store, key, 2, chunkSize/2); !sameInfo(got, second) {
			t.Errorf("after replace: %+v, want the second Put's %+v", got, second)
		}
		if got := b.blobs(t); len(got) != 1 || got[0] != key {
			t.Errorf("blobs %q, want only %s", got, key)
		}
		checkEmpty(t, b.leftovers(t), "leftovers")
	})
}

func TestDelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const key = "scripts/org-1/bundle.zip"
		put(t, b.store, key, 1, 2*chunkSize+1)
		put(t, b.store, "scripts/org-1/other.zip", 2, 10)
		if err := b.store.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.store.Open(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open after Delete: %v, want ErrNotFound", err)
		}
		if _, err := b.store.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
		}
		if err := b.store.Delete(ctx, key); err != nil {
			t.Errorf("second Delete: %v, want nil", err)
		}
		checkBlob(t, b.store, "scripts/org-1/other.zip", 2, 10)
		checkEmpty(t, b.leftovers(t), "leftovers")
	})
}

func TestKeys(t *testing.T) {
	bad := []string{
		"", strings.Repeat("a", 513), "/tickets/a", "tickets/../a", "..", "a..b", "tickets//a",
		"a b", "a\x00b", "a\nb", "tickets/é", "a\\b", "a:b", "a?b", "a%2fb", "~staging",
	}
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, key := range bad {
			if _, err := b.store.Put(ctx, key, strings.NewReader("x"), ""); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Put(%q): %v, want ErrInvalidKey", key, err)
			}
			if _, _, err := b.store.Open(ctx, key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Open(%q): %v, want ErrInvalidKey", key, err)
			}
			if _, err := b.store.Stat(ctx, key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Stat(%q): %v, want ErrInvalidKey", key, err)
			}
			if err := b.store.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Delete(%q): %v, want ErrInvalidKey", key, err)
			}
		}
		checkEmpty(t, b.blobs(t), "blobs after bad keys")
		checkEmpty(t, b.leftovers(t), "leftovers after bad keys")
		for _, key := range []string{"a", strings.Repeat("a", 512), "tickets/0a1B/x_y-z.v1.pdf", "a/./b", "trailing/"} {
			put(t, b.store, key, 1, 3)
			checkBlob(t, b.store, key, 1, 3)
		}
	})
}

var errBoom = errors.New("connection reset")

// trapReader passes r through and calls trap once the first n bytes are read; an error from
// trap is what every later Read returns.
type trapReader struct {
	r    io.Reader
	n    int64
	trap func() error
	err  error
}

func (t *trapReader) Read(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	if t.n == 0 && t.trap != nil {
		t.err, t.trap = t.trap(), nil
		if t.err != nil {
			return 0, t.err
		}
	}
	if t.trap != nil && int64(len(p)) > t.n {
		p = p[:t.n]
	}
	n, err := t.r.Read(p)
	t.n -= int64(n)
	return n, err
}

// A Put that fails half-way, because its reader or its context does, returns why and leaves
// the blob it would have replaced as it was, and nothing of its own.
func TestFailedPut(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const key = "tickets/org-1/attachment"
		put(t, b.store, key, 1, 2*chunkSize+7)

		failing := &trapReader{r: content(2, 5*chunkSize), n: 2*chunkSize + 100, trap: func() error { return errBoom }}
		if _, err := b.store.Put(context.Background(), key, failing, ""); !errors.Is(err, errBoom) {
			t.Errorf("Put with a failing reader: %v, want %v", err, errBoom)
		}
		checkBlob(t, b.store, key, 1, 2*chunkSize+7)
		checkEmpty(t, b.leftovers(t), "leftovers after a failed reader")

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cancelling := &trapReader{r: content(3, 5*chunkSize), n: 2*chunkSize + 100, trap: func() error { cancel(); return nil }}
		if _, err := b.store.Put(ctx, key, cancelling, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("Put cancelled half-way: %v, want context.Canceled", err)
		}
		checkBlob(t, b.store, key, 1, 2*chunkSize+7)
		checkEmpty(t, b.leftovers(t), "leftovers after a cancelled Put")

		// A reader's own ErrUnexpectedEOF is a truncated upload, not the end of the blob.
		truncated := &trapReader{r: content(4, 5*chunkSize), n: chunkSize / 2, trap: func() error { return io.ErrUnexpectedEOF }}
		if _, err := b.store.Put(context.Background(), "fresh", truncated, ""); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Put of a truncated body: %v, want io.ErrUnexpectedEOF", err)
		}
		if _, err := b.store.Stat(context.Background(), "fresh"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat after a failed first Put: %v, want ErrNotFound", err)
		}
		if got := b.blobs(t); len(got) != 1 || got[0] != key {
			t.Errorf("blobs %q, want only %s", got, key)
		}
		checkEmpty(t, b.leftovers(t), "leftovers after a truncated Put")
	})
}

func TestMaxSize(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := limited{Store: b.store, max: 2 * chunkSize}
		const key = "reports/org-1/big.csv"
		put(t, s, key, 1, 2*chunkSize)
		checkBlob(t, s, key, 1, 2*chunkSize)
		if _, err := s.Put(context.Background(), key, content(2, 2*chunkSize+1), ""); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Put one byte over MaxSize: %v, want ErrTooLarge", err)
		}
		if _, err := s.Put(context.Background(), "other", content(2, 5*chunkSize), ""); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Put over MaxSize: %v, want ErrTooLarge", err)
		}
		checkBlob(t, s, key, 1, 2*chunkSize)
		if got := b.blobs(t); len(got) != 1 || got[0] != key {
			t.Errorf("blobs %q, want only %s", got, key)
		}
		checkEmpty(t, b.leftovers(t), "leftovers")
	})
}

// Two Puts on one key at once leave exactly one of the two blobs, never chunks of both.
func TestConcurrentPuts(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const key = "tickets/org-1/race"
		sizes := [2]int64{3*chunkSize + 11, 4*chunkSize + 3}
		sums := [2]string{contentSum(t, 1, sizes[0]), contentSum(t, 2, sizes[1])}
		for round := 0; round < 4; round++ {
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() {
					if _, err := b.store.Put(context.Background(), key, content(uint64(i+1), sizes[i]), ""); err != nil {
						t.Errorf("round %d, Put %d: %v", round, i, err)
					}
				})
			}
			wg.Wait()
			info, got, n := openSum(t, b.store, key)
			if !(got == sums[0] && n == sizes[0] || got == sums[1] && n == sizes[1]) {
				t.Fatalf("round %d: read %d bytes with SHA-256 %s, want one of the two blobs", round, n, got)
			}
			if info.SHA256 != got || info.Size != n {
				t.Errorf("round %d: info %+v does not describe the content", round, info)
			}
		}
		checkEmpty(t, b.leftovers(t), "leftovers")
	})
}

// A reader whose blob is replaced under it fails rather than going on with the new content.
func TestDatabaseReadWhileReplaced(t *testing.T) {
	s := NewDatabase(storetest.Open(t))
	const key = "tickets/org-1/attachment"
	put(t, s, key, 1, 3*chunkSize)
	rc, _, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, chunkSize+1); err != nil {
		t.Fatal(err)
	}
	put(t, s, key, 2, 3*chunkSize)
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, ErrNotFound) {
		t.Errorf("reading on after a replace: %v, want ErrNotFound", err)
	}
}

// Abandoned staged chunks (a node died mid-upload) go with the next Put once a day old; those
// of an upload in progress stay.
func TestDatabaseSweepsAbandonedChunks(t *testing.T) {
	db := storetest.Open(t)
	old, recent := stagingKey(time.Now().Add(-25*time.Hour)), stagingKey(time.Now().Add(-time.Hour))
	for _, key := range []string{old, recent} {
		storetest.Exec(t, db.SQL, `INSERT INTO blob_chunks (key, seq, data) VALUES ($1, 0, $2)`, key, []byte("x"))
	}
	put(t, NewDatabase(db), "a", 1, 10)
	if got := queryStrings(t, db, `SELECT key FROM blob_chunks WHERE key <> 'a'`); len(got) != 1 || got[0] != recent {
		t.Errorf("staged chunks after a Put: %q, want only the recent %s", got, recent)
	}
}

// A Put and an Open of 64 MiB keep the heap well below the size of the blob.
func TestDatabaseMemory(t *testing.T) {
	s := NewDatabase(storetest.Open(t))
	const key, size = "reports/org-1/large.csv", 64 << 20
	// Connections, statement caches and driver buffers are made at first use and then kept:
	// a small blob first, so that they are in the baseline.
	put(t, s, "warm-up", 1, 3*chunkSize)
	checkBlob(t, s, "warm-up", 1, 3*chunkSize)
	// A low GC target keeps garbage from counting: the heap in use then stays close to what is
	// live.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	const limit = 16 << 20

	grew := heapGrowth(func() { put(t, s, key, 2, size) })
	t.Logf("Put of %d MiB: heap grew by %.1f MiB", size>>20, float64(grew)/(1<<20))
	if grew > limit {
		t.Errorf("Put of %d MiB grew the heap by %.1f MiB, want under %d MiB", size>>20, float64(grew)/(1<<20), limit>>20)
	}
	want := contentSum(t, 2, size)
	var got string
	grew = heapGrowth(func() { _, got, _ = openSum(t, s, key) })
	t.Logf("Open of %d MiB: heap grew by %.1f MiB", size>>20, float64(grew)/(1<<20))
	if grew > limit {
		t.Errorf("Open of %d MiB grew the heap by %.1f MiB, want under %d MiB", size>>20, float64(grew)/(1<<20), limit>>20)
	}
	if got != want {
		t.Errorf("read SHA-256 %s, want %s", got, want)
	}
}

// heapGrowth runs fn and returns the most the heap in use grew over its size before, sampled
// every millisecond.
func heapGrowth(fn func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				sample()
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	fn()
	close(done)
	<-sampled
	return peak - base
}

// The upload is signed with the SHA-256 computed while spooling, which the store checks.
func TestS3SignsTheContentHash(t *testing.T) {
	mem := s3mem.New()
	if err := mem.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(mem).Server()
	var mu sync.Mutex
	var signed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			mu.Lock()
			signed = append(signed, r.Header.Get("X-Amz-Content-Sha256"))
			mu.Unlock()
		}
		fake.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s, err := NewS3(context.Background(), S3Config{Endpoint: srv.URL, Bucket: testBucket, AccessKeyID: "k", SecretAccessKey: "s", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	info := put(t, s, "a", 1, chunkSize+1)
	if len(signed) != 1 || signed[0] != info.SHA256 {
		t.Errorf("signed payload hashes %q, want [%s]", signed, info.SHA256)
	}
}

func TestOpenConfig(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	for _, c := range []struct {
		cfg  Config
		want string // in the error; empty for none
	}{
		{Config{}, ""},
		{Config{Backend: "database", MaxSize: 10}, ""},
		{Config{Backend: "s3", S3: S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:9000", PathStyle: true}}, ""},
		{Config{Backend: "files"}, `unknown Backend "files"`},
		{Config{MaxSize: -1}, "MaxSize"},
		{Config{Backend: "s3"}, "Bucket is not set"},
		{Config{Backend: "s3", S3: S3Config{Bucket: "b", AccessKeyID: "k"}}, "SecretAccessKey is not set"},
		{Config{Backend: "s3", S3: S3Config{Bucket: "b", SecretAccessKey: "s"}}, "AccessKeyID is not set"},
		{Config{Backend: "s3", S3: S3Config{Bucket: "b", Endpoint: "minio:9000"}}, "Endpoint"},
	} {
		s, err := Open(ctx, db, c.cfg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Open(%+v): %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Open(%+v): %v, want an error about %s", c.cfg, err, c.want)
		case c.want == "" && c.cfg.MaxSize > 0:
			if _, err := s.Put(ctx, "k", bytes.NewReader(make([]byte, 11)), ""); !errors.Is(err, ErrTooLarge) {
				t.Errorf("Put over Config.MaxSize: %v, want ErrTooLarge", err)
			}
		}
	}
}
