package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gale/internal/domains/discovery"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// discoveryMethods are the ways a scan probes, as the form offers them.
var discoveryMethods = []opsChoice{{agentproto.ScanPing, "Ping"}, {agentproto.ScanARP, "ARP"}, {agentproto.ScanPortScan, "Port scan"},
	{agentproto.ScanSNMP, "SNMP"}, {agentproto.ScanDNS, "Reverse DNS"}}

// snmpKeep is the SNMP version choice that keeps the credentials a profile holds.
const snmpKeep = "keep"

// discoveryForm is a profile's editor, new or existing, as typed. SNMP secrets are never
// shown again.
type discoveryForm struct {
	// ID is the profile edited, "" for a new one; Saved its name as it stands.
	ID, Saved string
	OrgID     string
	ChooseOrg bool
	OrgLocked bool
	// SiteID is the profile's site; SiteName names it once the profile exists (its site stays).
	SiteID, SiteName string
	Name             string
	// Subnets, ExcludeIPs and Ports are as their text areas show them.
	Subnets, ExcludeIPs, Ports string
	Methods                    []string
	DeepScan                   bool
	// SNMP: the version ("" none, keep the stored credentials, v1, v2c, v3) and what is not
	// secret of the credentials; Stored summarizes the credentials the profile holds.
	SNMPVersion, SNMPUsername, SNMPAuthProtocol, SNMPPrivProtocol string
	Stored                                                        *discovery.DiscoverySNMPSummary
	ScheduleType, Cron, IntervalMinutes                           string
	Sites                                                         []targetChoice
	MethodChoices                                                 []opsChoice
	Error                                                         *apperr.Error
}

// New tells the form of a new profile.
func (f discoveryForm) New() bool { return f.ID == "" }

// Action is where the form posts.
func (f discoveryForm) Action() string {
	if f.New() {
		return "/discovery/profiles"
	}
	return "/discovery/profiles/" + f.ID
}

// HasMethod tells a method ticked.
func (f discoveryForm) HasMethod(m string) bool { return slices.Contains(f.Methods, m) }

func (c *Console) discoveryProfileNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-discovery-profile"); err != nil {
		return err
	}
	f := discoveryForm{Methods: discovery.DefaultMethods, ScheduleType: discovery.ScheduleManual, Ports: portsText(discovery.DefaultPorts)}
	return c.discoveryEditor(w, r, http.StatusOK, f)
}

func (c *Console) discoveryProfileEdit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-discovery-profile"); err != nil {
		return err
	}
	p, err := c.Discovery.GetProfile(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	f := discoveryForm{ID: p.ID, Saved: p.Name, OrgID: p.OrgID, SiteID: p.SiteID, Name: p.Name, Subnets: strings.Join(p.Subnets, "\n"),
		ExcludeIPs: strings.Join(p.ExcludeIPs, "\n"), Ports: portsText(p.Ports), Methods: p.Methods, DeepScan: p.DeepScan,
		ScheduleType: p.Schedule.Type, Cron: p.Schedule.Cron}
	if p.Schedule.IntervalMinutes > 0 {
		f.IntervalMinutes = strconv.Itoa(p.Schedule.IntervalMinutes)
	}
	if p.SNMP != nil {
		f.SNMPVersion = snmpKeep
	}
	return c.discoveryEditor(w, r, http.StatusOK, f)
}

func portsText(ports []int) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(p)
	}
	return strings.Join(out, ", ")
}

// discoveryEditor shows the form: a new profile's organization's sites to choose from, an
// existing one's site named.
func (c *Console) discoveryEditor(w http.ResponseWriter, r *http.Request, status int, f discoveryForm) error {
	ctx := r.Context()
	f.MethodChoices = discoveryMethods
	if !f.New() {
		p, err := c.Discovery.GetProfile(ctx, f.ID)
		if err != nil {
			return err
		}
		f.Stored = p.SNMP
		if c.HTTP.Permits(ctx, "get-site") {
			if st, err := c.Tenancy.GetSite(ctx, p.SiteID); err == nil {
				f.SiteName = st.Name
			}
		}
	} else {
		f.OrgID, f.OrgLocked = c.opsFormOrg(r)
		f.ChooseOrg = f.OrgID == ""
		if f.OrgID != "" && c.HTTP.Permits(ctx, "list-sites") {
			sites, _, _, err := c.Tenancy.ListSites(ctx, tenancy.SiteListFilter{OrgID: f.OrgID}, store.Page{Limit: maintenanceTargetChoices})
			if err != nil {
				return err
			}
			for _, s := range sites {
				f.Sites = append(f.Sites, targetChoice{ID: s.ID, Name: s.Name})
			}
		}
	}
	title := "New discovery profile"
	if !f.New() {
		title = "Edit " + f.Saved
	}
	return c.render(w, r, status, "discovery-profile-edit", "", view{Title: title, Section: "discovery", Data: f})
}

// readDiscoveryForm reads what the form sent.
func readDiscoveryForm(form url.Values) discoveryForm {
	return discoveryForm{SiteID: form.Get("siteId"), Name: strings.TrimSpace(form.Get("name")), Subnets: form.Get("subnets"),
		ExcludeIPs: form.Get("excludeIps"), Ports: form.Get("ports"), Methods: form["methods"], DeepScan: form.Get("deepScan") != "",
		SNMPVersion: form.Get("snmp.version"), SNMPUsername: strings.TrimSpace(form.Get("snmp.username")),
		SNMPAuthProtocol: form.Get("snmp.authProtocol"), SNMPPrivProtocol: form.Get("snmp.privProtocol"),
		ScheduleType: form.Get("schedule.type"), Cron: strings.TrimSpace(form.Get("schedule.cron")),
		IntervalMinutes: strings.TrimSpace(form.Get("schedule.intervalMinutes"))}
}

// discoveryDefinition is what the form's fields say, as the API's body takes it: the name
// checked as the API's schema checks it, the lists split, the ports and schedule read.
type discoveryDefinition struct {
	subnets, excludes, methods []string
	ports                      []int
	schedule                   discovery.DiscoverySchedule
}

func (f discoveryForm) definition() (discoveryDefinition, error) {
	var d discoveryDefinition
	d.subnets, d.excludes = append([]string{}, lines(f.Subnets)...), append([]string{}, lines(f.ExcludeIPs)...)
	d.methods = append([]string{}, f.Methods...)
	if len(d.methods) == 0 {
		d.methods = slices.Clone(discovery.DefaultMethods)
	}
	for _, s := range strings.FieldsFunc(f.Ports, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return d, apperr.Invalid("ports", "port numbers separated by commas, such as 22, 80, 443")
		}
		d.ports = append(d.ports, n)
	}
	if len(d.ports) == 0 {
		d.ports = slices.Clone(discovery.DefaultPorts)
	}
	d.schedule = discovery.DiscoverySchedule{Type: f.ScheduleType}
	switch f.ScheduleType {
	case discovery.ScheduleCron:
		d.schedule.Cron = f.Cron
	case discovery.ScheduleInterval:
		n, err := strconv.Atoi(f.IntervalMinutes)
		if err != nil {
			return d, apperr.Invalid("schedule.intervalMinutes", "a whole number of minutes, from 15")
		}
		d.schedule.IntervalMinutes = n
	}
	return d, nil
}

// snmp is the credentials the form gives; nil when it gives none (or keeps the stored ones).
func (f discoveryForm) snmp(form url.Values) *discovery.DiscoverySNMPCredentials {
	switch f.SNMPVersion {
	case "", snmpKeep:
		return nil
	}
	cred := &discovery.DiscoverySNMPCredentials{Version: f.SNMPVersion, Community: form.Get("snmp.community"), Username: f.SNMPUsername,
		AuthProtocol: f.SNMPAuthProtocol, AuthPassword: form.Get("snmp.authPassword"), PrivProtocol: f.SNMPPrivProtocol,
		PrivPassword: form.Get("snmp.privPassword")}
	if f.SNMPVersion != agentproto.SNMPv3 {
		cred.Username, cred.AuthProtocol, cred.PrivProtocol, cred.AuthPassword, cred.PrivPassword = "", "", "", "", ""
	} else {
		cred.Community = ""
	}
	return cred
}

func (c *Console) discoveryProfileCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-discovery-profile"); err != nil {
		return err
	}
	f := readDiscoveryForm(r.PostForm)
	p, err := func() (discovery.DiscoveryProfile, error) {
		d, err := f.definition()
		if err != nil {
			return discovery.DiscoveryProfile{}, err
		}
		return c.Discovery.CreateProfile(ctx, discovery.DiscoveryProfileInput{SiteID: f.SiteID, Name: f.Name, Subnets: d.subnets,
			ExcludeIPs: d.excludes, Methods: d.methods, Ports: d.ports, SNMP: f.snmp(r.PostForm), DeepScan: f.DeepScan, Schedule: &d.schedule})
	}()
	if err != nil {
		return c.discoveryRefused(w, r, f, err)
	}
	http.Redirect(w, r, "/discovery/profiles/"+p.ID, http.StatusSeeOther)
	return nil
}

// discoveryProfileUpdate saves the form as the profile's definition, as a PATCH does: the
// site, the agent, the probes' timeout and concurrency stay; the stored SNMP credentials stay
// unless others are given or none is chosen; the schedule is sent only when it changed, so
// that its next run stays.
func (c *Console) discoveryProfileUpdate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-discovery-profile"); err != nil {
		return err
	}
	before, err := c.Discovery.GetProfile(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	f := readDiscoveryForm(r.PostForm)
	f.ID, f.Saved, f.OrgID, f.SiteID = before.ID, before.Name, before.OrgID, before.SiteID
	_, err = func() (discovery.DiscoveryProfile, error) {
		d, err := f.definition()
		if err != nil {
			return discovery.DiscoveryProfile{}, err
		}
		in := discovery.DiscoveryProfileUpdate{Name: &f.Name, Subnets: d.subnets, ExcludeIPs: d.excludes, Methods: d.methods, Ports: d.ports,
			SNMP: f.snmp(r.PostForm), ClearSNMP: f.SNMPVersion == "" && before.SNMP != nil, DeepScan: &f.DeepScan}
		if d.schedule != before.Schedule {
			in.Schedule = &d.schedule
		}
		return c.Discovery.UpdateProfile(ctx, before.ID, in)
	}()
	if err != nil {
		return c.discoveryRefused(w, r, f, err)
	}
	http.Redirect(w, r, "/discovery/profiles/"+before.ID, http.StatusSeeOther)
	return nil
}

func (c *Console) discoveryRefused(w http.ResponseWriter, r *http.Request, f discoveryForm, err error) error {
	ae := formRefusal(err)
	if ae == nil {
		return err
	}
	f.Error = ae
	return c.discoveryEditor(w, r, httpapi.StatusOf(ae), f)
}

func (c *Console) discoveryProfileDelete(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "delete-discovery-profile"); err != nil {
		return err
	}
	if err := c.Discovery.DeleteProfile(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	seeOther(w, r, "/discovery")
	return nil
}
