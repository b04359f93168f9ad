package devices

import (
	"encoding/json"
	"slices"
	"strings"

	"gale/internal/platform/apperr"
	"gale/internal/platform/jsonenc"
	"gale/internal/wire/agentproto"
)

// builtInCommandKinds are the command kinds every agent has had from the start, handled like
// any other domain's: an inventory refresh, a script, a reboot and a shutdown.
func builtInCommandKinds() []CommandKind {
	kinds := []CommandKind{
		{Name: agentproto.CommandRefreshInventory, DefaultTimeout: 300},
		{Name: agentproto.CommandRunScript, DefaultTimeout: 300, Validate: validateRunScript, CancelSent: CancelStops,
			PayloadDoc: "{language: bash|sh|python|powershell|cmd, script, args?, env?, maxOutputBytes?}."},
	}
	// A reboot is completed once the machine is back and its agent reports, so its timeout
	// counts the delay and then the time to go down and come back.
	for _, name := range []string{agentproto.CommandReboot, agentproto.CommandShutdown} {
		kinds = append(kinds, CommandKind{Name: name, DefaultTimeout: powerAllowance, Validate: validatePowerDelay, CancelSent: CancelConfirmed,
			Wait: func(payload any) int { return payload.(agentproto.PowerDelay).DelaySeconds }, PayloadDoc: "{delaySeconds?}."})
	}
	return kinds
}

// powerAllowance is the default time, in seconds, a reboot may take from its due time until
// the agent is back to report it (the timeout's part after the delay).
const powerAllowance = 600

const maxScriptBytes = 256 << 10

func validateRunScript(raw json.RawMessage, osType string) (any, error) {
	var rs agentproto.RunScript
	if err := jsonenc.DecodeStrictRequired(raw, &rs); err != nil {
		return nil, apperr.Invalid("payload", "run_script needs {language, script, args?, env?, maxOutputBytes?}: "+err.Error())
	}
	if err := validateScript(&rs, osType); err != nil {
		return nil, err
	}
	return rs, nil
}

func validatePowerDelay(raw json.RawMessage, _ string) (any, error) {
	var pd agentproto.PowerDelay
	if len(raw) > 0 {
		if err := jsonenc.DecodeStrict(raw, &pd); err != nil {
			return nil, apperr.Invalid("payload", "reboot and shutdown take {delaySeconds?}: "+err.Error())
		}
	}
	if pd.DelaySeconds < 0 || pd.DelaySeconds > 3600 {
		return nil, apperr.Invalid("payload.delaySeconds", "delaySeconds must be 0 to 3600")
	}
	return pd, nil
}

func validateScript(rs *agentproto.RunScript, osType string) error {
	if strings.TrimSpace(rs.Script) == "" {
		return apperr.Invalid("payload.script", "script is empty")
	}
	if len(rs.Script) > maxScriptBytes {
		return apperr.Invalid("payload.script", "script is larger than 256 KiB")
	}
	langs := agentproto.ScriptLanguages[osType]
	if langs == nil {
		langs = agentproto.ScriptLanguages[agentproto.OSLinux]
	}
	if !slices.Contains(langs, rs.Language) {
		return apperr.Invalid("payload.language", "on "+osOrUnknown(osType)+" the language must be one of "+strings.Join(langs, ", "))
	}
	if rs.MaxOutputBytes == 0 {
		rs.MaxOutputBytes = DefaultOutputBytes
	}
	if rs.MaxOutputBytes < 0 || rs.MaxOutputBytes > DefaultOutputBytes {
		return apperr.Invalid("payload.maxOutputBytes", "maxOutputBytes must be 1 to 1048576")
	}
	for k := range rs.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return apperr.Invalid("payload.env", "environment variable names cannot be empty or contain = or NUL")
		}
	}
	return nil
}

func osOrUnknown(os string) string {
	if os == "" {
		return "a device whose OS is not known yet"
	}
	return os
}
