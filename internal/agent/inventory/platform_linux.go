package inventory

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gale/internal/agentproto"
)

// osRelease reads os-release(5), which every current distribution ships.
func osRelease(context.Context) (release, error) {
	content, err := os.ReadFile("/etc/os-release")
	if errors.Is(err, os.ErrNotExist) {
		content, err = os.ReadFile("/usr/lib/os-release")
	}
	if err != nil {
		return release{name: "Linux"}, err
	}
	return releaseFromOSRelease(parseOSRelease(string(content))), nil
}

// dmiDir exposes the firmware's SMBIOS tables; absent on most ARM boards and in some VMs.
const dmiDir = "/sys/class/dmi/id"

// systemIdentity reads the maker, model, serial number and BIOS version from SMBIOS. The serial
// is readable by root only, so it stays empty for an unprivileged agent.
func systemIdentity(context.Context) (agentproto.Hardware, error) {
	return agentproto.Hardware{
		Manufacturer: readDMI("sys_vendor"),
		Model:        readDMI("product_name"),
		SerialNumber: readDMI("product_serial"),
		BIOSVersion:  readDMI("bios_version"),
	}, nil
}

func readDMI(name string) string {
	content, err := os.ReadFile(filepath.Join(dmiDir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(content))
}

// installedSoftware asks dpkg, or rpm where dpkg is absent.
func installedSoftware(ctx context.Context) ([]agentproto.Software, error) {
	if _, err := exec.LookPath("dpkg-query"); err == nil {
		out, err := runCommand(ctx, "dpkg-query", "-W", "-f="+dpkgFormat)
		if err != nil {
			return nil, err
		}
		return parseDpkg(string(out)), nil
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
