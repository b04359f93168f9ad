package console

import (
	"html/template"
	"net/http"

	"gale/internal/domains/auth"
	"gale/internal/platform/access"
)

// accountPage is the signed-in user's own security: the second step of sign-in, and the
// password.
type accountPage struct {
	Email      string
	MFAEnabled bool
	// Setup is the authenticator secret being enrolled, shown until a code confirms it; Link
	// is its otpauth: address, which authenticator apps open.
	Setup *auth.MFASetup
	Link  template.URL
	// RecoveryCodes are shown once, when MFA turns on.
	RecoveryCodes []string
	Done          string
}

func (c *Console) account(w http.ResponseWriter, r *http.Request) error {
	return c.renderAccount(w, r, http.StatusOK, accountPage{Done: r.URL.Query().Get("done")})
}

func (c *Console) renderAccount(w http.ResponseWriter, r *http.Request, status int, pg accountPage) error {
	if err := c.allow(r.Context(), "get-me"); err != nil {
		return err
	}
	me, err := c.Identity.GetMe(r.Context())
	if err != nil {
		return err
	}
	pg.Email, pg.MFAEnabled = me.Email, me.MFAEnabled
	return c.render(w, r, status, "account", "", view{Title: "Your account", Section: "account", Data: pg})
}

// mfaSetup starts enrolling an authenticator: the page shows its secret, then asks for a code.
func (c *Console) mfaSetup(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "mfa-setup"); err != nil {
		return err
	}
	setup, err := c.Auth.SetupMFA(r.Context(), access.PrincipalFrom(r.Context()), r.PostFormValue("password"))
	if err != nil {
		return err
	}
	// The address is the service's own (otpauth://totp/...), not the user's input.
	return c.renderAccount(w, r, http.StatusOK, accountPage{Setup: setup, Link: template.URL(setup.OTPAuthURL)})
}

// mfaEnable confirms the authenticator with a code and shows the recovery codes once.
func (c *Console) mfaEnable(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "mfa-enable"); err != nil {
		return err
	}
	codes, err := c.Auth.EnableMFA(r.Context(), access.PrincipalFrom(r.Context()), r.PostFormValue("code"), r.PostFormValue("password"))
	if err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "mfa-enable")
	return c.renderAccount(w, r, http.StatusOK, accountPage{RecoveryCodes: codes})
}

func (c *Console) mfaDisable(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "mfa-disable"); err != nil {
		return err
	}
	if err := c.Auth.DisableMFA(r.Context(), access.PrincipalFrom(r.Context()), r.PostFormValue("code"), r.PostFormValue("password")); err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "mfa-disable")
	http.Redirect(w, r, "/account?done=mfa-off", http.StatusSeeOther)
	return nil
}

// changePassword ends every session of the user, this one too: the browser signs in again.
func (c *Console) changePassword(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "change-password"); err != nil {
		return err
	}
	if err := c.Auth.ChangePassword(r.Context(), access.PrincipalFrom(r.Context()), r.PostFormValue("current"), r.PostFormValue("next")); err != nil {
		return err
	}
	c.HTTP.Succeeded(r.Context(), "change-password")
	c.clearSession(w)
	http.Redirect(w, r, "/signin?reason=Your+password+changed%3A+sign+in+with+the+new+one.", http.StatusSeeOther)
	return nil
}
