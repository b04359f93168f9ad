package console

import (
	"cmp"
	"html"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// scopeCookie holds the organization the tenancy switcher narrowed the pages to, and
// siteCookie the site of that organization.
const (
	scopeCookie = "gale_org"
	siteCookie  = "gale_site"
)

// maxSwitcherOrgs bounds the organizations the switcher lists; beyond them a technician
// finds an organization by searching the lists.
const maxSwitcherOrgs = 500

// scopeView is the tenancy switcher: the organizations the user may see, grouped by partner
// for a system user, and the one the pages are narrowed to ("" for all).
type scopeView struct {
	Shown   bool
	Groups  []orgGroup
	Current string
	Name    string
	// Sites are the current organization's, when it has more than one; Site is the chosen one.
	Sites []tenancy.Site
	Site  string
	// OrgNames names the organizations listed, for pages that show whose a row is.
	OrgNames map[string]string
}

type orgGroup struct {
	Partner string
	Orgs    []*tenancy.Organization
}

// orgOptionsHTML writes the switcher's organizations, grouped by partner where the scope
// names partners, the current one selected. Every page has them, for up to maxSwitcherOrgs
// organizations: written here rather than by html/template, which would spend three
// reflective calls on each (see deviceRowsHTML).
func orgOptionsHTML(v scopeView) template.HTML {
	var b strings.Builder
	for _, g := range v.Groups {
		if g.Partner != "" {
			b.WriteString(`<optgroup label="` + html.EscapeString(g.Partner) + `">`)
		}
		for _, o := range g.Orgs {
			b.WriteString(`<option value="` + html.EscapeString(o.ID) + `"`)
			if o.ID == v.Current {
				b.WriteString(" selected")
			}
			b.WriteString(">" + html.EscapeString(o.Name) + "</option>")
		}
		if g.Partner != "" {
			b.WriteString("</optgroup>")
		}
	}
	return template.HTML(b.String())
}

// orgStep is the first step of a form that acts in one organization, for a user who sees
// several and has not chosen one in the switcher: the organizations by name, and where the
// choice goes.
type orgStep struct {
	Action, Back, Hint string
	Orgs               []targetChoice
}

func newOrgStep(action, back, hint string, names map[string]string) orgStep {
	s := orgStep{Action: action, Back: back, Hint: hint}
	for id, name := range names {
		s.Orgs = append(s.Orgs, targetChoice{ID: id, Name: name})
	}
	slices.SortFunc(s.Orgs, func(a, b targetChoice) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return s
}

func (c *Console) scopeView(r *http.Request) (scopeView, error) {
	var v scopeView
	if !c.HTTP.Permits(r.Context(), "list-organizations") {
		return v, nil
	}
	orgs, _, _, err := c.Tenancy.ListOrganizations(r.Context(), tenancy.OrgListFilter{}, store.Page{Limit: maxSwitcherOrgs})
	if err != nil {
		return v, err
	}
	v.Shown = len(orgs) > 1
	partners := map[string]string{}
	// Partners are named for a system user only: the others see one partner, their own.
	if access.PrincipalFrom(r.Context()).Scope.IsSystem() && c.HTTP.Permits(r.Context(), "list-partners") {
		list, _, _, err := c.Tenancy.ListPartners(r.Context(), store.Page{Limit: maxSwitcherOrgs})
		if err != nil {
			return v, err
		}
		for _, p := range list {
			partners[p.ID] = p.Name
		}
	}
	current := c.currentOrg(r)
	byPartner := map[string]int{}
	v.OrgNames = make(map[string]string, len(orgs))
	for _, o := range orgs {
		v.OrgNames[o.ID] = o.Name
		if o.ID == current {
			v.Current, v.Name = o.ID, o.Name
		}
		i, ok := byPartner[o.PartnerID]
		if !ok {
			i = len(v.Groups)
			byPartner[o.PartnerID] = i
			v.Groups = append(v.Groups, orgGroup{Partner: partners[o.PartnerID]})
		}
		v.Groups[i].Orgs = append(v.Groups[i].Orgs, o)
	}
	if v.Current != "" && c.HTTP.Permits(r.Context(), "list-sites") {
		sites, _, _, err := c.Tenancy.ListSites(r.Context(), tenancy.SiteListFilter{OrgID: v.Current}, store.Page{Limit: maxSwitcherOrgs})
		if err != nil {
			return v, err
		}
		if len(sites) > 1 {
			v.Sites = sites
			site := c.currentSite(r)
			for _, s := range sites {
				if s.ID == site {
					v.Site = site
				}
			}
		}
	}
	return v, nil
}

// currentSite is the site the switcher chose within the current organization ("" for all).
func (c *Console) currentSite(r *http.Request) string {
	if c.currentOrg(r) == "" {
		return ""
	}
	ck, err := r.Cookie(siteCookie)
	if err != nil || !store.ValidID(ck.Value) {
		return ""
	}
	return ck.Value
}

// currentOrg is the organization the switcher chose; the pages pass it to the services as a
// filter, so one outside the user's scope shows nothing rather than anything foreign.
func (c *Console) currentOrg(r *http.Request) string {
	ck, err := r.Cookie(scopeCookie)
	if err != nil || !store.ValidID(ck.Value) {
		return ""
	}
	return ck.Value
}

// setScope is the switcher's form: it narrows every page to one organization, or to all,
// and within an organization to one of its sites. Choosing another organization forgets the
// site.
func (c *Console) setScope(w http.ResponseWriter, r *http.Request) error {
	org, site := r.PostFormValue("org"), r.PostFormValue("site")
	if org != c.currentOrg(r) {
		site = ""
	}
	for name, value := range map[string]string{scopeCookie: org, siteCookie: site} {
		ck := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: c.opts.SecureCookies,
			SameSite: http.SameSiteLaxMode}
		if value == "" || !store.ValidID(value) {
			ck.Value, ck.MaxAge = "", -1
		}
		http.SetCookie(w, ck)
	}
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
	return nil
}
