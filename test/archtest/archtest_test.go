// Package archtest holds the tests of the architecture's rules that no single package can
// check: a domain's tables are queried only by that domain (others call its service or use
// the SQL fragments it exports), the agent binary carries no server code, and nothing but the
// binaries and the test harness imports the wiring package.
//
// It also guards the server's code (internal/app, internal/platform, internal/domains,
// cmd/gale) against the patterns the project is removing: hand-written row loops, pagers and
// reads by ID beside the store's helpers, time.Now beside the injectable clock, calls of
// another domain's functions that take a database handle, and imports against the layers
// (a domain imports only domains before it in Modules; platform packages import no domain;
// wire packages only the standard library). Each guard parses the code with go/parser and
// compares what it finds with a shrink-only list of what remains, per package.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from the test's directory: %v", err)
	}
	return root
}

// goPackage is the part of `go list -json` these tests read.
type goPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

func goList(t *testing.T, root string, env []string, args ...string) []goPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// agentPackages are the module's packages the agent binary may contain.
var agentPackages = []string{"gale/cmd/gale-agent", "gale/internal/agent", "gale/internal/wire/agentproto", "gale/internal/wire/pkgversion",
	"gale/internal/wire/streams"}

// agentLibraries are the third-party modules the agent may use (gopsutil brings the OS
// helpers); server libraries (huma, pgx, River, SQLite, S3) must never appear.
var agentLibraries = []string{
	"github.com/coder/websocket",
	"github.com/kardianos/service",
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"github.com/inconshreveable/mousetrap",
	"github.com/shirou/gopsutil/v4",
	"github.com/tklauser/go-sysconf",
	"github.com/tklauser/numcpus",
	"github.com/ebitengine/purego",
	"github.com/go-ole/go-ole",
	"github.com/yusufpapurcu/wmi",
	"github.com/lufia/plan9stats",
	"github.com/power-devops/perfstat",
	"golang.org/x/sys",
	// The terminal's PTY, and the remote desktop's WebRTC peer with what it brings.
	"github.com/creack/pty",
	"github.com/pion",
	"github.com/wlynxg/anet",
	"github.com/google/uuid",
	"golang.org/x/crypto",
	"golang.org/x/net",
	"golang.org/x/time",
	// Debian's and RPM's version ordering, for patches.
	"github.com/knqyf263/go-deb-version",
	"github.com/knqyf263/go-rpm-version",
	// SNMP polling on the server's behalf.
	"github.com/gosnmp/gosnmp",
}

// within reports whether importPath is one of prefixes or below one.
func within(importPath string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return importPath == p || strings.HasPrefix(importPath, p+"/") })
}

func TestAgentImportsNoServerCode(t *testing.T) {
	root := moduleRoot(t)
	for _, goos := range []string{"linux", "windows", "darwin"} {
		for _, p := range goList(t, root, []string{"GOOS=" + goos}, "-deps", "./cmd/gale-agent") {
			if p.Standard || within(p.ImportPath, agentPackages) || within(p.ImportPath, agentLibraries) {
				continue
			}
			t.Errorf("gale-agent (%s) depends on %s; the agent carries no server code or libraries", goos, p.ImportPath)
		}
	}
}

func TestOnlyBinariesAndTheHarnessImportApp(t *testing.T) {
	root := moduleRoot(t)
	for _, p := range goList(t, root, nil, "./internal/...") {
		if p.ImportPath == "gale/internal/testkit/apptest" || p.ImportPath == "gale/internal/app" {
			continue
		}
		if slices.Contains(p.Imports, "gale/internal/app") {
			t.Errorf("%s imports gale/internal/app; only cmd/* and internal/testkit/apptest wire the application", p.ImportPath)
		}
	}
}
