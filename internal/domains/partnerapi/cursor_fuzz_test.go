package partnerapi

import (
	"testing"

	"gale/internal/platform/apperr"
)

// FuzzExportCursor feeds arbitrary cursors and updatedSince values to the export query
// parser: it never panics, and refuses what it does not accept with a 400, never more.
// A cursor it signed itself comes back as the same position.
func FuzzExportCursor(f *testing.F) {
	s := &Service{cursorKey: []byte("fuzz-key-fuzz-key-fuzz-key-0123")}
	signed := s.signCursor("p1", cursor{Export: "devices", Since: "2026-01-01T00:00:00Z", Time: "2026-01-02T00:00:00.5Z",
		IDs: []string{"0190f5d2-0000-7000-8000-000000000000"}})
	for _, seed := range []struct{ cursor, since string }{
		{signed, ""}, {signed, "2026-01-01T00:00:00Z"}, {"", "yesterday"}, {"a.b", ""}, {"e30.AAAA", ""}, {"..", "2026-13-01T00:00:00Z"},
	} {
		f.Add(seed.cursor, seed.since, 50)
	}
	f.Fuzz(func(t *testing.T, token, since string, limit int) {
		sk, err := s.seek("p1", "devices", false, &ExportQuery{Limit: limit, Cursor: token, UpdatedSince: since})
		if err != nil {
			if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindInvalid {
				t.Fatalf("seek(%q, %q) = %v, want a 400", token, since, err)
			}
			return
		}
		if sk.Limit < 1 || sk.Limit > maxExportLimit {
			t.Fatalf("limit %d gave a page of %d", limit, sk.Limit)
		}
		if token == signed && (len(sk.After) != 2 || sk.Since.IsZero()) {
			t.Fatalf("the signed cursor decoded to %+v", sk)
		}
	})
}
