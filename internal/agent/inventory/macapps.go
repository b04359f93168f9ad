package inventory

import (
	"encoding/json"
	"strings"

	"gale/internal/wire/agentproto"
)

// systemProfilerApps is the part of `system_profiler -json SPApplicationsDataType` we read.
type systemProfilerApps struct {
	Applications []struct {
		Name         string   `json:"_name"`
		Version      string   `json:"version"`
		Path         string   `json:"path"`
		ArchKind     string   `json:"arch_kind"`
		ObtainedFrom string   `json:"obtained_from"`
		SignedBy     []string `json:"signed_by"`
	} `json:"SPApplicationsDataType"`
}

// macArchitectures maps system_profiler's arch_kind to the names users know.
var macArchitectures = map[string]string{
	"arch_arm":     "arm64",
	"arch_i64":     "x86_64",
	"arch_arm_i64": "universal",
}

// parseSystemProfilerApps turns system_profiler's application list into software entries. It
// keeps applications installed in an Applications folder; system_profiler also lists helper
// apps nested in bundles and system internals, which are not software a user installed.
func parseSystemProfilerApps(output []byte) ([]agentproto.Software, error) {
	var doc systemProfilerApps
	if err := json.Unmarshal(output, &doc); err != nil {
		return nil, err
	}
	software := []agentproto.Software{}
	for _, app := range doc.Applications {
		if app.Name == "" || !strings.Contains(app.Path, "/Applications/") ||
			strings.Contains(app.Path, ".app/") {
			continue
		}
		software = append(software, agentproto.Software{
			Name:         app.Name,
			Version:      app.Version,
			Publisher:    macPublisher(app.ObtainedFrom, app.SignedBy),
			Architecture: macArchitectures[app.ArchKind],
			Source:       "app",
		})
	}
	return software, nil
}

// macPublisher names who signed an app: Apple for its own, otherwise the developer in the
// Developer ID certificate ("Developer ID Application: Google LLC (EQHXZ8M8AV)").
func macPublisher(obtainedFrom string, signedBy []string) string {
	if obtainedFrom == "apple" {
		return "Apple"
	}
	if len(signedBy) == 0 {
		return ""
	}
	developer, ok := strings.CutPrefix(signedBy[0], "Developer ID Application: ")
	if !ok {
		return ""
	}
	if i := strings.LastIndex(developer, " ("); i > 0 {
		developer = developer[:i]
	}
	return developer
}
