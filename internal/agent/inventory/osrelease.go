package inventory

import (
	"bufio"
	"strings"
)

// parseOSRelease reads the KEY=value lines of an os-release(5) file. Values may be quoted
// shell-style; comments and malformed lines are skipped.
func parseOSRelease(content string) map[string]string {
	fields := map[string]string{}
	scanner := bufio.NewScanner(strings.NewReader(content))
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || key == "" {
			continue
		}
		fields[key] = unquoteShell(value)
	}
	return fields
}

// unquoteShell strips one pair of matching quotes and the backslash escapes os-release allows
// inside double quotes (\" \\ \$ \`).
func unquoteShell(value string) string {
	if len(value) < 2 || (value[0] != '"' && value[0] != '\'') || value[len(value)-1] != value[0] {
		return value
	}
	quote, inner := value[0], value[1:len(value)-1]
	if quote == '\'' {
		return inner
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		if inner[i] == '\\' && i+1 < len(inner) && strings.IndexByte("\"\\$`", inner[i+1]) >= 0 {
			i++
		}
		b.WriteByte(inner[i])
	}
	return b.String()
}

// releaseFromOSRelease picks the name, version, build, pretty name and codename out of
// os-release fields.
func releaseFromOSRelease(fields map[string]string) release {
	name := fields["NAME"]
	if name == "" {
		name = fields["PRETTY_NAME"]
	}
	if name == "" {
		name = "Linux" // os-release(5) names this as the default
	}
	return release{name: name, version: fields["VERSION_ID"], build: fields["BUILD_ID"],
		prettyName: fields["PRETTY_NAME"], codename: fields["VERSION_CODENAME"]}
}
