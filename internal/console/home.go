package console

import (
	"fmt"
	"net/http"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
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
	FirstRun bool
}

// homeListSize bounds the dashboard's lists.
const homeListSize = 8

func (c *Console) home(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	canDevices, canAlerts := c.HTTP.Permits(ctx, "list-devices"), c.HTTP.Permits(ctx, "list-alerts")
	org := c.currentOrg(r)
	pg, err := cached(c.counts, access.PrincipalFrom(ctx).Scope, fmt.Sprintf("home|%s|%s|%t|%t", org, c.currentSite(r), canDevices, canAlerts),
		func() (homePage, error) { return c.homeData(r, org, canDevices, canAlerts) })
	if err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "home", targeted(r, "home-live"), view{Title: "Home", Section: "home", Data: pg})
}

// homeData reads the dashboard's parts the user may see.
func (c *Console) homeData(r *http.Request, org string, canDevices, canAlerts bool) (homePage, error) {
	ctx := r.Context()
	pg := homePage{CanDevices: canDevices, CanAlerts: canAlerts}
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
	return pg, nil
}
