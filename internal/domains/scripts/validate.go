package scripts

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

var (
	osTypes    = []string{OSWindows, OSMacOS, OSLinux}
	languages  = []string{LangBash, LangSh, LangPython, LangPowerShell, LangCmd}
	runAses    = []string{RunAsSystem, RunAsUser, RunAsElevated}
	paramTypes = []string{ParamString, ParamNumber, ParamBoolean, ParamSelect}
	severities = []string{"critical", "high", "medium", "low", "info"}

	paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// reservedParam tells whether a parameter name would replace an environment variable the
// script's interpreter or the system relies on.
func reservedParam(name string) bool {
	u := strings.ToUpper(name)
	switch u {
	case "PATH", "HOME", "SHELL", "USER", "LOGNAME", "IFS", "ENV", "BASH_ENV", "PS4", "PYTHONPATH", "PYTHONSTARTUP",
		"PATHEXT", "COMSPEC", "SYSTEMROOT", "WINDIR", "TEMP", "TMP", "PSMODULEPATH":
		return true
	}
	return strings.HasPrefix(u, "LD_") || strings.HasPrefix(u, "DYLD_") || strings.HasPrefix(u, "GALE_")
}

// definition is a script's content and how it runs, validated.
type definition struct {
	Name        string
	Description string
	OSTypes     []string
	Language    string
	Content     string
	Parameters  []ScriptParameter
	Timeout     int
	RunAs       string
	Mapping     map[string]*string
}

// validateDefinition checks the fields of a script and returns them normalized; every
// problem is reported, by field.
func validateDefinition(in ScriptInput) (definition, error) {
	var details []apperr.Detail
	bad := func(field, msg string) { details = append(details, apperr.Detail{Field: field, Message: msg}) }
	d := definition{Name: strings.TrimSpace(in.Name), Description: strings.TrimSpace(in.Description), Language: in.Language,
		Content: in.Content, Timeout: in.TimeoutSeconds, RunAs: in.RunAs, Mapping: in.ExitCodeSeverityMapping}
	switch {
	case d.Name == "":
		bad("name", "name is required")
	case utf8.RuneCountInString(d.Name) > MaxNameLen:
		bad("name", "name is longer than 255 characters")
	}
	if utf8.RuneCountInString(d.Description) > MaxDescriptionLen {
		bad("description", "description is longer than 4000 characters")
	}
	if len(in.OSTypes) == 0 {
		bad("osTypes", "name at least one of windows, macos, linux")
	}
	for _, o := range in.OSTypes {
		if !slices.Contains(osTypes, o) {
			bad("osTypes", fmt.Sprintf("%q is not one of windows, macos, linux", o))
		} else if !slices.Contains(d.OSTypes, o) {
			d.OSTypes = append(d.OSTypes, o)
		}
	}
	slices.Sort(d.OSTypes)
	if !slices.Contains(languages, d.Language) {
		bad("language", "language must be one of "+strings.Join(languages, ", "))
	} else {
		for _, o := range d.OSTypes {
			if !slices.Contains(agentproto.ScriptLanguages[o], d.Language) {
				bad("language", d.Language+" does not run on "+o+" (there: "+strings.Join(agentproto.ScriptLanguages[o], ", ")+")")
			}
		}
	}
	switch {
	case strings.TrimSpace(d.Content) == "":
		bad("content", "content is empty")
	case len(d.Content) > MaxContentBytes:
		bad("content", "content is larger than 256 KB")
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultTimeout
	}
	if d.Timeout < 1 || d.Timeout > MaxTimeout {
		bad("timeoutSeconds", "timeoutSeconds must be 1 to 3600")
	}
	if d.RunAs == "" {
		d.RunAs = RunAsSystem
	}
	if !slices.Contains(runAses, d.RunAs) {
		bad("runAs", "runAs must be one of system, user, elevated")
	}
	var err error
	if d.Parameters, err = validateParameters(in.Parameters); err != nil {
		details = append(details, err.(*apperr.Error).Details...)
	}
	if err := validateMapping(d.Mapping); err != nil {
		bad("exitCodeSeverityMapping", err.Error())
	}
	if len(details) > 0 {
		return definition{}, apperr.InvalidFields(details)
	}
	if len(d.Mapping) == 0 {
		d.Mapping = nil
	}
	return d, nil
}

func validateParameters(in []ScriptParameter) ([]ScriptParameter, error) {
	var details []apperr.Detail
	bad := func(i int, field, msg string) {
		details = append(details, apperr.Detail{Field: fmt.Sprintf("parameters[%d].%s", i, field), Message: msg})
	}
	if len(in) > MaxParameters {
		return nil, apperr.InvalidFields([]apperr.Detail{{Field: "parameters", Message: "at most 64 parameters"}})
	}
	out := make([]ScriptParameter, 0, len(in))
	seen := map[string]bool{}
	for i, p := range in {
		switch {
		case !paramName.MatchString(p.Name):
			bad(i, "name", "a parameter name is an environment variable name: letters, digits and _, not starting with a digit, at most 64")
		case reservedParam(p.Name):
			bad(i, "name", p.Name+" would replace an environment variable the system relies on")
		case seen[strings.ToUpper(p.Name)]:
			bad(i, "name", "two parameters are named "+p.Name)
		}
		seen[strings.ToUpper(p.Name)] = true
		if !slices.Contains(paramTypes, p.Type) {
			bad(i, "type", "type must be one of string, number, boolean, select")
			continue
		}
		if p.Type == ParamSelect {
			if len(p.Options) == 0 || len(p.Options) > maxOptions {
				bad(i, "options", "a select parameter has 1 to 100 options")
			}
			for _, o := range p.Options {
				if o == "" || len(o) > 200 {
					bad(i, "options", "an option is 1 to 200 characters")
					break
				}
			}
		} else if len(p.Options) > 0 {
			bad(i, "options", "only select parameters have options")
		}
		if p.DefaultValue != nil {
			v, err := paramValue(p, p.DefaultValue)
			if err != nil {
				bad(i, "defaultValue", err.Error())
			} else {
				p.DefaultValue = typedDefault(p.Type, v)
			}
		}
		out = append(out, p)
	}
	if len(details) > 0 {
		return nil, apperr.InvalidFields(details)
	}
	return out, nil
}

// typedDefault is a default value as its type shows in JSON.
func typedDefault(typ, v string) any {
	switch typ {
	case ParamNumber:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	case ParamBoolean:
		return v == "true"
	}
	return v
}

// paramValue checks a value given for p and returns it as the script sees it (text).
func paramValue(p ScriptParameter, v any) (string, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		s = x.String()
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "", fmt.Errorf("%s takes a string, a number or a boolean", p.Name)
	}
	if len(s) > maxParamValueLen {
		return "", fmt.Errorf("%s is longer than %d bytes", p.Name, maxParamValueLen)
	}
	switch p.Type {
	case ParamNumber:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", fmt.Errorf("%s takes a number", p.Name)
		}
	case ParamBoolean:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return "", fmt.Errorf("%s takes true or false", p.Name)
		}
		s = strconv.FormatBool(b)
	case ParamSelect:
		if !slices.Contains(p.Options, s) {
			return "", fmt.Errorf("%s takes one of %s", p.Name, strings.Join(p.Options, ", "))
		}
	}
	return s, nil
}

// validateMapping checks an exit-code mapping: keys are exit codes or "default", values a
// severity or null (success). A mapping that makes every exit code a success is refused: it
// would hide every failure.
func validateMapping(m map[string]*string) error {
	if len(m) == 0 {
		return nil
	}
	if len(m) > 256 {
		return fmt.Errorf("at most 256 entries")
	}
	allNull := true
	for k, v := range m {
		if k != "default" {
			if _, err := strconv.ParseInt(k, 10, 32); err != nil {
				return fmt.Errorf("%q is not an exit code or \"default\"", k)
			}
		}
		if v != nil {
			allNull = false
			if !slices.Contains(severities, *v) {
				return fmt.Errorf("%q maps to %q, not one of %s or null", k, *v, strings.Join(severities, ", "))
			}
		}
	}
	if d, ok := m["default"]; allNull && ok && d == nil {
		return fmt.Errorf("a mapping that sends every exit code to null (success) would hide every failure")
	}
	return nil
}

// outcome reads an exit code with a mapping: completed or failed, and the severity the
// mapping gives a failure. A code the mapping names (or its default) is a success when mapped
// to null and a failure of that severity otherwise; without either, 0 is a success and
// anything else a failure without a severity (it raises no alert).
func outcome(m map[string]*string, exit int) (status string, severity *string) {
	v, ok := m[strconv.Itoa(exit)]
	if !ok {
		v, ok = m["default"]
	}
	switch {
	case !ok && exit == 0, ok && v == nil:
		return StatusCompleted, nil
	case !ok:
		return StatusFailed, nil
	}
	sev := *v
	return StatusFailed, &sev
}
