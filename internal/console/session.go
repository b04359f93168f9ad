package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/auth"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
)

// sessionCookie holds the refresh token of the browser's session.
const sessionCookie = "gale_session"

// handler is a page: it returns an error to show instead of what it would have written.
type handler func(w http.ResponseWriter, r *http.Request) error

// public serves a page that needs no session (sign-in). Its forms are checked for coming
// from a page of this server, as a sign-in form has no session to tie a CSRF token to.
func (c *Console) public(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.secureHeaders(w)
		if r.Method != http.MethodGet && !sameOrigin(r) {
			c.fail(w, r, apperr.Forbidden("this form was not sent from a page of this server: reload the page and try again"))
			return
		}
		if err := readForm(w, r); err != nil {
			c.fail(w, r, err)
			return
		}
		if err := h(w, r); err != nil {
			c.fail(w, r, err)
		}
	})
}

// page serves a page of a signed-in user: without a live session the browser goes to the
// sign-in page (and comes back after it); a state-changing request must carry the session's
// CSRF token.
func (c *Console) page(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.secureHeaders(w)
		if err := readForm(w, r); err != nil {
			c.fail(w, r, err)
			return
		}
		// A page's own refresh after a live change is not the user's doing.
		p, err := c.session(r, r.Header.Get("X-Gale-Live") == "")
		if err != nil {
			if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindUnauthenticated {
				c.toSignIn(w, r, ae.Message)
				return
			}
			c.fail(w, r, err)
			return
		}
		ctx := access.WithPrincipal(r.Context(), p)
		r = r.WithContext(ctx)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !c.validCSRF(r, p) {
				c.fail(w, r, apperr.Forbidden("this form has no valid security token (CSRF): reload the page and try again"))
				return
			}
		}
		if err := h(w, r); err != nil {
			c.fail(w, r, err)
		}
	})
}

// session resolves the session cookie to its user; active tells a request of the user's
// from a check in the background.
func (c *Console) session(r *http.Request, active bool) (*access.Principal, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, apperr.Unauthorized("")
	}
	return c.Auth.BrowserSession(r.Context(), ck.Value, c.opts.Idle, active)
}

// toSignIn sends the browser to the sign-in page, to return to this page after it (an htmx
// request is told to move the whole page).
func (c *Console) toSignIn(w http.ResponseWriter, r *http.Request, reason string) {
	next := "/"
	if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" {
		next = r.URL.RequestURI()
	}
	q := url.Values{}
	if next != "/" {
		q.Set("next", next)
	}
	if reason != "" {
		q.Set("reason", reason)
	}
	target := "/signin"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	c.clearSession(w)
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("HX-Redirect", target)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

func (c *Console) setSession(w http.ResponseWriter, s *auth.Session) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.RefreshToken, Path: "/", HttpOnly: true,
		Secure: c.opts.SecureCookies, SameSite: http.SameSiteLaxMode})
}

func (c *Console) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.opts.SecureCookies, SameSite: http.SameSiteLaxMode})
}

// csrfToken is the session's CSRF token: a keyed hash of its family, so it needs no storage
// and changes with every sign-in.
func (c *Console) csrfToken(p *access.Principal) string {
	m := hmac.New(sha256.New, c.opts.Secret)
	m.Write([]byte("console-csrf:" + p.SessionID))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *Console) validCSRF(r *http.Request, p *access.Principal) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	want := c.csrfToken(p)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameOrigin tells a request a page of this server sent: browsers send Sec-Fetch-Site, or
// at least Origin, with every form post.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// safeNext keeps a return address on this server: a path, never another site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

// maxFormBytes bounds a form (a script's content is the largest field).
const maxFormBytes = 1 << 20

// readForm reads the query and, for a state-changing request, the form body, under the API's
// input policy: valid UTF-8 without NUL or control characters other than line breaks and
// tabs, and a body of at most maxFormBytes.
func readForm(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	}
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge, Message: "the form is larger than 1 MiB"}
		}
		return apperr.Invalid("form", "the form could not be read: "+err.Error())
	}
	for _, name := range slices.Sorted(maps.Keys(r.Form)) {
		for _, v := range r.Form[name] {
			if !utf8.ValidString(name) || !utf8.ValidString(v) || httpapi.HasControl(name, false) || httpapi.HasControl(v, true) {
				return apperr.Invalid(strings.ToValidUTF8(strings.Map(printable, name), "?"),
					"must be text without NUL or control characters")
			}
		}
	}
	return nil
}

// printable keeps a field's name printable in an error.
func printable(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return '?'
	}
	return r
}
