package console

import (
	"net/http"

	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/scripts"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// maxBulkDevices is how many devices one bulk action takes, as the API's bulk commands.
const maxBulkDevices = 500

// bulkTools are the device list's bulk actions the user may take, with their choices.
type bulkTools struct {
	Scripts []scripts.Script
	Groups  []groups.Group
	Reboot  bool
}

// Any tells whether the user may take any bulk action.
func (b bulkTools) Any() bool { return len(b.Scripts) > 0 || len(b.Groups) > 0 || b.Reboot }

func (c *Console) bulkTools(r *http.Request) (bulkTools, error) {
	var b bulkTools
	var err error
	if b.Scripts, err = c.runnableScripts(r, ""); err != nil {
		return b, err
	}
	b.Reboot = c.HTTP.Permits(r.Context(), "bulk-device-commands")
	if c.HTTP.Permits(r.Context(), "add-group-devices") && c.HTTP.Permits(r.Context(), "list-groups") {
		b.Groups, _, _, err = c.Groups.List(r.Context(), groups.ListFilter{Type: "static", OrgID: c.currentOrg(r)},
			store.Page{Limit: maxRunnableScripts})
	}
	return b, err
}

// deviceBulkOutcome is the notice of a bulk action: how many devices took it, and why the
// others did not.
type deviceBulkOutcome struct {
	What    string
	Done    int
	Reasons []string
}

// deviceBulk runs a script on, reboots, or adds to a static group the selected devices; the
// list then refreshes itself.
func (c *Console) deviceBulk(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return apperr.Invalid("form", "the form could not be read")
	}
	ids := r.PostForm["ids"]
	if len(ids) == 0 {
		return apperr.Invalid("ids", "select the devices first")
	}
	if len(ids) > maxBulkDevices {
		return apperr.Invalid("ids", "select at most 500 devices at a time")
	}
	ctx := r.Context()
	var out deviceBulkOutcome
	note := func(items []devices.BulkItem) {
		for _, it := range items {
			out.Reasons = append(out.Reasons, it.Reason)
		}
	}
	switch r.PostForm.Get("action") {
	case "run-script":
		if err := c.allow(ctx, "execute-script"); err != nil {
			return err
		}
		script := r.PostForm.Get("script")
		if script == "" {
			return apperr.Invalid("script", "choose the script to run")
		}
		res, err := c.Scripts.Execute(ctx, script, scripts.ScriptRun{DeviceIDs: ids})
		if err != nil {
			return err
		}
		out.What, out.Done = "the script started", len(res.Executions)
		note(res.Skipped)
		note(res.Failed)
	case "reboot":
		if err := c.allow(ctx, "bulk-device-commands"); err != nil {
			return err
		}
		res, err := c.Devices.SendBulk(ctx, devices.BulkInput{DeviceIDs: ids, CommandInput: devices.CommandInput{Type: agentproto.CommandReboot}})
		if err != nil {
			return err
		}
		out.What, out.Done = "a reboot is on its way", len(res.Commands)
		note(res.Skipped)
		note(res.Failed)
	case "add-to-group":
		if err := c.allow(ctx, "add-group-devices"); err != nil {
			return err
		}
		group := r.PostForm.Get("group")
		if group == "" {
			return apperr.Invalid("group", "choose the group")
		}
		res, err := c.Groups.AddDevices(ctx, group, ids)
		if err != nil {
			return err
		}
		out.What, out.Done = "added to the group", len(res.Added)
		for _, it := range append(res.Skipped, res.Failed...) {
			out.Reasons = append(out.Reasons, it.Reason)
		}
	default:
		return apperr.Invalid("action", "run a script, reboot, or add to a group")
	}
	toNotice(w)
	return c.render(w, r, http.StatusOK, "devices", "bulk-outcome", view{Data: out})
}
