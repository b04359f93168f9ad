package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/enrollment"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// startPage guides a new installation from nothing to its first managed device: a partner
// (the MSP), an organization (a customer), then an enrollment key and the command that
// installs the agent with it.
type startPage struct {
	// NeedPartner is set for a system user while no partner exists.
	NeedPartner bool
	Partners    []tenancy.Partner
	// NeedOrg is set while the user sees no organization.
	NeedOrg bool
	Orgs    []*tenancy.Organization
	// Key is the key just created, shown with its install commands once.
	Key     *enrollment.IssuedKey
	Install string
	Enroll  string
	// Can* tell what the user may create.
	CanPartner, CanOrg, CanKey bool
	DefaultTTLHours            int
}

// maxStartChoices bounds the partners and organizations the guide offers.
const maxStartChoices = 200

func (c *Console) start(w http.ResponseWriter, r *http.Request) error {
	pg, err := c.startData(r)
	if err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "start", "", view{Title: "Add devices", Section: "start", Data: pg})
}

func (c *Console) startData(r *http.Request) (startPage, error) {
	ctx := r.Context()
	pg := startPage{CanPartner: c.HTTP.Permits(ctx, "create-partner"), CanOrg: c.HTTP.Permits(ctx, "create-organization"),
		CanKey: c.HTTP.Permits(ctx, "create-enrollment-key"), DefaultTTLHours: max(1, int(c.opts.KeyTTL/time.Hour))}
	var err error
	if access.PrincipalFrom(ctx).Scope.IsSystem() && c.HTTP.Permits(ctx, "list-partners") {
		if pg.Partners, _, _, err = c.Tenancy.ListPartners(ctx, store.Page{Limit: maxStartChoices}); err != nil {
			return pg, err
		}
		pg.NeedPartner = len(pg.Partners) == 0
	}
	if c.HTTP.Permits(ctx, "list-organizations") {
		if pg.Orgs, _, _, err = c.Tenancy.ListOrganizations(ctx, tenancy.OrgListFilter{}, store.Page{Limit: maxStartChoices}); err != nil {
			return pg, err
		}
		pg.NeedOrg = len(pg.Orgs) == 0
	}
	return pg, nil
}

func (c *Console) startPartner(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-partner"); err != nil {
		return err
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if _, err := c.Tenancy.CreatePartner(r.Context(), tenancy.PartnerInput{Name: &name}); err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "create-partner")
	http.Redirect(w, r, "/start", http.StatusSeeOther)
	return nil
}

func (c *Console) startOrg(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-organization"); err != nil {
		return err
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if _, err := c.Tenancy.CreateOrganization(r.Context(), tenancy.NewOrganization{OrganizationInput: tenancy.OrganizationInput{Name: &name},
		PartnerID: r.PostFormValue("partnerId"), DefaultSite: "Main Site"}); err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "create-organization")
	http.Redirect(w, r, "/start", http.StatusSeeOther)
	return nil
}

// startKey creates an enrollment key with its own secret and shows, once, the commands that
// install the agent with it.
func (c *Console) startKey(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-enrollment-key"); err != nil {
		return err
	}
	in := enrollment.NewEnrollmentKey{OrgID: r.PostFormValue("orgId"), Name: r.PostFormValue("name"), IssueEnrollmentSecret: true}
	for field, dst := range map[string]**int{"maxUsage": &in.MaxUsage, "ttlHours": &in.TTLMinutes} {
		v := strings.TrimSpace(r.PostFormValue(field))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return apperr.Invalid(field, "a whole number of at least 1")
		}
		if field == "ttlHours" {
			if n > 525600/60 {
				return apperr.Invalid(field, "at most 8760 hours (a year)")
			}
			n *= 60
		}
		*dst = &n
	}
	key, err := c.Enrollment.Create(r.Context(), in, enrollment.Policy{Source: enrollment.SourceAPI, DefaultTTL: c.opts.KeyTTL})
	if err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "create-enrollment-key")
	pg, err := c.startData(r)
	if err != nil {
		return err
	}
	pg.Key = &key
	pg.Install = "curl -fsSL " + c.opts.PublicURL + "/api/v1/agents/install.sh | sudo sh -s -- --key " + key.Key +
		" --secret " + key.EnrollmentSecret
	pg.Enroll = "gale-agent enroll " + key.Key + " --server " + c.opts.PublicURL + " --enrollment-secret " + key.EnrollmentSecret
	return c.render(w, r, http.StatusCreated, "start", "", view{Title: "Add devices", Section: "start", Data: pg})
}
