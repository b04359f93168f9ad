package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// maxRunnableScripts bounds the scripts a device page offers; the library page finds others.
const maxRunnableScripts = 200

// runnableScripts are the scripts in scope for a device's operating system.
func (c *Console) runnableScripts(r *http.Request, osType string) ([]scripts.Script, error) {
	if !c.HTTP.Permits(r.Context(), "execute-script") || !c.HTTP.Permits(r.Context(), "list-scripts") {
		return nil, nil
	}
	list, _, _, err := c.Scripts.List(r.Context(), scripts.ListFilter{OSType: osType}, store.Page{Limit: maxRunnableScripts})
	return list, err
}

// runOutput is the panel that shows a command's output as it arrives.
type runOutput struct {
	DeviceID, CommandID, Script string
}

// runScript runs a script of the library on the device and answers the panel that streams
// its output.
func (c *Console) runScript(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "execute-script"); err != nil {
		return err
	}
	deviceID, scriptID := r.PathValue("id"), r.PostFormValue("script")
	if scriptID == "" {
		return apperr.Invalid("script", "choose a script to run")
	}
	res, err := c.Scripts.Execute(r.Context(), scriptID, scripts.ScriptRun{DeviceIDs: []string{deviceID}})
	if err != nil {
		return err
	}
	if len(res.Executions) == 0 {
		reason := "the device cannot run this script"
		for _, s := range append(res.Skipped, res.Failed...) {
			reason = s.Reason
		}
		return apperr.Invalid("script", reason)
	}
	x := res.Executions[0]
	return c.render(w, r, http.StatusOK, "device", "run-output", view{Data: runOutput{DeviceID: deviceID, CommandID: x.CommandID,
		Script: x.ScriptName}})
}

// outputPoll is how often a stream looks for more output of a running command.
const outputPoll = 300 * time.Millisecond

// outputStream streams a command's output as server-sent events: "output" events carry
// what each stream printed since the last, "done" its end.
func (c *Console) outputStream(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "get-device-command"); err != nil {
		return err
	}
	deviceID, commandID := r.PathValue("id"), r.PathValue("command")
	cmd, err := c.Devices.GetCommand(r.Context(), deviceID, commandID)
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("the response cannot stream")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	var sentOut, sentErr int
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	tick := time.NewTicker(outputPoll)
	defer tick.Stop()
	for {
		sentOut = sendNew(send, "stdout", cmd.Stdout, cmd.StdoutEncoding, sentOut)
		sentErr = sendNew(send, "stderr", cmd.Stderr, cmd.StderrEncoding, sentErr)
		if final(cmd.Status) {
			send("done", map[string]any{"status": cmd.Status, "exitCode": cmd.ExitCode, "error": cmd.Error})
			flusher.Flush()
			return nil
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
		if cmd, err = c.Devices.GetCommand(r.Context(), deviceID, commandID); err != nil {
			return nil
		}
	}
}

// sendNew sends what a stream holds beyond the sent bytes and returns how many are sent.
// The final result replaces the live output: where it is not a continuation (bytes that are
// not text, encoded), the page is told to show it whole.
func sendNew(send func(string, any), stream string, text *string, encoding string, sent int) int {
	if text == nil || len(*text) == sent {
		return sent
	}
	if encoding != "" {
		send("output", map[string]any{"stream": stream, "text": "[output is not text: " + encoding + " in the command's result]", "replace": true})
		return len(*text)
	}
	if len(*text) < sent {
		send("output", map[string]any{"stream": stream, "text": *text, "replace": true})
		return len(*text)
	}
	send("output", map[string]any{"stream": stream, "text": (*text)[sent:]})
	return len(*text)
}

func final(status string) bool {
	switch status {
	case devices.CommandQueued, devices.CommandSent:
		return false
	}
	return true
}
