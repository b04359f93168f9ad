package packages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// debName is a Debian package name, optionally with an architecture: it cannot start with
// "-", so it is never read as an option.
var debName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9][a-z0-9-]*)?$`)

// apt drives apt-get and dpkg on a system root.
type apt struct {
	root string
	r    *runner
	// conf is the apt configuration file that points apt and dpkg at a root other than
	// "/" ("" for the running system), and dir the directory holding it.
	conf, dir string
}

// rootConfig is apt's configuration for a root other than "/". It is read twice: through
// APT_CONFIG, before apt reads its configuration directory (so it reads the root's
// apt.conf.d, not the host's), and again with -c after it (so it wins over what that
// directory says).
//   - Dir moves every apt path (lists, cache, logs, sources, apt.conf.d, keyrings) into the
//     root; Dir::State::status is named as well because older apt keeps it absolute.
//   - The hooks are cleared: apt runs them on the host, outside the root (a dpkg-preconfigure
//     would write the host's debconf database, a cleanup hook the host's cache).
//   - dpkg gets --root (its database and the files it unpacks) and --log, which dpkg does
//     not move with --root (it would append to the host's /var/log/dpkg.log). The list is
//     cleared first so the second reading does not repeat them.
const rootConfig = `Dir "%[1]s/";
Dir::State::status "%[1]s/var/lib/dpkg/status";
#clear DPkg::Pre-Invoke;
#clear DPkg::Post-Invoke;
#clear DPkg::Pre-Install-Pkgs;
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Options;
DPkg::Options:: "--root=%[1]s";
DPkg::Options:: "--log=%[1]s/var/log/dpkg.log";
`

func newApt(root, workDir string, r *runner) (*apt, error) {
	a := &apt{root: root, r: r}
	r.env = append(r.env, "DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none")
	if root == "/" {
		return a, nil
	}
	if strings.ContainsAny(root, "\"\n") {
		return nil, fmt.Errorf("the system root %q cannot be named in apt's configuration", root)
	}
	dir, err := os.MkdirTemp(workDir, "gale-apt-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write apt's configuration: %w", err)
	}
	a.dir, a.conf = dir, filepath.Join(dir, "apt.conf")
	if err := os.WriteFile(a.conf, fmt.Appendf(nil, rootConfig, root), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("cannot write apt's configuration: %w", err)
	}
	r.env = append(r.env, "APT_CONFIG="+a.conf)
	return a, nil
}

func (a *apt) close() {
	if a.dir != "" {
		os.RemoveAll(a.dir)
	}
}

func (a *apt) manager() string            { return agentproto.ManagerApt }
func (a *apt) fileType() string           { return agentproto.FileDeb }
func (a *apt) validName(name string) bool { return len(name) <= 200 && debName.MatchString(name) }

// aptArgs puts the root's configuration first, so the options that follow add to it.
func (a *apt) aptArgs(args ...string) []string {
	if a.conf == "" {
		return args
	}
	return append([]string{"-c", a.conf}, args...)
}

func (a *apt) aptGet(ctx context.Context, args ...string) ([]byte, error) {
	return a.r.must(ctx, "apt-get", a.aptArgs(args...)...)
}

// readOnly are the options of a run that must write nothing: no lock files, no binary
// cache, and no planner log (apt-get writes eipp.log.xz even when it only simulates).
var readOnly = []string{"-o", "Debug::NoLocking=1", "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=", "-o", "Dir::Log::Planner="}

// installOptions keep a configuration file the administrator changed, without asking.
var installOptions = []string{"-y", "-q", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold", lockWait[0], lockWait[1]}

// lockWait lets a run that changes the system wait for another package manager (an
// unattended upgrade) to finish instead of failing at once; the command's timeout still
// bounds it.
var lockWait = []string{"-o", "DPkg::Lock::Timeout=300"}

func (a *apt) admindir() string { return "--admindir=" + filepath.Join(a.root, "var/lib/dpkg") }

func (a *apt) scan(ctx context.Context, refresh bool) (agentproto.PatchScanResult, error) {
	var res agentproto.PatchScanResult
	if refresh {
		if _, err := a.aptGet(ctx, "update", "-q", lockWait[0], lockWait[1]); err != nil {
			return res, fmt.Errorf("updating the package lists failed: %w", err)
		}
	}
	out, err := a.aptGet(ctx, append(append([]string{"-s", "-q"}, readOnly...), "dist-upgrade")...)
	if err != nil {
		return res, fmt.Errorf("listing the upgrades failed: %w", err)
	}
	res.ScannedAt = time.Now().UTC()
	res.Updates = parseAptSimulation(out)
	if len(res.Updates) > 0 {
		args := append(append([]string{"-q"}, readOnly...), "show")
		for _, u := range res.Updates {
			args = append(args, u.Name+"="+u.AvailableVersion)
		}
		// The summaries are a convenience: a failure to read them leaves them empty.
		if out, err := a.r.must(ctx, "apt-cache", a.aptArgs(args...)...); err == nil {
			sums := parseAptSummaries(out)
			for i, u := range res.Updates {
				res.Updates[i].Summary = sums[u.Name+"="+u.AvailableVersion]
			}
		} else if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	out, err = a.r.must(ctx, "dpkg-query", a.admindir(), "-W", "-f", "${db:Status-Abbrev}\n")
	if err != nil {
		return res, fmt.Errorf("counting the installed packages failed: %w", err)
	}
	for line := range strings.Lines(string(out)) {
		if len(line) > 1 && line[1] == 'i' {
			res.Installed++
		}
	}
	return res, nil
}

// aptInst is one upgrade in apt-get -s output:
// "Inst NAME [OLD] (NEW RELEASE, RELEASE... [ARCH])", each release "Label:Version/Suite" or
// "Label:Suite". An Inst without [OLD] installs a new package and is no update.
var aptInst = regexp.MustCompile(`^Inst (\S+) \[([^\]]+)\] \((\S+) (.*) \[([^\]]+)\]\)`)

func parseAptSimulation(out []byte) []agentproto.PackageUpdate {
	var ups []agentproto.PackageUpdate
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := aptInst.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		u := agentproto.PackageUpdate{Name: m[1], InstalledVersion: m[2], AvailableVersion: m[3], Architecture: m[5],
			RequiresReboot: rebootPackage(m[1])}
		for i, rel := range strings.Split(m[4], ", ") {
			suite := rel
			if j := strings.LastIndex(rel, "/"); j >= 0 {
				suite = rel[j+1:]
			} else if j := strings.Index(rel, ":"); j >= 0 {
				suite = rel[j+1:]
			}
			security := strings.Contains(strings.ToLower(rel), "security")
			if i == 0 || (security && !u.Security) {
				u.Origin = suite
			}
			u.Security = u.Security || security
		}
		ups = append(ups, u)
	}
	return ups
}

// parseAptSummaries maps "name=version" to the first line of the description, from
// apt-cache show output.
func parseAptSummaries(out []byte) map[string]string {
	sums := map[string]string{}
	for stanza := range strings.SplitSeq(string(out), "\n\n") {
		var name, arch, version, summary string
		for line := range strings.Lines(stanza) {
			k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), ": ")
			if !ok {
				continue
			}
			switch k {
			case "Package":
				name = v
			case "Architecture":
				arch = v
			case "Version":
				version = v
			case "Description", "Description-en":
				if summary == "" {
					summary = v
				}
			}
		}
		if name != "" && version != "" {
			sums[name+"="+version] = summary
			sums[name+":"+arch+"="+version] = summary
		}
	}
	return sums
}

// installed reads the named packages from dpkg's database. A name with an architecture
// matches that architecture; one without matches the package as apt names it.
func (a *apt) installed(ctx context.Context, names []string) (map[string]installedPkg, error) {
	args := append([]string{a.admindir(), "-W", "-f", "${binary:Package}\t${Package}\t${Architecture}\t${Version}\t${db:Status-Abbrev}\t${Essential}\n", "--"}, names...)
	out, code, err := a.r.run(ctx, "dpkg-query", args...)
	if err != nil {
		return nil, err
	}
	// dpkg-query exits 1 when a name matches nothing, which is an answer here.
	if code > 1 {
		return nil, exitError("dpkg-query", code, a.r.lastStderr)
	}
	type entry struct{ bin, pkg, arch, version, status, essential string }
	var entries []entry
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 6 {
			continue
		}
		e := entry{f[0], f[1], f[2], f[3], f[4], f[5]}
		// Not installed, or only its configuration files left.
		if len(e.status) < 2 || e.status[1] == 'n' || e.status[1] == 'c' || e.version == "" {
			continue
		}
		entries = append(entries, e)
	}
	found := map[string]installedPkg{}
	for _, n := range names {
		base, arch, withArch := strings.Cut(n, ":")
		for _, e := range entries {
			if (withArch && e.pkg == base && e.arch == arch) || (!withArch && e.bin == n) {
				found[n] = installedPkg{version: e.version, essential: e.essential == "yes"}
				break
			}
		}
	}
	return found, nil
}

func (a *apt) install(ctx context.Context, pkgs []agentproto.PackageVersion, rollback bool) error {
	args := append([]string{"install", "--only-upgrade"}, installOptions...)
	if rollback {
		args = append(args, "--allow-downgrades")
	}
	args = append(args, "--")
	for _, p := range pkgs {
		args = append(args, p.Name+"="+p.Version)
	}
	_, err := a.aptGet(ctx, args...)
	return err
}

func (a *apt) fileInfo(ctx context.Context, path string) (string, string, error) {
	out, err := a.r.must(ctx, "dpkg-deb", "-f", path, "Package", "Version")
	if err != nil {
		return "", "", fmt.Errorf("the file is not a readable Debian package: %w", err)
	}
	var name, version string
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		switch k {
		case "Package":
			name = v
		case "Version":
			version = v
		}
	}
	if name == "" || version == "" {
		return "", "", fmt.Errorf("the file is not a Debian package: it names no package or version")
	}
	return name, version, nil
}

// installFile installs a .deb with apt, which also installs what it depends on. The path is
// absolute, so apt takes it for a file, not a package name.
func (a *apt) installFile(ctx context.Context, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	_, err = a.aptGet(ctx, append(append([]string{"install"}, installOptions...), abs)...)
	return err
}

// aptRemv is one removal in apt-get -s output: "Remv NAME [VERSION]...".
var aptRemv = regexp.MustCompile(`^Remv (\S+)`)

// removalRefused simulates the removal and refuses it when it would take a protected or
// essential package along.
func (a *apt) removalRefused(ctx context.Context, name string) (string, error) {
	out, err := a.aptGet(ctx, append(append([]string{"-s", "-q"}, readOnly...), "remove", "--", name)...)
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		// apt's resolver itself refuses to take an essential package away.
		return fmt.Sprintf("apt refuses to remove %s (%v): nothing was removed", name, err), nil
	}
	var removed []string
	for line := range strings.Lines(string(out)) {
		if m := aptRemv.FindStringSubmatch(line); m != nil {
			removed = append(removed, m[1])
		}
	}
	for _, r := range removed {
		if protected(r) {
			return fmt.Sprintf("removing %s would also remove %s, which is protected: nothing was removed", name, r), nil
		}
	}
	if len(removed) == 0 {
		return "", nil
	}
	pkgs, err := a.installed(ctx, removed)
	if err != nil {
		return "", err
	}
	for _, r := range removed {
		if pkgs[r].essential {
			return fmt.Sprintf("removing %s would also remove %s, which is essential: nothing was removed", name, r), nil
		}
	}
	return "", nil
}

func (a *apt) remove(ctx context.Context, name string) error {
	_, err := a.aptGet(ctx, "remove", "-y", "-q", lockWait[0], lockWait[1], "--", name)
	return err
}

// reboot reads the flag Debian's packages leave when they need a reboot.
func (a *apt) reboot(context.Context) (bool, []string) {
	flag := filepath.Join(a.root, "var/run/reboot-required")
	if _, err := os.Stat(flag); err != nil {
		return false, nil
	}
	var pkgs []string
	if b, err := os.ReadFile(flag + ".pkgs"); err == nil {
		for line := range strings.Lines(string(b)) {
			if p := strings.TrimSpace(line); p != "" && !slices.Contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	return true, pkgs
}
