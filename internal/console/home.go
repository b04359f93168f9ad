package console

import (
	"fmt"
	"net/http"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/security"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// homePage is the dashboard's data; each part is there only when the user may read it.
type homePage struct {
	CanDevices bool
	Counts     map[string]int
	Devices    int
	// Offline are the devices that went quiet most recently.
	Offline   []*devices.Device
	CanAlerts bool
	Summary   alerts.Summary
	// Urgent are the newest open (active or acknowledged) critical and high alerts.
	Urgent []alerts.Alert
	// FirstRun is set when there is nothing to show yet: the page says how to begin.
	FirstRun    bool
	CanPatches  bool
	Patches     patches.PatchCompliance
	CanSecurity bool
	Security    security.SecurityDashboard
}

// homeListSize bounds the dashboard's lists.
const homeListSize = 8

func (c *Console) home(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	may := homePage{CanDevices: c.HTTP.Permits(ctx, "list-devices"), CanAlerts: c.HTTP.Permits(ctx, "list-alerts"),
		CanPatches: c.HTTP.Permits(ctx, "get-patch-compliance"), CanSecurity: c.HTTP.Permits(ctx, "get-security-dashboard")}
	org := c.currentOrg(r)
	key := fmt.Sprintf("home|%s|%s|%t|%t|%t|%t", org, c.currentSite(r), may.CanDevices, may.CanAlerts, may.CanPatches, may.CanSecurity)
	pg, err := cached(c.counts, access.PrincipalFrom(ctx).Scope, key, func() (homePage, error) { return c.homeData(r, org, may) })
	if err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "home", targeted(r, "home-live"), view{Title: "Home", Section: "home", Data: pg})
}

// homeData reads the dashboard's parts the user may see (pg says which).
func (c *Console) homeData(r *http.Request, org string, pg homePage) (homePage, error) {
	ctx := r.Context()
	if pg.CanDevices {
		f := c.deviceFilter(r)
		var err error
		if pg.Counts, err = c.Devices.StatusCounts(ctx, f); err != nil {
			return pg, err
		}
		for _, n := range pg.Counts {
			pg.Devices += n
		}
		f.Status, f.Sort, f.Desc = "offline", "lastSeen", true
		if pg.Offline, _, _, err = c.Devices.List(ctx, f, store.Page{Limit: homeListSize}); err != nil {
			return pg, err
		}
		pg.FirstRun = pg.Devices == 0
	}
	if pg.CanAlerts {
		var err error
		if pg.Summary, err = c.Alerts.Summarize(ctx, org); err != nil {
			return pg, err
		}
		pg.Urgent, _, _, err = c.Alerts.List(ctx, alerts.ListFilter{OrgID: org, Statuses: openAlertStatuses,
			Severities: []string{"critical", "high"}}, store.Page{Limit: homeListSize})
		if err != nil {
			return pg, err
		}
	}
	if pg.CanPatches {
		var err error
		if pg.Patches, err = c.Patches.Compliance(ctx, org, c.currentSite(r)); err != nil {
			return pg, err
		}
	}
	if pg.CanSecurity {
		var err error
		if pg.Security, err = c.Security.Dashboard(ctx, org); err != nil {
			return pg, err
		}
	}
	return pg, nil
}
