package console

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

// processesPage is a device's running processes, as its agent reports them now, busiest
// first.
type processesPage struct {
	toolPage
	Processes []agentproto.Process
	CanKill   bool
	// Search keeps the processes whose name or command line holds it.
	Search string
}

func (c *Console) processes(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-device-processes"); err != nil {
		return err
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := processesPage{toolPage: c.toolPage(r.Context(), d, "processes"), CanKill: c.HTTP.Permits(r.Context(), "kill-device-process"),
		Search: strings.TrimSpace(r.URL.Query().Get("q"))}
	if err := maxRunes("q", pg.Search, 200); err != nil {
		return err
	}
	list, err := c.SystemTools.Processes(r.Context(), d.ID)
	slices.SortStableFunc(list, func(a, b agentproto.Process) int {
		return cmp.Or(cmp.Compare(b.CPUPercent, a.CPUPercent), cmp.Compare(b.MemoryBytes, a.MemoryBytes))
	})
	needle := strings.ToLower(pg.Search)
	for _, p := range list {
		if strings.Contains(strings.ToLower(p.Name), needle) || strings.Contains(strings.ToLower(p.CommandLine), needle) {
			pg.Processes = append(pg.Processes, p)
		}
	}
	return c.renderTool(w, r, "processes", "", "Processes", &pg.toolPage, &pg, err)
}

// killProcess ends a process (TERM, or KILL when asked) and answers its row, marked ended.
func (c *Console) killProcess(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "kill-device-process"); err != nil {
		return err
	}
	pid, err := strconv.ParseInt(r.PathValue("pid"), 10, 32)
	if err != nil || pid < 1 {
		return apperr.Invalid("pid", "a process ID is a whole number of at least 1")
	}
	signal := r.PostFormValue("signal")
	if signal != "" && signal != "TERM" && signal != "KILL" {
		return apperr.Invalid("signal", "TERM or KILL")
	}
	if _, err := c.SystemTools.Kill(r.Context(), r.PathValue("id"), int32(pid), signal); err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "processes", "process-ended", view{Data: agentproto.Process{PID: int32(pid),
		Name: r.FormValue("name")}})
}
