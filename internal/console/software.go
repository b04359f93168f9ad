package console

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// softwarePageSize is the software list's page.
const softwarePageSize = 100

// softwarePage is a device's installed software, searched by name.
type softwarePage struct {
	DeviceID, Device string
	Software         []devices.InstalledSoftware
	Search, Next     string
}

func (c *Console) deviceSoftware(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-device-software"); err != nil {
		return err
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	in := r.URL.Query()
	pg := softwarePage{DeviceID: d.ID, Device: d.Name(), Search: strings.TrimSpace(in.Get("q"))}
	if utf8.RuneCountInString(pg.Search) > 200 {
		return apperr.Invalid("q", "search for at most 200 characters")
	}
	list, next, _, err := c.Devices.Software(r.Context(), d.ID, pg.Search, store.Page{Limit: softwarePageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Software = list
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "software", "", view{Title: "Software · " + pg.Device, Section: "devices", Data: pg})
}
