package devices_test

import (
	"testing"
	"time"

	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// A package keeps its software row ID from one inventory to the next, through a new version;
// a package that goes away loses its row; two entries of one name get distinct IDs.
func TestSoftwareRowsKeepTheirIDs(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 2)
	dev := enroll(e, key, secret, "web-01")
	other := enroll(e, key, secret, "web-02")
	report := func(d agentproto.EnrollResponse, sw ...agentproto.Software) map[string]string {
		t.Helper()
		inv := agentproto.Inventory{CollectedAt: time.Now().UTC(), Hostname: "h", Software: sw, Users: []agentproto.LoggedInUser{}}
		e.Must(204, apptest.Caller{Token: d.AuthToken}, "POST", api+"/agents/"+d.DeviceID+"/inventory", inv)
		rows, err := e.App.DB.SQL.Query(`SELECT id, name, version FROM device_software WHERE device_id = $1`, d.DeviceID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		ids := map[string]string{}
		for rows.Next() {
			var id, name, version string
			if err := rows.Scan(&id, &name, &version); err != nil {
				t.Fatal(err)
			}
			ids[name+" "+version] = id
		}
		return ids
	}
	curl := agentproto.Software{Name: "curl", Version: "7", Source: "dpkg", Architecture: "amd64"}
	bash := agentproto.Software{Name: "bash", Version: "5", Source: "dpkg", Architecture: "amd64"}
	first := report(dev, curl, bash, agentproto.Software{Name: "zsh", Version: "5", Source: "dpkg"})
	if len(first) != 3 {
		t.Fatalf("first inventory rows %v", first)
	}
	newCurl := curl
	newCurl.Version = "8"
	second := report(dev, bash, newCurl, agentproto.Software{Name: "git", Version: "2", Source: "dpkg"})
	if len(second) != 3 || second["bash 5"] != first["bash 5"] || second["curl 8"] != first["curl 7"] {
		t.Fatalf("IDs changed across inventories: first %v, second %v", first, second)
	}
	if second["git 2"] == "" || second["git 2"] == first["zsh 5"] {
		t.Fatalf("a new package's row %v", second)
	}
	// The same package on another device is another row.
	if o := report(other, bash); o["bash 5"] == "" || o["bash 5"] == second["bash 5"] {
		t.Fatalf("bash on two devices shares a row: %v %v", o, second)
	}
	// Two versions of one package side by side: two rows, each keeping its ID.
	old := agentproto.Software{Name: "linux-image", Version: "6.1", Source: "dpkg", Architecture: "amd64"}
	cur := agentproto.Software{Name: "linux-image", Version: "6.2", Source: "dpkg", Architecture: "amd64"}
	third := report(dev, bash, old, cur)
	if len(third) != 3 || third["linux-image 6.1"] == third["linux-image 6.2"] || third["bash 5"] != first["bash 5"] {
		t.Fatalf("side-by-side versions %v", third)
	}
	if again := report(dev, bash, old, cur); again["linux-image 6.1"] != third["linux-image 6.1"] || again["linux-image 6.2"] != third["linux-image 6.2"] {
		t.Fatalf("side-by-side versions changed IDs: %v then %v", third, again)
	}
}
