package console

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/apikeys"
	"gale/internal/domains/enrollment"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// settingsListSize bounds each list of the settings pages.
const settingsListSize = 100

// settingsTab names the tab of the settings' tab row a page belongs to; its pages' data embed
// it so the shared row can tell which tab is current.
type settingsTab string

// Tab is the current tab's name.
func (t settingsTab) Tab() string { return string(t) }

// settingsPage lists the credentials that reach the server for the user's scope: the
// enrollment keys devices join with, and the API keys of integrations.
type settingsPage struct {
	settingsTab
	CanKeys, CanRevokeKey       bool
	Keys                        []enrollment.EnrollmentKey
	CanAPIKeys, CanRevokeAPIKey bool
	CanCreateAPIKey             bool
	APIKeys                     []apikeys.APIKey
}

func (c *Console) settings(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	pg := settingsPage{settingsTab: "keys", CanKeys: c.HTTP.Permits(ctx, "list-enrollment-keys"),
		CanRevokeKey: c.HTTP.Permits(ctx, "revoke-enrollment-key"), CanAPIKeys: c.HTTP.Permits(ctx, "list-api-keys"),
		CanRevokeAPIKey: c.HTTP.Permits(ctx, "revoke-api-key"), CanCreateAPIKey: c.HTTP.Permits(ctx, "create-api-key")}
	var err error
	if pg.CanKeys {
		if pg.Keys, _, _, err = c.Enrollment.List(ctx, enrollment.ListFilter{OrgID: c.currentOrg(r), Status: enrollment.StatusActive},
			store.Page{Limit: settingsListSize}); err != nil {
			return err
		}
	}
	if pg.CanAPIKeys {
		if pg.APIKeys, _, _, err = c.APIKeys.List(ctx, apikeys.ListFilter{Status: "active"}, store.Page{Limit: settingsListSize}); err != nil {
			return err
		}
	}
	return c.render(w, r, http.StatusOK, "settings", "", view{Title: "Settings", Section: "settings", Data: pg})
}

func (c *Console) revokeEnrollmentKey(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "revoke-enrollment-key"); err != nil {
		return err
	}
	if err := c.Enrollment.Revoke(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "revoke-enrollment-key")
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
	return nil
}

func (c *Console) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "revoke-api-key"); err != nil {
		return err
	}
	if err := c.APIKeys.Revoke(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "revoke-api-key")
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
	return nil
}

// apiKeyForm is the form of a new API key, and after its creation the key with its secret,
// shown this once.
type apiKeyForm struct {
	settingsTab
	Name, Preset, ExpiresAt string
	Groups                  []permGroup
	Level                   access.Level
	Error                   *apperr.Error
	// Created is the new key; Secret its raw value.
	Created *apikeys.APIKey
	Secret  string
}

// API key presets: grants computed from what the creator holds.
const (
	presetRead = "read"
	presetAll  = "all"
)

func (c *Console) apiKeyNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-api-key"); err != nil {
		return err
	}
	return c.apiKeyEditor(w, r, http.StatusOK, apiKeyForm{Preset: presetRead}, nil)
}

func (c *Console) apiKeyEditor(w http.ResponseWriter, r *http.Request, status int, f apiKeyForm, checked []string) error {
	p := access.PrincipalFrom(r.Context())
	f.settingsTab, f.Level = "keys", p.Scope.Level
	f.Groups = permGroups(checked, func(perm access.Permission) bool { return p.Permissions.Has(perm.Name) })
	return c.render(w, r, status, "apikey-new", "", view{Title: "New API key", Section: "settings", Data: f})
}

// apiKeyCreate makes a key for the signed-in user, as POST /api-keys does, and shows its raw
// value once.
func (c *Console) apiKeyCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-api-key"); err != nil {
		return err
	}
	p := access.PrincipalFrom(ctx)
	f := apiKeyForm{Name: strings.TrimSpace(r.PostFormValue("name")), Preset: r.PostFormValue("preset"), ExpiresAt: r.PostFormValue("expiresAt")}
	perms := r.PostForm["permissions"]
	switch f.Preset {
	case presetRead:
		perms = nil
		for _, perm := range access.Catalog() {
			if perm.Action == "read" && p.Permissions.Has(perm.Name) {
				perms = append(perms, perm.Name)
			}
		}
	case presetAll:
		perms = p.Permissions.Expand()
	case "":
	default:
		return apperr.Invalid("preset", "read, all, or none to take the ticked permissions")
	}
	in := apikeys.Input{Name: &f.Name, Permissions: perms}
	created, err := func() (apikeys.Created, error) {
		if f.ExpiresAt != "" {
			day, err := time.Parse(time.DateOnly, f.ExpiresAt)
			if err != nil {
				return apikeys.Created{}, apperr.Invalid("expiresAt", "a date as YYYY-MM-DD")
			}
			// The key works through the whole day it names (UTC).
			end := day.Add(24 * time.Hour)
			in.ExpiresAt = &end
		}
		return c.APIKeys.Create(ctx, in)
	}()
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		f.Error = ae
		return c.apiKeyEditor(w, r, httpapi.StatusOf(ae), f, perms)
	}
	c.HTTP.Succeeded(ctx, "create-api-key")
	f.Created, f.Secret = &created.APIKey, created.Key
	return c.render(w, r, http.StatusCreated, "apikey-new", "", view{Title: "API key created", Section: "settings",
		Data: apiKeyForm{settingsTab: "keys", Created: f.Created, Secret: f.Secret}})
}

// permGroup is one resource's permissions as a form's checkboxes.
type permGroup struct {
	Resource string
	Perms    []permChoice
}

type permChoice struct {
	access.Permission
	Checked bool
}

// permGroups groups the catalog's permissions that keep passes by resource, those named in
// checked ticked.
func permGroups(checked []string, keep func(access.Permission) bool) []permGroup {
	var out []permGroup
	for _, perm := range access.Catalog() {
		if !keep(perm) {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Resource != perm.Resource {
			out = append(out, permGroup{Resource: perm.Resource})
		}
		g := &out[len(out)-1]
		g.Perms = append(g.Perms, permChoice{Permission: perm, Checked: slices.Contains(checked, perm.Name)})
	}
	return out
}

// formRefusal is the API's refusal of a form's input (invalid, or in conflict with what
// exists), shown above the form again with what was typed; nil for any other error, which
// goes to the error page.
func formRefusal(err error) *apperr.Error {
	ae, ok := apperr.As(err)
	if !ok || (ae.Kind != apperr.KindInvalid && ae.Kind != apperr.KindConflict) {
		return nil
	}
	return ae
}

// afterChange sends the browser on after a change: a redirect, or for htmx (a button that
// asked to confirm) the instruction to load that page.
func afterChange(w http.ResponseWriter, r *http.Request, to string) {
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// partnerWideChoice tells whether a form offers to make a channel or subscription serve the
// partner as a whole: to a partner user reaching all of it (a system user names the partner
// through the API; an organization user has only its own).
func partnerWideChoice(ctx context.Context) bool {
	scope := access.ScopeFrom(ctx)
	return scope.Level == access.LevelPartner && tenancy.ReachesWholePartner(scope)
}

// partnerChoices are the partners a system user picks from when a form asks for one.
func (c *Console) partnerChoices(ctx context.Context) ([]tenancy.Partner, error) {
	if !access.ScopeFrom(ctx).IsSystem() || !c.HTTP.Permits(ctx, "list-partners") {
		return nil, nil
	}
	list, _, _, err := c.Tenancy.ListPartners(ctx, store.Page{Limit: maxSwitcherOrgs})
	return list, err
}
