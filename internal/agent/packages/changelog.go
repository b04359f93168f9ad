package packages

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gale/internal/agent/proctree"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// Bounds of package_changelog.
const (
	// maxChangelogBytes is the most a decompressed changelog is read.
	maxChangelogBytes = 16 << 20
	// maxDebBytes is the largest package downloaded for its changelog: a bigger one is
	// reported as an error rather than fetched.
	maxDebBytes = 64 << 20
)

var (
	cvePattern       = regexp.MustCompile(`CVE-\d{4}-\d{4,}`)
	changelogHeading = regexp.MustCompile(`^(\S+) \(([^()\s]+)\) [^;]*;(.*)$`)
	urgencyPattern   = regexp.MustCompile(`(?i)urgency=([a-z]+)`)
)

// urgencyRank orders Debian urgencies.
var urgencyRank = map[string]int{"low": 1, "medium": 2, "high": 3, "emergency": 4, "critical": 5}

// packageChangelog reads, for each package version named, the changelog.Debian.gz of its
// .deb fetched from the configured repositories, and reports the CVEs of the entries after
// sinceVersion up to the version. Packages built from one source at one version share a
// changelog: it is fetched once, from the smallest of them.
func (m *Manager) packageChangelog(ctx context.Context, b backend, payload json.RawMessage) (any, error) {
	var p agentproto.PackageChangelog
	if err := decode(payload, &p); err != nil {
		return nil, err
	}
	if len(p.Packages) == 0 || len(p.Packages) > agentproto.MaxChangelogPackages {
		return nil, fmt.Errorf("name 1 to %d packages", agentproto.MaxChangelogPackages)
	}
	a, ok := b.(*apt)
	if !ok {
		return nil, errors.New("package changelogs are read from Debian packages: this system has no apt")
	}
	work, err := os.MkdirTemp(m.o.WorkDir, "gale-changelog-*")
	if err != nil {
		return nil, fmt.Errorf("cannot make a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	res := agentproto.PackageChangelogResult{Packages: make([]agentproto.ChangelogEntry, len(p.Packages))}
	// Group the packages by source and version: one download per group.
	type group struct {
		members []int
		infos   []debInfo
	}
	groups := map[string]*group{}
	var order []string
	var ask []string
	for i, req := range p.Packages {
		e := &res.Packages[i]
		e.Name, e.Version, e.CVEs = req.Name, req.Version, []string{}
		if !a.validName(req.Name) || strings.Contains(req.Name, ":") || !pkgversion.Valid(agentproto.ManagerApt, req.Version) ||
			(req.SinceVersion != "" && !pkgversion.Valid(agentproto.ManagerApt, req.SinceVersion)) {
			e.Error = "not a valid package name or version"
			continue
		}
		ask = append(ask, req.Name+"="+req.Version)
	}
	infos := a.debInfos(ctx, ask)
	for i, req := range p.Packages {
		e := &res.Packages[i]
		if e.Error != "" {
			continue
		}
		info, ok := infos[req.Name+"="+req.Version]
		if !ok {
			e.Error = fmt.Sprintf("%s %s is not offered by the configured repositories", req.Name, req.Version)
			continue
		}
		key := info.source + "=" + info.sourceVersion
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
			order = append(order, key)
		}
		g.members = append(g.members, i)
		g.infos = append(g.infos, info)
	}
	// The cheapest groups first: the smallest download of each.
	sort.SliceStable(order, func(i, j int) bool { return minSize(groups[order[i]].infos) < minSize(groups[order[j]].infos) })
	for _, key := range order {
		g := groups[key]
		cands := slices.Clone(g.infos)
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].size < cands[j].size })
		text, err := a.fetchChangelog(ctx, work, cands)
		for _, i := range g.members {
			e := &res.Packages[i]
			if err != nil {
				e.Error = err.Error()
				continue
			}
			e.CVEs, e.Urgency, e.Entries = cvesBetween(text, p.Packages[i].SinceVersion, p.Packages[i].Version, g.infos[0].sourceVersion)
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	return res, nil
}

// debInfo is what apt knows of one package version.
type debInfo struct {
	name, version, source, sourceVersion string
	size                                 int64
}

func minSize(infos []debInfo) int64 {
	m := int64(-1)
	for _, i := range infos {
		if m < 0 || i.size < m {
			m = i.size
		}
	}
	return m
}

func (a *apt) debInfo(ctx context.Context, name, version string) (debInfo, error) {
	infos := a.debInfos(ctx, []string{name + "=" + version})
	info, ok := infos[name+"="+version]
	if !ok {
		return debInfo{}, fmt.Errorf("%s %s is not offered by the configured repositories", name, version)
	}
	return info, nil
}

// debInfos asks apt-cache, in one run, what it knows of each name=version offered; one it
// does not know is absent (when none is known, apt-cache fails and every one is absent, so
// each is asked alone then).
func (a *apt) debInfos(ctx context.Context, pkgs []string) map[string]debInfo {
	out := map[string]debInfo{}
	if len(pkgs) == 0 {
		return out
	}
	text, err := a.r.must(ctx, "apt-cache", a.aptArgs(append(append([]string{"-q"}, readOnly...), append([]string{"show"}, pkgs...)...)...)...)
	if err != nil {
		if len(pkgs) > 1 && ctx.Err() == nil {
			for _, p := range pkgs {
				maps.Copy(out, a.debInfos(ctx, []string{p}))
			}
		}
		return out
	}
	for _, stanza := range strings.Split(string(text), "\n\n") {
		var info debInfo
		for _, line := range strings.Split(stanza, "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "Package":
				info.name = v
			case "Version":
				info.version = v
			case "Source":
				// "Source: name (version)" when the source's version differs.
				src, ver, _ := strings.Cut(v, " ")
				info.source = src
				if ver = strings.Trim(ver, "()"); ver != "" {
					info.sourceVersion = ver
				}
			case "Size":
				info.size, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if info.name == "" || info.version == "" {
			continue
		}
		if info.source == "" {
			info.source = info.name
		}
		if info.sourceVersion == "" {
			info.sourceVersion = info.version
		}
		key := info.name + "=" + info.version
		if _, seen := out[key]; !seen && slices.Contains(pkgs, key) {
			out[key] = info
		}
	}
	return out
}

// fetchChangelog downloads the candidates in turn until one holds the changelog; a binary
// package whose doc directory links to another package's is followed to that package.
func (a *apt) fetchChangelog(ctx context.Context, work string, cands []debInfo) (string, error) {
	var lastErr error
	tried := map[string]bool{}
	for len(cands) > 0 {
		c := cands[0]
		cands = cands[1:]
		if tried[c.name] {
			continue
		}
		tried[c.name] = true
		if c.size > maxDebBytes {
			lastErr = fmt.Errorf("%s %s is larger than %d MB: its changelog is not fetched", c.name, c.version, maxDebBytes>>20)
			continue
		}
		deb, err := a.download(ctx, work, c.name, c.version)
		if err != nil {
			lastErr = err
			continue
		}
		text, link, err := readChangelog(ctx, deb, c.name)
		os.Remove(deb)
		if err == nil {
			return text, nil
		}
		lastErr = err
		if link != "" && !tried[link] && a.validName(link) {
			info, ierr := a.debInfo(ctx, link, c.sourceVersion)
			if ierr == nil {
				cands = append([]debInfo{info}, cands...)
			}
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no package to read the changelog from")
	}
	return "", lastErr
}

// download fetches name=version into dir with apt-get download and returns the file.
func (a *apt) download(ctx context.Context, dir, name, version string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := a.aptArgs(append(append([]string{"-q", "-o", "APT::Sandbox::User=root"}, readOnly...), "download", name+"="+version)...)
	fmt.Fprintf(a.r.stdout, "+ apt-get %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), a.r.env...), "LC_ALL=C", "LANG=C", "LANGUAGE=")
	errb := &tail{max: outputCap}
	cmd.Stdout, cmd.Stderr = io.Discard, &teeWriter{errb, a.r.stderr}
	proctree.KillOnCancel(cmd)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("downloading %s %s took too long", name, version)
		}
		return "", fmt.Errorf("downloading %s %s failed: %s", name, version, lastLine(errb.String()))
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	for _, d := range debs {
		if strings.HasPrefix(filepath.Base(d), name+"_") {
			return d, nil
		}
	}
	return "", fmt.Errorf("apt-get download of %s %s left no package file", name, version)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "W:") {
			return l
		}
	}
	return strings.TrimSpace(s)
}

// readChangelog reads ./usr/share/doc/<name>/changelog.Debian.gz from a .deb's files
// (dpkg-deb --fsys-tarfile). When the doc directory is a symbolic link to another package's,
// link names that package.
func readChangelog(ctx context.Context, deb, name string) (text, link string, err error) {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", err
	}
	proctree.KillOnCancel(cmd)
	if err := cmd.Start(); err != nil {
		return "", "", fmt.Errorf("cannot run dpkg-deb: %w", err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	doc := "usr/share/doc/" + name
	want := map[string]bool{doc + "/changelog.Debian.gz": true}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", link, fmt.Errorf("cannot read the files of %s: %w", filepath.Base(deb), err)
		}
		p := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if p == doc && h.Typeflag == tar.TypeSymlink {
			link = path.Base(h.Linkname)
			continue
		}
		if !want[p] {
			continue
		}
		if h.Typeflag == tar.TypeSymlink {
			// changelog.Debian.gz -> ../<other>/changelog.Debian.gz
			link = path.Base(path.Dir(path.Join(path.Dir(p), h.Linkname)))
			continue
		}
		zr, err := gzip.NewReader(tr)
		if err != nil {
			return "", link, fmt.Errorf("the changelog of %s is not gzip: %w", name, err)
		}
		b, err := io.ReadAll(io.LimitReader(zr, maxChangelogBytes))
		if err != nil {
			return "", link, fmt.Errorf("cannot read the changelog of %s: %w", name, err)
		}
		return string(b), link, nil
	}
	if link != "" {
		return "", link, fmt.Errorf("the documentation of %s is a link to %s", name, link)
	}
	return "", "", fmt.Errorf("%s holds no changelog.Debian.gz", filepath.Base(deb))
}

// cvesBetween returns the CVEs named by the changelog entries newer than since ("" for all)
// and not newer than upTo (or the source's version, which a binary rebuild may differ from),
// with the highest urgency among those entries and their count.
func cvesBetween(text, since, upTo, sourceVersion string) (cves []string, urgency string, entries int) {
	cves = []string{}
	seen := map[string]bool{}
	in := false
	best := 0
	for _, line := range strings.Split(text, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			m := changelogHeading.FindStringSubmatch(line)
			if m == nil {
				in = false
				continue
			}
			v := m[2]
			in = within(v, since, upTo) || (sourceVersion != upTo && within(v, since, sourceVersion))
			if in {
				entries++
				if u := urgencyPattern.FindStringSubmatch(m[3]); u != nil {
					u := strings.ToLower(u[1])
					if r := urgencyRank[u]; r > best {
						best, urgency = r, u
					}
				}
			}
			continue
		}
		if !in {
			continue
		}
		for _, c := range cvePattern.FindAllString(line, -1) {
			if !seen[c] && len(cves) < agentproto.MaxChangelogCVEs {
				seen[c] = true
				cves = append(cves, c)
			}
		}
	}
	slices.Sort(cves)
	return cves, urgency, entries
}

// within reports since < v <= upTo by Debian's ordering (an invalid version is outside).
func within(v, since, upTo string) bool {
	c, err := pkgversion.Compare(agentproto.ManagerApt, v, upTo)
	if err != nil || c > 0 {
		return false
	}
	if since == "" {
		return true
	}
	c, err = pkgversion.Compare(agentproto.ManagerApt, v, since)
	return err == nil && c > 0
}
