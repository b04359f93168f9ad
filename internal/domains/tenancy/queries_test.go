package tenancy_test

import (
	"slices"
	"testing"

	"gale/internal/domains/tenancy"
)

// LiveOrg and LivePartner drop the rows of deleted organizations and partners, and keep rows
// that have none (partner-wide rows, system users).
func TestLiveConditions(t *testing.T) {
	w := newPlaceWorld(t)
	live := func(query string) []string {
		t.Helper()
		rows, err := w.db.SQL.Query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	want := []string{w.a1, w.a2, w.b1}
	slices.Sort(want)
	if got := live(`SELECT id FROM organizations o WHERE ` + tenancy.LiveOrg("o.id") + ` AND ` + tenancy.LivePartner("o.partner_id")); !slices.Equal(got, want) {
		t.Errorf("live organizations of live partners = %v, want %v", got, want)
	}
	if got := live(`SELECT 'kept' WHERE ` + tenancy.LiveOrg("NULL") + ` AND ` + tenancy.LivePartner("NULL")); len(got) != 1 {
		t.Errorf("a row without partner or organization = %v, want kept", got)
	}
}
