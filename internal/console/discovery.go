package console

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/devices"
	"gale/internal/domains/discovery"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Bounds of the discovery pages' lists.
const (
	discoveryProfilesShown = 100
	discoveryJobsShown     = 10
	discoveryAssetPageSize = 50
	// discoveryLinkChoices bounds the devices an asset's page offers to link it to.
	discoveryLinkChoices = 500
)

// discoveryProfileRow is a profile with its scan under way, if one is.
type discoveryProfileRow struct {
	discovery.DiscoveryProfile
	Active *discovery.DiscoveryJob
}

// ScheduleText says when the profile scans by itself.
func (p discoveryProfileRow) ScheduleText() string { return discoverySchedule(p.Schedule) }

func discoverySchedule(s discovery.DiscoverySchedule) string {
	switch s.Type {
	case discovery.ScheduleCron:
		return "on the schedule " + s.Cron
	case discovery.ScheduleInterval:
		return "every " + countOf(s.IntervalMinutes, "minute")
	}
	return "when asked"
}

// discoveryOverviewPage is the discovery page: the profiles, what runs now and the latest scans.
type discoveryOverviewPage struct {
	Profiles []discoveryProfileRow
	Jobs     []discovery.DiscoveryJob
	// Names are the profiles' names by ID, for the jobs.
	Names   map[string]string
	CanScan bool
	// CanCreate offers the form of a new profile.
	CanCreate bool
}

// activeJobs returns the scans scheduled or running in the filter, by profile.
func (c *Console) activeJobs(r *http.Request, f discovery.JobFilter) (map[string]discovery.DiscoveryJob, error) {
	out := map[string]discovery.DiscoveryJob{}
	for _, st := range []string{discovery.JobScheduled, discovery.JobRunning} {
		f.Status = st
		list, _, _, err := c.Discovery.ListJobs(r.Context(), f, store.Page{Limit: discoveryProfilesShown})
		if err != nil {
			return nil, err
		}
		for _, j := range list {
			out[j.ProfileID] = j
		}
	}
	return out, nil
}

func (c *Console) discoveryOverview(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-discovery-profiles"); err != nil {
		return err
	}
	org, site := c.currentOrg(r), c.currentSite(r)
	profiles, _, _, err := c.Discovery.ListProfiles(ctx, discovery.ProfileFilter{OrgID: org, SiteID: site},
		store.Page{Limit: discoveryProfilesShown})
	if err != nil {
		return err
	}
	pg := discoveryOverviewPage{CanScan: c.HTTP.Permits(ctx, "start-discovery-scan"), Names: map[string]string{},
		CanCreate: c.HTTP.Permits(ctx, "create-discovery-profile")}
	active := map[string]discovery.DiscoveryJob{}
	if c.HTTP.Permits(ctx, "list-discovery-jobs") {
		f := discovery.JobFilter{OrgID: org, SiteID: site}
		if active, err = c.activeJobs(r, f); err != nil {
			return err
		}
		if pg.Jobs, _, _, err = c.Discovery.ListJobs(ctx, f, store.Page{Limit: discoveryJobsShown}); err != nil {
			return err
		}
	}
	for _, p := range profiles {
		row := discoveryProfileRow{DiscoveryProfile: p}
		if j, ok := active[p.ID]; ok {
			row.Active = &j
		}
		pg.Profiles = append(pg.Profiles, row)
		pg.Names[p.ID] = p.Name
	}
	return c.render(w, r, http.StatusOK, "discovery", "", view{Title: "Network discovery", Section: "discovery", Data: pg})
}

// discoveryProfilePage is a profile's page: what it scans, and its scans.
type discoveryProfilePage struct {
	discoveryProfileRow
	Jobs    []discovery.DiscoveryJob
	CanScan bool
	// CanEdit and CanDelete offer the profile's editor and its deletion.
	CanEdit, CanDelete bool
}

func (c *Console) discoveryProfile(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-discovery-profile"); err != nil {
		return err
	}
	p, err := c.Discovery.GetProfile(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := discoveryProfilePage{discoveryProfileRow: discoveryProfileRow{DiscoveryProfile: p}, CanScan: c.HTTP.Permits(ctx, "start-discovery-scan"),
		CanEdit: c.HTTP.Permits(ctx, "update-discovery-profile"), CanDelete: c.HTTP.Permits(ctx, "delete-discovery-profile")}
	if c.HTTP.Permits(ctx, "list-discovery-jobs") {
		if pg.Jobs, _, _, err = c.Discovery.ListJobs(ctx, discovery.JobFilter{ProfileID: p.ID}, store.Page{Limit: 25}); err != nil {
			return err
		}
		for i, j := range pg.Jobs {
			if j.Status == discovery.JobScheduled || j.Status == discovery.JobRunning {
				pg.Active = &pg.Jobs[i]
				break
			}
		}
	}
	return c.render(w, r, http.StatusOK, "discovery-profile", "", view{Title: p.Name, Section: "discovery", Data: pg})
}

// discoveryScan scans a profile's networks now, as the API's scan does, and shows the job.
func (c *Console) discoveryScan(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "start-discovery-scan"); err != nil {
		return err
	}
	j, err := c.Discovery.Scan(r.Context(), discovery.DiscoveryScanRequest{ProfileID: r.PathValue("id")})
	if err != nil {
		return err
	}
	seeOther(w, r, "/discovery/jobs/"+j.ID)
	return nil
}

// discoveryJobPage is one scan, refreshed while it runs.
type discoveryJobPage struct {
	discovery.DiscoveryJob
	Profile   string
	CanCancel bool
}

// Running tells a scan not ended yet.
func (p discoveryJobPage) Running() bool {
	return p.Status == discovery.JobScheduled || p.Status == discovery.JobRunning
}

// Percent is how far the scan got, 0 to 100.
func (p discoveryJobPage) Percent() int {
	if p.HostsTotal <= 0 {
		return 0
	}
	return min(100, p.HostsScanned*100/p.HostsTotal)
}

func (c *Console) discoveryJob(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-discovery-job"); err != nil {
		return err
	}
	j, err := c.Discovery.GetJob(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := discoveryJobPage{DiscoveryJob: j, Profile: "Scan", CanCancel: c.HTTP.Permits(ctx, "cancel-discovery-job")}
	if p, err := c.Discovery.GetProfile(ctx, j.ProfileID); err == nil {
		pg.Profile = p.Name
	}
	return c.render(w, r, http.StatusOK, "discovery-job", targeted(r, "job-progress"),
		view{Title: "Scan of " + pg.Profile, Section: "discovery", Data: pg})
}

func (c *Console) discoveryCancel(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "cancel-discovery-job"); err != nil {
		return err
	}
	j, err := c.Discovery.CancelJob(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	seeOther(w, r, "/discovery/jobs/"+j.ID)
	return nil
}

// discoveryAssetTypes are the kinds an asset is typed as.
var discoveryAssetTypes = []string{"workstation", "server", "router", "switch", "firewall", "printer", "access_point", "nas", "phone",
	"camera", "iot", "unknown"}

// discoveryAssetsPage lists the assets in scope.
type discoveryAssetsPage struct {
	Assets               []discovery.DiscoveryAsset
	Status, Type, Search string
	Next                 string
	Types                []string
}

// Filtered tells a list narrowed by a filter.
func (p discoveryAssetsPage) Filtered() bool { return p.Status != "" || p.Type != "" || p.Search != "" }

func (c *Console) discoveryAssets(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-discovery-assets"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := discoveryAssetsPage{Status: in.Get("status"), Type: in.Get("type"), Search: strings.TrimSpace(in.Get("q")), Types: discoveryAssetTypes}
	if pg.Status != "" && pg.Status != discovery.AssetNew && pg.Status != discovery.AssetLinked && pg.Status != discovery.AssetIgnored {
		return apperr.Invalid("status", "new, linked or ignored")
	}
	if pg.Type != "" && !slices.Contains(discoveryAssetTypes, pg.Type) {
		return apperr.Invalid("type", "one of "+strings.Join(discoveryAssetTypes, ", "))
	}
	if utf8.RuneCountInString(pg.Search) > 100 {
		return apperr.Invalid("q", "search for at most 100 characters")
	}
	list, next, _, err := c.Discovery.ListAssets(ctx, discovery.AssetFilter{OrgID: c.currentOrg(r), SiteID: c.currentSite(r), Type: pg.Type,
		Status: pg.Status, Search: pg.Search}, store.Page{Limit: discoveryAssetPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Assets, pg.Next = list, nextPage(r, next)
	return c.render(w, r, http.StatusOK, "discovery-assets", "", view{Title: "Discovered assets", Section: "discovery", Data: pg})
}

// discoveryAssetPage is an asset's page, with what the user may do with it.
type discoveryAssetPage struct {
	discovery.DiscoveryAsset
	// Devices are the devices of the asset's organization it may be linked to; Device names
	// the one it is linked to.
	Devices []devices.Device
	Device  string
	CanAct  bool
	CanDrop bool
	Error   *apperr.Error
}

// discoveryAsset shows an asset. There is no API operation that reads one asset: the page
// follows the rules of the list it is found in.
func (c *Console) discoveryAsset(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-discovery-assets"); err != nil {
		return err
	}
	x, err := c.Discovery.GetAsset(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.assetPage(w, r, http.StatusOK, discoveryAssetPage{DiscoveryAsset: x})
}

func (c *Console) assetPage(w http.ResponseWriter, r *http.Request, status int, pg discoveryAssetPage) error {
	ctx := r.Context()
	pg.CanAct = c.HTTP.Permits(ctx, "link-discovery-asset")
	pg.CanDrop = c.HTTP.Permits(ctx, "delete-discovery-asset")
	if c.HTTP.Permits(ctx, "list-devices") {
		list, _, _, err := c.Devices.List(ctx, devices.ListFilter{OrgIDs: []string{pg.OrgID}}, store.Page{Limit: discoveryLinkChoices})
		if err != nil {
			return err
		}
		for _, d := range list {
			pg.Devices = append(pg.Devices, *d)
			if pg.LinkedID != nil && d.ID == *pg.LinkedID {
				pg.Device = d.Name()
			}
		}
	}
	title := pg.IP
	if pg.Hostname != "" {
		title = pg.Hostname + " (" + pg.IP + ")"
	}
	return c.render(w, r, status, "discovery-asset", "", view{Title: title, Section: "discovery", Data: pg})
}

// assetRefused shows the asset's page again with the API's refusal of an action on it; an
// error that is not a refusal of the input goes to the error page.
func (c *Console) assetRefused(w http.ResponseWriter, r *http.Request, err error) error {
	ae, ok := apperr.As(err)
	if !ok || (ae.Kind != apperr.KindInvalid && ae.Kind != apperr.KindConflict) {
		return err
	}
	x, gerr := c.Discovery.GetAsset(r.Context(), r.PathValue("id"))
	if gerr != nil {
		return gerr
	}
	status := http.StatusBadRequest
	if ae.Kind == apperr.KindConflict {
		status = http.StatusConflict
	}
	return c.assetPage(w, r, status, discoveryAssetPage{DiscoveryAsset: x, Error: ae})
}

func (c *Console) discoveryLink(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "link-discovery-asset"); err != nil {
		return err
	}
	x, err := c.Discovery.LinkAsset(r.Context(), r.PathValue("id"), discovery.DiscoveryLinkRequest{DeviceID: r.PostFormValue("deviceId")})
	if err != nil {
		return c.assetRefused(w, r, err)
	}
	seeOther(w, r, "/discovery/assets/"+x.ID)
	return nil
}

func (c *Console) discoveryIgnore(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "ignore-discovery-asset"); err != nil {
		return err
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if utf8.RuneCountInString(reason) > 1000 {
		return c.assetRefused(w, r, apperr.Invalid("reason", "at most 1000 characters"))
	}
	x, err := c.Discovery.IgnoreAsset(r.Context(), r.PathValue("id"), discovery.DiscoveryIgnoreRequest{Reason: reason})
	if err != nil {
		return c.assetRefused(w, r, err)
	}
	seeOther(w, r, "/discovery/assets/"+x.ID)
	return nil
}

func (c *Console) discoveryDelete(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "delete-discovery-asset"); err != nil {
		return err
	}
	if err := c.Discovery.DeleteAsset(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	seeOther(w, r, "/discovery/assets")
	return nil
}
