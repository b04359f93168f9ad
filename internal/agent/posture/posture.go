// Package posture finds the management products on a Linux machine: other RMM agents,
// remote-access tools, endpoint security, backup and patch management. Each product of the
// catalog is known by its packages, its systemd units and the paths it installs; a product
// whose unit is active is active, one merely present is installed.
package posture

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"gale/internal/wire/agentproto"
)

// product is a catalog entry: how a product shows on a machine.
type product struct {
	key, name, category string
	packages            []string
	units               []string
	// paths are looked up under the root; a path may hold a glob pattern.
	paths []string
}

var catalog = []product{
	{"connectwise-automate", "ConnectWise Automate", agentproto.CategoryRMM, nil, []string{"ltechagent"}, []string{"usr/local/ltechagent"}},
	{"ninjaone", "NinjaOne", agentproto.CategoryRMM, nil, []string{"ninjarmm-agent"}, []string{"opt/NinjaRMMAgent"}},
	{"datto-rmm", "Datto RMM", agentproto.CategoryRMM, nil, []string{"cagservice"}, []string{"opt/CentraStage"}},
	{"tactical-rmm", "Tactical RMM", agentproto.CategoryRMM, nil, []string{"tacticalagent"}, []string{"usr/local/bin/rmmagent", "opt/tacticalagent"}},
	{"n-able-ncentral", "N-able N-central", agentproto.CategoryRMM, nil, []string{"nagent"}, []string{"opt/nagent"}},
	{"meshcentral", "MeshCentral agent", agentproto.CategoryRMM, nil, []string{"meshagent"}, []string{"usr/local/mesh_services/meshagent"}},

	{"openssh-server", "OpenSSH server", agentproto.CategoryRemoteAccess, []string{"openssh-server"}, []string{"ssh", "sshd"}, nil},
	{"teamviewer", "TeamViewer", agentproto.CategoryRemoteAccess, []string{"teamviewer", "teamviewer-host"}, []string{"teamviewerd"}, []string{"opt/teamviewer"}},
	{"anydesk", "AnyDesk", agentproto.CategoryRemoteAccess, []string{"anydesk"}, []string{"anydesk"}, nil},
	{"rustdesk", "RustDesk", agentproto.CategoryRemoteAccess, []string{"rustdesk"}, []string{"rustdesk"}, nil},
	{"xrdp", "xrdp", agentproto.CategoryRemoteAccess, []string{"xrdp"}, []string{"xrdp"}, nil},
	{"screenconnect", "ConnectWise ScreenConnect", agentproto.CategoryRemoteAccess, nil, nil, []string{"opt/screenconnect-*", "opt/connectwisecontrol-*"}},

	{"clamav", "ClamAV", agentproto.CategoryEndpointSecurity, []string{"clamav-daemon", "clamav"}, []string{"clamav-daemon", "clamd@scan"}, nil},
	{"crowdstrike-falcon", "CrowdStrike Falcon", agentproto.CategoryEndpointSecurity, []string{"falcon-sensor"}, []string{"falcon-sensor"}, []string{"opt/CrowdStrike"}},
	{"sentinelone", "SentinelOne", agentproto.CategoryEndpointSecurity, []string{"sentinelagent"}, []string{"sentinelone"}, []string{"opt/sentinelone"}},
	{"microsoft-defender", "Microsoft Defender for Endpoint", agentproto.CategoryEndpointSecurity, []string{"mdatp"}, []string{"mdatp"}, nil},
	{"sophos", "Sophos Protection", agentproto.CategoryEndpointSecurity, nil, []string{"sophos-spl"}, []string{"opt/sophos-spl"}},
	{"eset", "ESET Endpoint Antivirus", agentproto.CategoryEndpointSecurity, []string{"eea"}, []string{"eea"}, []string{"opt/eset"}},
	{"wazuh", "Wazuh agent", agentproto.CategoryEndpointSecurity, []string{"wazuh-agent"}, []string{"wazuh-agent"}, []string{"var/ossec"}},

	{"veeam", "Veeam Agent", agentproto.CategoryBackup, []string{"veeam"}, []string{"veeamservice"}, nil},
	{"acronis", "Acronis Cyber Protect", agentproto.CategoryBackup, nil, []string{"acronis_mms"}, []string{"usr/lib/Acronis"}},
	{"borgbackup", "BorgBackup", agentproto.CategoryBackup, []string{"borgbackup"}, nil, nil},
	{"restic", "restic", agentproto.CategoryBackup, []string{"restic"}, nil, nil},
	{"bacula", "Bacula file daemon", agentproto.CategoryBackup, []string{"bacula-fd"}, []string{"bacula-fd"}, nil},
	{"urbackup", "UrBackup client", agentproto.CategoryBackup, []string{"urbackup-client"}, []string{"urbackupclientbackend"}, nil},
	{"duplicati", "Duplicati", agentproto.CategoryBackup, []string{"duplicati"}, []string{"duplicati"}, nil},

	{"unattended-upgrades", "unattended-upgrades", agentproto.CategoryPatchManagement, []string{"unattended-upgrades"}, []string{"unattended-upgrades"}, nil},
	{"dnf-automatic", "dnf-automatic", agentproto.CategoryPatchManagement, []string{"dnf-automatic"}, []string{"dnf-automatic.timer", "dnf-automatic-install.timer"}, nil},
}

// Sources is what detection reads: the installed packages (name → version), the file
// system root, and the state of systemd units.
type Sources struct {
	Packages map[string]string
	Root     string
	// UnitStates answers the active state of each unit named ("active", "inactive", ...); nil
	// asks systemctl.
	UnitStates func(ctx context.Context, units []string) map[string]string
}

// Detect returns the catalog's products found, in catalog order; an empty list when none.
func Detect(ctx context.Context, src Sources) []agentproto.ManagementProduct {
	if src.Root == "" {
		src.Root = "/"
	}
	if src.UnitStates == nil {
		src.UnitStates = systemctlStates
	}
	var units []string
	for _, p := range catalog {
		units = append(units, p.units...)
	}
	states := src.UnitStates(ctx, units)
	found := []agentproto.ManagementProduct{}
	for _, p := range catalog {
		var evidence []string
		version := ""
		for _, name := range p.packages {
			if v, ok := src.Packages[name]; ok {
				evidence = append(evidence, "package "+name)
				if version == "" {
					version = v
				}
			}
		}
		for _, pattern := range p.paths {
			if matches, _ := filepath.Glob(filepath.Join(src.Root, pattern)); len(matches) > 0 {
				evidence = append(evidence, "path /"+strings.TrimPrefix(matches[0], strings.TrimSuffix(src.Root, "/")+"/"))
			}
		}
		active := ""
		for _, u := range p.units {
			switch states[u] {
			case "active", "activating", "reloading":
				active = u
			case "inactive", "failed":
				// A unit systemd knows of shows the product is there, stopped.
				evidence = append(evidence, "unit "+u+" "+states[u])
			}
			if active != "" {
				break
			}
		}
		if active != "" {
			evidence = append(evidence, "unit "+active+" active")
		}
		if len(evidence) == 0 {
			continue
		}
		status := agentproto.ProductInstalled
		if active != "" {
			status = agentproto.ProductActive
		}
		found = append(found, agentproto.ManagementProduct{Product: p.key, Name: p.name, Category: p.category, Status: status,
			Version: version, Evidence: strings.Join(evidence, ", ")})
	}
	return found
}

// systemctlStates asks systemd for the active state of units, in one call. Without systemd
// (a container) no unit is known.
func systemctlStates(ctx context.Context, units []string) map[string]string {
	states := map[string]string{}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return states
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return states
	}
	// is-active exits non-zero when any unit is not active; its lines still say each state.
	out, _ := exec.CommandContext(ctx, "systemctl", append([]string{"is-active", "--"}, units...)...).Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(units) {
		return states
	}
	for i, u := range units {
		// "inactive" is also systemd's answer for a unit it does not know: only a loaded unit
		// counts as evidence, which is-active cannot tell, so unknown units stay out.
		if st := strings.TrimSpace(lines[i]); st != "inactive" {
			states[u] = st
		}
	}
	return states
}
