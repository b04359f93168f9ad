package inventory

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// addDpkgInstallDates dates each dpkg package by its file list under root, which dpkg rewrites
// whenever it unpacks the package: the date is that of the last install or upgrade. A package
// of a foreign architecture names its list <package>:<arch>.list.
func addDpkgInstallDates(root string, software []agentproto.Software) {
	info := filepath.Join(root, "var/lib/dpkg/info")
	for i := range software {
		sw := &software[i]
		for _, name := range []string{sw.Name + ":" + sw.Architecture + ".list", sw.Name + ".list"} {
			if st, err := os.Stat(filepath.Join(info, name)); err == nil {
				sw.InstallDate = st.ModTime().UTC().Format(time.DateOnly)
				break
			}
		}
	}
}

// snapPackages lists the snaps under root from the files snapd keeps them in
// (var/lib/snapd/snaps/<name>_<revision>.snap). snapd keeps a few earlier revisions for
// rollback; the installed one is what snap/<name>/current links to. The version is in the
// mounted snap's meta/snap.yaml. A system without snapd has no snaps rather than a failure.
func snapPackages(root string) ([]agentproto.Software, error) {
	files, err := filepath.Glob(filepath.Join(root, "var/lib/snapd/snaps/*.snap"))
	if err != nil {
		return nil, err
	}
	type revision struct {
		number string
		info   os.FileInfo
	}
	installed := map[string]revision{}
	var names []string
	for _, file := range files {
		name, number, ok := strings.Cut(strings.TrimSuffix(filepath.Base(file), ".snap"), "_")
		info, err := os.Stat(file)
		if !ok || err != nil {
			continue
		}
		// Parallel installs are named <name>_<key>; their revision follows the last underscore.
		if i := strings.LastIndex(number, "_"); i >= 0 {
			name, number = name+"_"+number[:i], number[i+1:]
		}
		current, seen := installed[name]
		if !seen {
			names = append(names, name)
		}
		if !seen || newerSnapRevision(root, name, number, current.number) {
			installed[name] = revision{number, info}
		}
	}
	software := make([]agentproto.Software, 0, len(names))
	for _, name := range names {
		rev := installed[name]
		software = append(software, agentproto.Software{
			Name:        name,
			Version:     snapVersion(filepath.Join(root, "snap", name, rev.number, "meta/snap.yaml")),
			InstallDate: rev.info.ModTime().UTC().Format(time.DateOnly),
			SizeBytes:   rev.info.Size(),
			Source:      "snap",
		})
	}
	return software, nil
}

// newerSnapRevision reports whether revision candidate rather than held is the installed one:
// the one snap/<name>/current links to, else the higher number (local revisions, "x1", lose).
func newerSnapRevision(root, name, candidate, held string) bool {
	if current, err := os.Readlink(filepath.Join(root, "snap", name, "current")); err == nil {
		return filepath.Base(current) == candidate
	}
	c, errC := strconv.Atoi(candidate)
	h, errH := strconv.Atoi(held)
	return errC == nil && (errH != nil || c > h)
}

// snapVersion reads the top-level version of a snap.yaml, "" when it cannot be read.
func snapVersion(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), "version:"); ok {
			return strings.Trim(strings.TrimSpace(value), `"'`)
		}
	}
	return ""
}

// flatpakApps lists the applications installed system-wide under root
// (var/lib/flatpak/app/<id>), with the architecture of the deployment current/ links to
// (<arch>/<branch>) and the version its AppStream metadata gives.
func flatpakApps(root string) ([]agentproto.Software, error) {
	appDir := filepath.Join(root, "var/lib/flatpak/app")
	entries, err := os.ReadDir(appDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var software []agentproto.Software
	for _, e := range entries {
		current, err := os.Readlink(filepath.Join(appDir, e.Name(), "current"))
		if err != nil {
			continue // not deployed
		}
		arch, _, _ := strings.Cut(current, "/")
		deployment := filepath.Join(appDir, e.Name(), "current/active")
		sw := agentproto.Software{
			Name:         e.Name(),
			Version:      appStreamVersion(filepath.Join(deployment, "files/share/metainfo", e.Name()+".metainfo.xml")),
			Architecture: arch,
			Source:       "flatpak",
		}
		if sw.Version == "" {
			sw.Version = appStreamVersion(filepath.Join(deployment, "files/share/appdata", e.Name()+".appdata.xml"))
		}
		if st, err := os.Stat(deployment); err == nil {
			sw.InstallDate = st.ModTime().UTC().Format(time.DateOnly)
		}
		software = append(software, sw)
	}
	return software, nil
}

// appStreamRelease matches the first <release> of AppStream metadata, the newest by the
// specification's order.
var appStreamRelease = regexp.MustCompile(`<release\b[^>]*\bversion="([^"]+)"`)

func appStreamVersion(path string) string {
	content, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if m := appStreamRelease.FindSubmatch(content); m != nil {
		return string(m[1])
	}
	return ""
}
