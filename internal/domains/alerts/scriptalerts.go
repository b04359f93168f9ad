package alerts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// The events of script results (recorded by the scripts domain) that open and resolve script
// alerts.
const (
	eventScriptFailed    = "script.failed"
	eventScriptCompleted = "script.completed"
)

// scriptResult is what a script result event carries.
type scriptResult struct {
	ExecutionID string  `json:"executionId"`
	ScriptID    string  `json:"scriptId"`
	ScriptName  string  `json:"scriptName"`
	DeviceID    string  `json:"deviceId"`
	ExitCode    *int    `json:"exitCode"`
	Severity    *string `json:"severity"`
	Error       string  `json:"error"`
}

// ScriptResults is the consumer that turns script results into alerts: a failure whose exit
// code the script maps to a severity opens an alert of that severity on the device (one open
// alert per script and device, however often it fails), and the script's next success on the
// device resolves it. Failures the mapping does not name open none.
func (s *Service) ScriptResults() events.Consumer {
	return events.Consumer{Name: "alerts-script-results", Types: []string{eventScriptFailed, eventScriptCompleted},
		Handle: s.scriptResult}
}

func (s *Service) scriptResult(ctx context.Context, tx *sql.Tx, e events.Event) error {
	var r scriptResult
	if err := json.Unmarshal(e.Data, &r); err != nil || r.ScriptID == "" || r.DeviceID == "" {
		return nil
	}
	key := "script:" + r.ScriptID + ":" + r.DeviceID
	if e.Type == eventScriptCompleted {
		var a store.Args
		return resolveOpen(ctx, tx, s.clock.Now(), "the script succeeded", &a, "source_key = "+a.Add(key))
	}
	if r.Severity == nil || !slices.Contains(severities, *r.Severity) {
		return nil
	}
	exit := "no exit code"
	if r.ExitCode != nil {
		exit = fmt.Sprintf("exit code %d", *r.ExitCode)
	}
	msg := "The script " + r.ScriptName + " failed with " + exit
	if r.Error = strings.TrimSpace(r.Error); r.Error != "" {
		msg += ": " + r.Error
	}
	_, _, err := s.raise(ctx, tx, access.SystemScope(), Raised{DeviceID: r.DeviceID, Severity: *r.Severity,
		Title: "Script " + r.ScriptName + " failed", Message: msg,
		Context: map[string]any{"source": "script", "scriptId": r.ScriptID, "executionId": r.ExecutionID, "exitCode": r.ExitCode}},
		key, systemActor)
	if apperr.IsCode(err, apperr.CodeNotFound) || errors.Is(err, ErrHeld) {
		return nil // the device left since, or is in a maintenance window (its next failure raises again)
	}
	return err
}
