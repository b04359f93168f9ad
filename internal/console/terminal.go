package console

import (
	"net/http"
	"net/url"

	"gale/internal/domains/remote"
)

// terminalPage is the terminal's data: the device, and the WebSocket path (its single-use
// ticket included) the page's script opens on this server.
type terminalPage struct {
	DeviceID, Device, SessionID, Socket string
}

// terminalPolicy is the CSP of the terminal page: the terminal library sets the sizes of its
// rows and its colours in a style element it writes, so styles may be inline there; scripts
// still may not.
const terminalPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// openTerminal opens a terminal session on the device as the API's remote sessions do, and
// answers the page that connects to it.
func (c *Console) openTerminal(w http.ResponseWriter, r *http.Request) error {
	for _, op := range []string{"create-remote-session", "create-remote-terminal-ticket"} {
		if err := c.allow(r.Context(), op); err != nil {
			return err
		}
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	x, err := c.Remote.Create(r.Context(), d.ID, remote.TypeTerminal)
	if err != nil {
		return err
	}
	t, err := c.Remote.IssueTerminalTicket(r.Context(), x.ID)
	if err != nil {
		return err
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return err
	}
	name := d.Name()
	w.Header().Set("Content-Security-Policy", terminalPolicy)
	return c.render(w, r, http.StatusOK, "terminal", "", view{Title: "Terminal · " + name, Section: "devices",
		Data: terminalPage{DeviceID: d.ID, Device: name, SessionID: x.ID, Socket: u.RequestURI()}})
}
