package console

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/identity"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// usersPageSize is the users page's size.
const usersPageSize = 100

// usersPage lists the users in scope with their role, whether they use two-step
// verification, and when they last signed in.
type usersPage struct {
	Users        []identity.User
	Search, Next string
}

func (c *Console) users(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-users"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := usersPage{Search: strings.TrimSpace(in.Get("q"))}
	if utf8.RuneCountInString(pg.Search) > 200 {
		return apperr.Invalid("q", "search for at most 200 characters")
	}
	list, next, _, err := c.Identity.ListUsers(r.Context(), identity.UserListFilter{Search: pg.Search, OrgID: c.currentOrg(r)},
		store.Page{Limit: usersPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Users = list
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "users", "", view{Title: "Users", Section: "users", Data: pg})
}
