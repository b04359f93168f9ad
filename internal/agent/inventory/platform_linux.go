package inventory

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gale/internal/agent/posture"
	"gale/internal/wire/agentproto"
)

// hostRoot is the root of the file system the Linux collectors read /proc, /sys, /etc and
// /var under; tests point the same readers at fixture trees instead.
const hostRoot = "/"

// osRelease reads os-release(5) under hostRoot.
func osRelease(context.Context) (release, error) {
	return linuxRelease(hostRoot)
}

// linuxRelease reads os-release(5), which every current distribution ships, and Debian's
// point release, which os-release leaves out ("12" there, "12.5" in /etc/debian_version).
func linuxRelease(root string) (release, error) {
	content, err := os.ReadFile(filepath.Join(root, "etc/os-release"))
	if errors.Is(err, os.ErrNotExist) {
		content, err = os.ReadFile(filepath.Join(root, "usr/lib/os-release"))
	}
	if err != nil {
		return release{name: "Linux"}, err
	}
	fields := parseOSRelease(string(content))
	r := releaseFromOSRelease(fields)
	// Debian's derivatives keep the file with the Debian release they are built on
	// ("bookworm/sid" on Ubuntu), which is not their own point release.
	if fields["ID"] == "debian" {
		if point := readTrimmed(root, "etc/debian_version"); strings.HasPrefix(point, r.version+".") {
			r.pointRelease = point
		}
	}
	return r, nil
}

func dnsServers() ([]string, error) {
	return resolverServers(hostRoot)
}

func networkDetails() (map[string]link, map[string][]string, error) {
	gateways, err := defaultGateways(hostRoot)
	return linkDetails(hostRoot), gateways, err
}

// managementPosture finds the management products among the system's packages, units and
// paths.
func managementPosture(ctx context.Context, software []agentproto.Software, root string) []agentproto.ManagementProduct {
	pkgs := map[string]string{}
	for _, sw := range software {
		if sw.Source == "dpkg" || sw.Source == "rpm" {
			pkgs[sw.Name] = sw.Version
		}
	}
	return posture.Detect(ctx, posture.Sources{Packages: pkgs, Root: root})
}

func recentLogons(n int) ([]agentproto.LoggedInUser, error) {
	return wtmpLogons(hostRoot, n)
}

// installedSoftware asks dpkg, or rpm where dpkg is absent, and adds the snaps and flatpaks,
// which neither knows of.
func installedSoftware(ctx context.Context, root string) ([]agentproto.Software, error) {
	software, err := systemPackages(ctx, root)
	snaps, snapErr := snapPackages(root)
	flatpaks, flatpakErr := flatpakApps(root)
	software = append(append(software, snaps...), flatpaks...)
	return software, errors.Join(err, snapErr, flatpakErr)
}

// systemPackages asks dpkg for the packages of root's database, else rpm (of the running
// system).
func systemPackages(ctx context.Context, root string) ([]agentproto.Software, error) {
	if _, err := exec.LookPath("dpkg-query"); err == nil {
		out, err := runCommand(ctx, "dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f="+dpkgFormat)
		if err != nil {
			return nil, err
		}
		software := parseDpkg(string(out))
		addDpkgInstallDates(root, software)
		return software, nil
	}
	if _, err := exec.LookPath("rpm"); err == nil {
		out, err := runCommand(ctx, "rpm", "-qa", "--queryformat", rpmFormat)
		if err != nil {
			return nil, err
		}
		return parseRPM(string(out)), nil
	}
	return nil, errors.New("no supported package manager (dpkg, rpm) found")
}
