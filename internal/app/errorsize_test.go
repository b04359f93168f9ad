package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"gale/internal/testkit/apptest"
)

// An invalid body of a great many items gets a small answer: at most 20 details, the last of
// which says how many more there were.
func TestErrorAnswerToHugeArrayIsSmall(t *testing.T) {
	env := apptest.New(t)
	admin := env.Admin()
	body := `{"name":"big","permissions":[` + strings.TrimSuffix(strings.Repeat("1,", 200_000), ",") + `]}`
	r := env.Do(admin, "POST", "/api/v1/roles", body)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("status %d %s, want 400", r.Status, r.Body[:min(len(r.Body), 300)])
	}
	if len(r.Body) > 8<<10 {
		t.Fatalf("answer is %d bytes for a %d-byte request, want at most 8 KiB", len(r.Body), len(body))
	}
	var env2 struct {
		Error struct {
			Details []struct{ Field, Message string } `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &env2); err != nil {
		t.Fatal(err)
	}
	d := env2.Error.Details
	if len(d) != 20 || !strings.HasPrefix(d[19].Message, "and ") || !strings.HasSuffix(d[19].Message, " more") {
		t.Fatalf("details %+v, want 19 entries and a last 'and N more'", d)
	}
}
