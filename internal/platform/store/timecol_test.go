package store_test

import (
	"testing"
	"time"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

func TestTimeColumnRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	for _, at := range []time.Time{
		store.Now(),
		time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC),
		time.Date(1999, 12, 31, 0, 0, 0, 120_000_000, time.UTC),
		time.Date(2026, 7, 1, 8, 30, 0, 1000, time.FixedZone("UTC+2", 2*3600)),
	} {
		id := store.NewID()
		storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, 'p', $2, $3, $3)`, id, id, at)
		var created, deleted store.NullTime
		if err := db.SQL.QueryRow(`SELECT `+store.TimeColumns("created_at", "deleted_at")+` FROM partners WHERE id = $1`, id).Scan(&created, &deleted); err != nil {
			t.Fatal(err)
		}
		if !created.Valid || !created.Time.Equal(at) || created.Time.Location() != time.UTC {
			t.Errorf("created_at = %v (valid %v), want %v in UTC", created.Time, created.Valid, at)
		}
		if deleted.Valid || deleted.Ptr() != nil {
			t.Errorf("deleted_at = %v, want NULL", deleted)
		}
	}
}

func TestParseSQLiteTime(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for in, want := range map[string]time.Time{
		"2026-11-23 15:49:42.123456+00:00":     utc("2026-11-23T15:49:42.123456Z"),
		"2026-11-23 15:49:42+00:00":            utc("2026-11-23T15:49:42Z"),
		"2026-11-23 17:49:42.5+02:00":          utc("2026-11-23T15:49:42.5Z"),
		"2026-11-23 10:19:42-05:30":            utc("2026-11-23T15:49:42Z"),
		"2026-11-23T15:49:42.123456789Z":       utc("2026-11-23T15:49:42.123456789Z"),
		"2026-11-23 15:49:42.1234567891+00:00": utc("2026-11-23T15:49:42.123456789Z"),
		"2026-11-23 15:49:42":                  utc("2026-11-23T15:49:42Z"),
		"2026-11-23 15:49":                     utc("2026-11-23T15:49:00Z"),
		"2026-11-23":                           utc("2026-11-23T00:00:00Z"),
	} {
		got, err := store.ParseSQLiteTime(in)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("ParseSQLiteTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "now", "2026-02-30 10:00:00", "2026-13-01 10:00:00", "2026-11-23 25:00:00",
		"2026-11-23 15:49:42.+00:00", "2026-11-23 15:49:42+0000x", "2026-11-23 15:49:42 UTC"} {
		if got, err := store.ParseSQLiteTime(bad); err == nil {
			t.Errorf("ParseSQLiteTime(%q) = %v, want an error", bad, got)
		}
	}
}

// FuzzParseSQLiteTime checks the positional parser against time.Parse on the layout the
// driver writes.
func FuzzParseSQLiteTime(f *testing.F) {
	f.Add("2026-11-23 15:49:42.123456+00:00")
	f.Add("2026-11-23 15:49:42-07:00")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := store.ParseSQLiteTime(s)
		want, werr := time.Parse("2006-01-02 15:04:05.999999999-07:00", s)
		if werr == nil && (err != nil || !got.Equal(want)) {
			t.Fatalf("ParseSQLiteTime(%q) = %v, %v; time.Parse gives %v", s, got, err, want)
		}
	})
}
