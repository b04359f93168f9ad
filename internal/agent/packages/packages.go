// Package packages is the agent's package management: it lists the updates the system's
// package manager offers (patch_scan), installs or rolls back given versions
// (patch_install), installs a downloaded package file after checking its SHA-256
// (software_install) and removes a package (software_uninstall). It drives apt/dpkg on
// Debian-like systems and dnf/rpm on RPM-based ones; other systems answer that they are not
// supported.
package packages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// Options configure the package commands.
type Options struct {
	// Root is the system root the package manager works on; "" or "/" is the running
	// system. Another root keeps every read and write of apt and dpkg inside it.
	Root string
	// Fetch downloads a software_install file; nil is a plain HTTP(S) client.
	Fetch  func(ctx context.Context, url string) (io.ReadCloser, error)
	Logger *slog.Logger
	// WorkDir is where downloads land while they are checked and installed; default
	// os.TempDir().
	WorkDir string
}

// Manager serves the package commands.
type Manager struct {
	o Options
	// turn lets one package command run at a time: two would fight over the package
	// manager's lock.
	turn chan struct{}
}

// New returns a Manager with o's defaults filled in.
func New(o Options) *Manager {
	if o.Root == "" {
		o.Root = "/"
	}
	o.Root = filepath.Clean(o.Root)
	if o.Fetch == nil {
		o.Fetch = httpFetch
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WorkDir == "" {
		o.WorkDir = os.TempDir()
	}
	// An absolute work directory makes every downloaded file's path absolute: apt takes it
	// for a file, and no program reads it as an option.
	if abs, err := filepath.Abs(o.WorkDir); err == nil {
		o.WorkDir = abs
	}
	return &Manager{o: o, turn: make(chan struct{}, 1)}
}

// Register registers the package command kinds with reg.
func (m *Manager) Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandPatchScan, m.command(m.patchScan))
	reg.Command(agentproto.CommandPatchInstall, m.command(m.patchInstall))
	reg.Command(agentproto.CommandSoftwareInstall, m.command(m.softwareInstall))
	reg.Command(agentproto.CommandSoftwareUninstall, m.command(m.softwareUninstall))
	reg.Command(agentproto.CommandPackageChangelog, m.command(m.packageChangelog))
}

// backend is one package manager, set up for one command.
type backend interface {
	manager() string
	validName(name string) bool
	scan(ctx context.Context, refresh bool) (agentproto.PatchScanResult, error)
	// installed returns what the system has of the named packages; a package not installed
	// is absent from the map.
	installed(ctx context.Context, names []string) (map[string]installedPkg, error)
	install(ctx context.Context, pkgs []agentproto.PackageVersion, rollback bool) error
	fileType() string
	// fileInfo returns the package name and version a package file holds.
	fileInfo(ctx context.Context, path string) (name, version string, err error)
	installFile(ctx context.Context, path string) error
	// removalRefused returns why removing name must not happen ("" when it may).
	removalRefused(ctx context.Context, name string) (string, error)
	remove(ctx context.Context, name string) error
	reboot(ctx context.Context) (bool, []string)
	close()
}

type installedPkg struct {
	version   string
	essential bool
}

// errNoManager is the failure of a Linux system with neither apt nor dnf.
var errNoManager = errors.New("no supported package manager: apt or dnf")

// handler is one command's work: its result (kept even when it failed) and its failure.
type handler func(ctx context.Context, b backend, payload json.RawMessage) (result any, err error)

// command wraps a handler: it picks the package manager, and turns the outcome, the output
// the programs printed and a timeout into the command's result.
func (m *Manager) command(h handler) capability.CommandHandler {
	return func(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
		if runtime.GOOS != "linux" {
			return agentproto.CommandResult{Status: agentproto.ResultFailed,
				Error: "package management is not supported on this system (" + runtime.GOOS + ")"}
		}
		select {
		case m.turn <- struct{}{}:
			defer func() { <-m.turn }()
		case <-ctx.Done():
			return agentproto.CommandResult{Status: agentproto.ResultTimedOut,
				Error: "the command waited for another package command past its timeout and did not start"}
		}
		r := newRunner(nil)
		b, err := m.open(r)
		var result any
		if err == nil {
			result, err = h(ctx, b, c.Payload)
			b.close()
		}
		res := agentproto.CommandResult{Status: agentproto.ResultCompleted,
			Stdout: r.stdout.String(), Stderr: r.stderr.String(), Truncated: r.stdout.truncated || r.stderr.truncated}
		if result != nil {
			res.Result, _ = json.Marshal(result)
		}
		switch {
		case ctx.Err() == context.DeadlineExceeded:
			res.Status, res.Error = agentproto.ResultTimedOut, "the package manager ran past the command's timeout and was stopped"
		case err != nil:
			res.Status, res.Error = agentproto.ResultFailed, err.Error()
		}
		if err != nil {
			m.o.Logger.Warn("package command failed", "command", c.Type, "id", c.ID, "error", res.Error)
		}
		return res
	}
}

// open picks the system's package manager: apt when apt-get, dpkg and the root's dpkg
// database exist, else dnf.
func (m *Manager) open(r *runner) (backend, error) {
	_, errApt := exec.LookPath("apt-get")
	_, errDpkg := exec.LookPath("dpkg")
	_, errStatus := os.Stat(filepath.Join(m.o.Root, "var/lib/dpkg/status"))
	if errApt == nil && errDpkg == nil && errStatus == nil {
		return newApt(m.o.Root, m.o.WorkDir, r)
	}
	if _, err := exec.LookPath("dnf"); err == nil {
		return newDnf(m.o.Root, r), nil
	}
	return nil, errNoManager
}

func decode(payload json.RawMessage, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("the payload is unreadable: %v", err)
	}
	return nil
}

func (m *Manager) patchScan(ctx context.Context, b backend, payload json.RawMessage) (any, error) {
	var p agentproto.PatchScan
	if len(payload) > 0 {
		if err := decode(payload, &p); err != nil {
			return nil, err
		}
	}
	res, err := b.scan(ctx, p.Refresh)
	if err != nil {
		return nil, err
	}
	res.Manager = b.manager()
	if res.Updates == nil {
		res.Updates = []agentproto.PackageUpdate{}
	}
	res.RebootRequired, res.RebootPackages = b.reboot(ctx)
	return res, nil
}

// maxPatchPackages is the most packages one patch_install takes.
const maxPatchPackages = 500

// maxInstallers bounds the third-party installers of one patch install.
const maxInstallers = 50

func (m *Manager) patchInstall(ctx context.Context, b backend, payload json.RawMessage) (any, error) {
	var p agentproto.PatchInstall
	if err := decode(payload, &p); err != nil {
		return nil, err
	}
	if n := len(p.Packages) + len(p.Installers); n == 0 || len(p.Packages) > maxPatchPackages || len(p.Installers) > maxInstallers {
		return nil, fmt.Errorf("a patch install takes 1 to %d packages and at most %d installers, not %d and %d", maxPatchPackages,
			maxInstallers, len(p.Packages), len(p.Installers))
	}
	if p.Rollback && len(p.Installers) > 0 {
		return nil, errors.New("a rollback takes no installers")
	}
	res := &agentproto.PatchInstallResult{Manager: b.manager(), Packages: make([]agentproto.PackageOutcome, len(p.Packages))}
	// Everything is checked before anything runs: a name or version the package manager
	// could read as an option never reaches it.
	var bad []string
	seen := map[string]bool{}
	for i, pv := range p.Packages {
		res.Packages[i] = agentproto.PackageOutcome{Name: pv.Name, Version: pv.Version}
		switch {
		case !b.validName(pv.Name):
			res.Packages[i].Error = fmt.Sprintf("%q is not a valid package name", pv.Name)
		case !pkgversion.Valid(b.manager(), pv.Version):
			res.Packages[i].Error = fmt.Sprintf("%q is not a valid version", pv.Version)
		case seen[pv.Name]:
			res.Packages[i].Error = "the package is named twice"
		}
		seen[pv.Name] = true
		if res.Packages[i].Error != "" {
			bad = append(bad, res.Packages[i].Error)
		}
	}
	if len(bad) > 0 {
		for i := range res.Packages {
			res.Packages[i].Status = agentproto.PackageFailed
			if res.Packages[i].Error == "" {
				res.Packages[i].Error = "not attempted: the request holds an invalid package"
			}
		}
		return res, fmt.Errorf("the request was refused, nothing was installed: %s", strings.Join(bad, "; "))
	}

	if len(p.Packages) > 0 {
		if err := m.installVersions(ctx, b, p, res); err != nil {
			return res, err
		}
	}
	for _, in := range p.Installers {
		res.Packages = append(res.Packages, m.installerOutcome(ctx, b, in))
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	res.RebootRequired, _ = b.reboot(ctx)
	failed := 0
	for _, o := range res.Packages {
		if o.Status == agentproto.PackageFailed {
			failed++
		}
	}
	if failed > 0 {
		return res, fmt.Errorf("%d of %d packages failed", failed, len(res.Packages))
	}
	return res, nil
}

// installerOutcome installs one third-party update from its installer: nothing when the
// version is installed already (skipped).
func (m *Manager) installerOutcome(ctx context.Context, b backend, in agentproto.SoftwareInstall) agentproto.PackageOutcome {
	o := agentproto.PackageOutcome{Name: in.Name, Version: in.Version}
	if b.validName(in.Name) {
		if before, err := b.installed(ctx, []string{in.Name}); err == nil {
			o.PreviousVersion = before[in.Name].version
			if o.PreviousVersion == in.Version {
				o.Status = agentproto.PackageSkipped
				return o
			}
		}
	}
	r, err := m.installFile(ctx, b, in)
	if r != nil && r.PreviousVersion != "" {
		o.PreviousVersion = r.PreviousVersion
	}
	if err != nil {
		o.Status, o.Error = agentproto.PackageFailed, err.Error()
		return o
	}
	o.Status = agentproto.PackageInstalled
	return o
}

// installVersions installs exactly the versions p names from the package manager's
// repositories, filling in their outcomes in res.
func (m *Manager) installVersions(ctx context.Context, b backend, p agentproto.PatchInstall, res *agentproto.PatchInstallResult) error {
	names := make([]string, len(p.Packages))
	for i, pv := range p.Packages {
		names[i] = pv.Name
	}
	before, err := b.installed(ctx, names)
	if err != nil {
		return err
	}
	var todo []int
	for i, pv := range p.Packages {
		o := &res.Packages[i]
		cur, ok := before[pv.Name]
		if !ok {
			o.Status, o.Error = agentproto.PackageFailed, "the package is not installed"
			continue
		}
		o.PreviousVersion = cur.version
		cmp, err := comparePackage(b.manager(), pv.Version, cur.version)
		switch {
		case err != nil:
			o.Status, o.Error = agentproto.PackageFailed, err.Error()
		case cmp == 0:
			o.Status = agentproto.PackageSkipped
		case cmp < 0 && !p.Rollback:
			o.Status, o.Error = agentproto.PackageFailed,
				fmt.Sprintf("version %s is older than the installed %s: going back needs a rollback", pv.Version, cur.version)
		case cmp > 0 && p.Rollback:
			o.Status, o.Error = agentproto.PackageFailed,
				fmt.Sprintf("version %s is not older than the installed %s: a rollback only goes back", pv.Version, cur.version)
		default:
			todo = append(todo, i)
		}
	}
	if len(todo) > 0 {
		batch := make([]agentproto.PackageVersion, len(todo))
		for j, i := range todo {
			batch[j] = p.Packages[i]
		}
		runErr := map[int]error{}
		// One run for all; when it fails, each package alone, so one bad package does not
		// keep the others back.
		if err := b.install(ctx, batch, p.Rollback); err != nil {
			if ctx.Err() != nil {
				return err
			}
			for _, i := range todo {
				runErr[i] = b.install(ctx, p.Packages[i:i+1], p.Rollback)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		after, err := b.installed(ctx, names)
		if err != nil {
			return err
		}
		for _, i := range todo {
			o := &res.Packages[i]
			now := after[o.Name].version
			switch {
			case now == o.Version:
				o.Status = agentproto.PackageInstalled
			case runErr[i] != nil:
				o.Status, o.Error = agentproto.PackageFailed, runErr[i].Error()
			default:
				o.Status, o.Error = agentproto.PackageFailed, fmt.Sprintf("the installed version is %q after the install", now)
			}
		}
	}
	return nil
}

// comparePackage compares a requested version with an installed one.
func comparePackage(manager, want, installed string) (int, error) {
	if want == installed {
		return 0, nil
	}
	return pkgversion.Compare(manager, want, installed)
}

func (m *Manager) softwareInstall(ctx context.Context, b backend, payload json.RawMessage) (any, error) {
	var p agentproto.SoftwareInstall
	if err := decode(payload, &p); err != nil {
		return nil, err
	}
	r, err := m.installFile(ctx, b, p)
	if r == nil {
		return nil, err
	}
	return r, err
}

// installFile downloads a package file, checks its checksum and what it holds, and installs
// it; nothing is installed when a check fails.
func (m *Manager) installFile(ctx context.Context, b backend, p agentproto.SoftwareInstall) (*agentproto.SoftwareInstallResult, error) {
	switch p.FileType {
	case agentproto.FileDeb, agentproto.FileRPM:
		if p.FileType != b.fileType() {
			return nil, fmt.Errorf("a %s file cannot be installed on this system: it uses %s", p.FileType, b.manager())
		}
	case agentproto.FileMSI, agentproto.FileExe, agentproto.FilePkg, agentproto.FileDmg:
		return nil, fmt.Errorf("file type %s cannot be installed on linux", p.FileType)
	default:
		return nil, fmt.Errorf("unknown file type %q", p.FileType)
	}
	if !b.validName(p.Name) {
		return nil, fmt.Errorf("%q is not a valid package name", p.Name)
	}
	if p.Version != "" && !pkgversion.Valid(b.manager(), p.Version) {
		return nil, fmt.Errorf("%q is not a valid version", p.Version)
	}
	path, sum, err := m.download(ctx, p)
	if path != "" {
		defer os.Remove(path)
	}
	if err != nil {
		return nil, err
	}
	name, version, err := b.fileInfo(ctx, path)
	if err != nil {
		return nil, err
	}
	if name != p.Name {
		return nil, fmt.Errorf("the file holds the package %q, not %q: nothing was installed", name, p.Name)
	}
	if p.Version != "" && version != p.Version {
		return nil, fmt.Errorf("the file holds version %s of %s, not %s: nothing was installed", version, name, p.Version)
	}
	before, err := b.installed(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	res := &agentproto.SoftwareInstallResult{Name: name, Version: version, PreviousVersion: before[name].version, SHA256: sum}
	if err := b.installFile(ctx, path); err != nil {
		return res, err
	}
	after, err := b.installed(ctx, []string{name})
	if err != nil {
		return res, err
	}
	if got := after[name].version; got != version {
		return res, fmt.Errorf("after the install the installed version of %s is %q, not %s", name, got, version)
	}
	return res, nil
}

func (m *Manager) softwareUninstall(ctx context.Context, b backend, payload json.RawMessage) (any, error) {
	var p agentproto.SoftwareUninstall
	if err := decode(payload, &p); err != nil {
		return nil, err
	}
	if !b.validName(p.Name) {
		return nil, fmt.Errorf("%q is not a valid package name", p.Name)
	}
	res := &agentproto.SoftwareUninstallResult{Name: p.Name, Version: p.Version, Status: agentproto.PackageFailed}
	if protected(p.Name) {
		return res, fmt.Errorf("%s is protected: the system or its management needs it, it is never removed", p.Name)
	}
	cur, err := b.installed(ctx, []string{p.Name})
	if err != nil {
		return res, err
	}
	pkg, ok := cur[p.Name]
	if !ok {
		res.Status = agentproto.PackageSkipped
		return res, nil
	}
	res.Version = pkg.version
	if p.Version != "" && p.Version != pkg.version {
		return res, fmt.Errorf("installed version is %s", pkg.version)
	}
	if pkg.essential {
		return res, fmt.Errorf("%s is essential to the system: it is never removed", p.Name)
	}
	reason, err := b.removalRefused(ctx, p.Name)
	if err != nil {
		return res, err
	}
	if reason != "" {
		return res, errors.New(reason)
	}
	if err := b.remove(ctx, p.Name); err != nil {
		return res, err
	}
	after, err := b.installed(ctx, []string{p.Name})
	if err != nil {
		return res, err
	}
	if _, still := after[p.Name]; still {
		return res, fmt.Errorf("%s is still installed after the removal", p.Name)
	}
	res.Status = agentproto.PackageRemoved
	return res, nil
}

// protected reports whether name (with or without an architecture) is one of the packages
// no uninstall removes.
func protected(name string) bool {
	base, _, _ := strings.Cut(name, ":")
	return slices.Contains(agentproto.ProtectedPackages, base)
}

// rebootPackage is the agent's judgement of whether an update of the package needs a
// reboot to take effect: the kernel, the C library, the init system and the system bus.
func rebootPackage(name string) bool {
	base, _, _ := strings.Cut(name, ":")
	switch base {
	case "libc6", "glibc", "systemd", "dbus":
		return true
	}
	return strings.HasPrefix(base, "linux-image") || strings.HasPrefix(base, "kernel")
}
