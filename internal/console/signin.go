package console

import (
	"net/http"

	"gale/internal/domains/auth"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
)

// signInForm is the sign-in page's data.
type signInForm struct {
	Email string
	Next  string
	// Reason says why the browser came here (a session that ended).
	Reason string
	Error  string
	// TempToken is set on the second step: the TOTP code of a user with MFA.
	TempToken string
	// FirstRun is set while no user exists: the page says how to create the first one.
	FirstRun bool
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.session(r, false); err == nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return nil
	}
	f := signInForm{Next: safeNext(r.URL.Query().Get("next")), Reason: r.URL.Query().Get("reason")}
	has, err := c.Identity.HasUsers(r.Context())
	if err != nil {
		return err
	}
	f.FirstRun = !has
	return c.render(w, r, http.StatusOK, "signin", "", view{Title: "Sign in", Data: f})
}

// signIn checks the email and password; a user with MFA is asked for a code next.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) error {
	f := signInForm{Email: r.PostFormValue("email"), Next: safeNext(r.PostFormValue("next"))}
	res, err := c.Auth.Login(r.Context(), f.Email, r.PostFormValue("password"))
	if err != nil {
		return c.signInFailed(w, r, f, err)
	}
	if res.Challenge != nil {
		f.TempToken = res.Challenge.TempToken
		return c.render(w, r, http.StatusOK, "signin", "", view{Title: "Sign in", Data: f})
	}
	return c.signedIn(w, r, res.Session, f.Next)
}

// signInMFA checks the TOTP (or recovery) code of the second step.
func (c *Console) signInMFA(w http.ResponseWriter, r *http.Request) error {
	f := signInForm{Next: safeNext(r.PostFormValue("next")), TempToken: r.PostFormValue("tempToken")}
	sess, err := c.Auth.VerifyMFA(r.Context(), f.TempToken, r.PostFormValue("code"))
	if err != nil {
		return c.signInFailed(w, r, f, err)
	}
	return c.signedIn(w, r, sess, f.Next)
}

func (c *Console) signInFailed(w http.ResponseWriter, r *http.Request, f signInForm, err error) error {
	ae, ok := apperr.As(err)
	if !ok {
		return err
	}
	f.Error = ae.Message
	return c.render(w, r, httpapi.StatusOf(ae), "signin", "", view{Title: "Sign in", Data: f})
}

func (c *Console) signedIn(w http.ResponseWriter, r *http.Request, s *auth.Session, next string) error {
	c.setSession(w, s)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// signOut ends the session's family: every tab and every API token of this sign-in.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) error {
	ck, err := r.Cookie(sessionCookie)
	if err == nil {
		if err := c.Auth.Logout(r.Context(), ck.Value, ""); err != nil {
			return err
		}
		c.HTTP.Succeeded(r.Context(), "logout")
	}
	c.clearSession(w)
	http.Redirect(w, r, "/signin?reason=You+signed+out.", http.StatusSeeOther)
	return nil
}
