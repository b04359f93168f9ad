package scripts

import (
	"os/exec"
	"strings"
	"testing"
)

// Every shell script shipped in the library and the templates parses: the shell reads it
// without running it (-n).
func TestLibraryShellScriptsParse(t *testing.T) {
	for _, l := range append(append([]LibraryScript{}, SystemLibrary()...), Templates()...) {
		shell := map[string]string{LangSh: "sh", LangBash: "bash"}[l.Language]
		if shell == "" {
			continue
		}
		cmd := exec.Command(shell, "-n")
		cmd.Stdin = strings.NewReader(l.Content)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s (%s): %v\n%s", l.ID, shell, err, out)
		}
	}
}
