package packages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// rpmName is an RPM package name, optionally name.arch: it cannot start with "-".
var rpmName = regexp.MustCompile(`^[A-Za-z0-9_+][A-Za-z0-9._+-]*$`)

// rpmEVR is the query format of a package's [epoch:]version-release, the form dnf prints.
const rpmEVR = `%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}`

// dnf drives dnf and rpm. Names are checked before they reach them (none starts with "-"),
// and file paths are absolute, so no argument is read as an option.
type dnf struct {
	root string
	r    *runner
}

func newDnf(root string, r *runner) *dnf { return &dnf{root: root, r: r} }

func (d *dnf) close()                     {}
func (d *dnf) manager() string            { return agentproto.ManagerDnf }
func (d *dnf) fileType() string           { return agentproto.FileRPM }
func (d *dnf) validName(name string) bool { return len(name) <= 200 && rpmName.MatchString(name) }

func (d *dnf) dnfArgs(args ...string) []string {
	if d.root != "/" {
		args = append([]string{"--installroot=" + d.root}, args...)
	}
	return args
}

func (d *dnf) rpmArgs(args ...string) []string {
	if d.root != "/" {
		args = append([]string{"--root", d.root}, args...)
	}
	return args
}

func (d *dnf) scan(ctx context.Context, refresh bool) (agentproto.PatchScanResult, error) {
	var res agentproto.PatchScanResult
	if refresh {
		if _, err := d.r.must(ctx, "dnf", d.dnfArgs("makecache", "-q")...); err != nil {
			return res, fmt.Errorf("updating the package lists failed: %w", err)
		}
	}
	// Without a refresh the scan reads the metadata dnf has, and fetches none.
	cacheOnly := []string{}
	if !refresh {
		cacheOnly = []string{"-C"}
	}
	out, code, err := d.r.run(ctx, "dnf", d.dnfArgs(append(cacheOnly, "check-update", "-q")...)...)
	if err != nil {
		return res, err
	}
	// check-update exits 100 when updates are available, 0 when there are none.
	if code != 0 && code != 100 {
		return res, fmt.Errorf("listing the updates failed: %w", exitError("dnf", code, d.r.lastStderr))
	}
	res.ScannedAt = time.Now().UTC()
	res.Updates = parseDnfCheckUpdate(out)
	if len(res.Updates) == 0 {
		return res, d.countInstalled(ctx, &res)
	}
	// Advisories are optional metadata: a repository without them marks nothing security.
	if out, code, err := d.r.run(ctx, "dnf", d.dnfArgs(append(cacheOnly, "updateinfo", "list", "--security", "-q")...)...); err == nil && code == 0 {
		sec := parseDnfSecurity(out)
		for i, u := range res.Updates {
			res.Updates[i].Security = sec[u.Name+"."+u.Architecture]
		}
	} else if ctx.Err() != nil {
		return res, ctx.Err()
	}
	names := make([]string, len(res.Updates))
	for i, u := range res.Updates {
		names[i] = u.Name + "." + u.Architecture
	}
	cur, err := d.installed(ctx, names)
	if err != nil {
		return res, err
	}
	for i, n := range names {
		res.Updates[i].InstalledVersion = cur[n].version
	}
	return res, d.countInstalled(ctx, &res)
}

func (d *dnf) countInstalled(ctx context.Context, res *agentproto.PatchScanResult) error {
	out, err := d.r.must(ctx, "rpm", d.rpmArgs("-qa", "--qf", ".\n")...)
	if err != nil {
		return fmt.Errorf("counting the installed packages failed: %w", err)
	}
	res.Installed = bytes.Count(out, []byte("\n"))
	return nil
}

// parseDnfCheckUpdate reads "name.arch version repository" lines; dnf wraps a long name
// onto a line of its own, so the fields are gathered across lines. The obsoletes section
// that may follow is no list of updates.
func parseDnfCheckUpdate(out []byte) []agentproto.PackageUpdate {
	var ups []agentproto.PackageUpdate
	var fields []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Obsoleting Packages") || strings.HasPrefix(line, "Security:") {
			break
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		fields = append(fields, f...)
		if len(fields) < 3 {
			continue
		}
		if len(fields) == 3 {
			dot := strings.LastIndex(fields[0], ".")
			if dot > 0 && pkgversion.Valid(agentproto.ManagerDnf, fields[1]) {
				name := fields[0][:dot]
				ups = append(ups, agentproto.PackageUpdate{Name: name, Architecture: fields[0][dot+1:],
					AvailableVersion: fields[1], Origin: fields[2], RequiresReboot: rebootPackage(name)})
			}
		}
		fields = nil
	}
	return ups
}

// parseDnfSecurity reads "ADVISORY SEVERITY/Sec. name-[epoch:]version-release.arch" lines
// into the set of name.arch with a security advisory.
func parseDnfSecurity(out []byte) map[string]bool {
	sec := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		nevra := f[len(f)-1]
		dot := strings.LastIndex(nevra, ".")
		if dot < 0 {
			continue
		}
		nevr, arch := nevra[:dot], nevra[dot+1:]
		// The name is what precedes the last two dashes (version, release).
		i := strings.LastIndex(nevr, "-")
		if i < 0 {
			continue
		}
		j := strings.LastIndex(nevr[:i], "-")
		if j <= 0 {
			continue
		}
		sec[nevr[:j]+"."+arch] = true
	}
	return sec
}

// installed queries rpm for the named packages (name or name.arch); of several installed
// versions (kernels) the newest counts.
func (d *dnf) installed(ctx context.Context, names []string) (map[string]installedPkg, error) {
	args := d.rpmArgs(append([]string{"-q", "--qf", "%{NAME}\t%{ARCH}\t" + rpmEVR + "\n"}, names...)...)
	out, _, err := d.r.run(ctx, "rpm", args...)
	if err != nil {
		return nil, err
	}
	return parseRPMInstalled(out, names), nil
}

// parseRPMInstalled matches rpm -q lines to the names asked; "package X is not installed"
// lines match nothing.
func parseRPMInstalled(out []byte, names []string) map[string]installedPkg {
	found := map[string]installedPkg{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 3 {
			continue
		}
		for _, n := range names {
			if n != f[0] && n != f[0]+"."+f[1] {
				continue
			}
			if cur, ok := found[n]; ok {
				if c, err := pkgversion.Compare(agentproto.ManagerDnf, f[2], cur.version); err != nil || c <= 0 {
					continue
				}
			}
			found[n] = installedPkg{version: f[2]}
		}
	}
	return found
}

func (d *dnf) install(ctx context.Context, pkgs []agentproto.PackageVersion, rollback bool) error {
	verb := "upgrade"
	if rollback {
		verb = "downgrade"
	}
	args := []string{verb, "-y", "-q"}
	for _, p := range pkgs {
		args = append(args, p.Name+"-"+p.Version)
	}
	_, err := d.r.must(ctx, "dnf", d.dnfArgs(args...)...)
	return err
}

func (d *dnf) fileInfo(ctx context.Context, path string) (string, string, error) {
	// Even a query of a file opens an RPM database: the root's, not the home's default one.
	out, err := d.r.must(ctx, "rpm", d.rpmArgs("-qp", "--qf", "%{NAME}\n"+rpmEVR+"\n", path)...)
	if err != nil {
		return "", "", fmt.Errorf("the file is not a readable RPM package: %w", err)
	}
	name, version, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if name == "" || version == "" {
		return "", "", fmt.Errorf("the file is not an RPM package: it names no package or version")
	}
	return name, version, nil
}

func (d *dnf) installFile(ctx context.Context, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	_, err = d.r.must(ctx, "dnf", d.dnfArgs("install", "-y", "-q", abs)...)
	return err
}

// removalRefused refuses a package other installed packages need: dnf would remove them
// along, and RPM has no essential flag to tell which of them the system cannot lose.
func (d *dnf) removalRefused(ctx context.Context, name string) (string, error) {
	_, code, err := d.r.run(ctx, "rpm", d.rpmArgs("-e", "--test", name)...)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return fmt.Sprintf("other packages need %s (%v): nothing was removed", name, exitError("rpm", code, d.r.lastStderr)), nil
	}
	return "", nil
}

func (d *dnf) remove(ctx context.Context, name string) error {
	_, err := d.r.must(ctx, "dnf", d.dnfArgs("remove", "-y", "-q", "--setopt=clean_requirements_on_remove=False", name)...)
	return err
}

// reboot asks needs-restarting (dnf-utils), which exits 1 when a reboot is needed; without
// it, or for another root, nothing is known.
func (d *dnf) reboot(ctx context.Context) (bool, []string) {
	if d.root != "/" {
		return false, nil
	}
	if _, err := exec.LookPath("needs-restarting"); err != nil {
		return false, nil
	}
	_, code, err := d.r.run(ctx, "needs-restarting", "-r")
	return err == nil && code == 1, nil
}
