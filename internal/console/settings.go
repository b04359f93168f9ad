package console

import (
	"net/http"

	"gale/internal/domains/apikeys"
	"gale/internal/domains/enrollment"
	"gale/internal/platform/store"
)

// settingsListSize bounds each list of the settings page.
const settingsListSize = 100

// settingsPage lists the credentials that reach the server for the user's scope: the
// enrollment keys devices join with, and the API keys of integrations.
type settingsPage struct {
	CanKeys, CanRevokeKey       bool
	Keys                        []enrollment.EnrollmentKey
	CanAPIKeys, CanRevokeAPIKey bool
	APIKeys                     []apikeys.APIKey
}

func (c *Console) settings(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	pg := settingsPage{CanKeys: c.HTTP.Permits(ctx, "list-enrollment-keys"), CanRevokeKey: c.HTTP.Permits(ctx, "revoke-enrollment-key"),
		CanAPIKeys: c.HTTP.Permits(ctx, "list-api-keys"), CanRevokeAPIKey: c.HTTP.Permits(ctx, "revoke-api-key")}
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
	return c.render(w, r, http.StatusOK, "settings", "", view{Title: "Keys", Section: "settings", Data: pg})
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
