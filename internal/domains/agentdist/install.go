package agentdist

import (
	_ "embed"
	"strings"
)

//go:embed install.sh
var installTemplate string

// renderInstallScript fills the server's public address into the install script. The address
// comes from the configuration, never from the request, so a forged Host header cannot point
// endpoints elsewhere.
func renderInstallScript(publicURL string) []byte {
	publicURL = strings.TrimRight(publicURL, "/")
	// The comment line must stay one line whatever the configuration holds.
	display := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, publicURL)
	return []byte(strings.NewReplacer("@SERVER_DISPLAY@", display, "@SERVER@", shellQuote(publicURL)).Replace(installTemplate))
}

// shellQuote quotes s as one POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// InstallScript is the install script served at /agents/install.sh.
func (s *Service) InstallScript() []byte { return s.install }
