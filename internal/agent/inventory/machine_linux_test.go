package inventory

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gale/internal/wire/agentproto"
)

// TestLinuxFieldsMatchThisMachinesTools collects this machine's inventory and checks the Linux
// fields against the machine's own tools; a comparison whose tool is missing is skipped.
func TestLinuxFieldsMatchThisMachinesTools(t *testing.T) {
	inv := Collect(t.Context(), Options{})
	for _, e := range inv.Errors {
		t.Errorf("collector failed: %s", e)
	}

	// The shell reads os-release as the format intends: it is a shell fragment.
	if out, ok := toolOutput(t, "sh", "-c", `. /etc/os-release && printf '%s\n%s\n' "$PRETTY_NAME" "$VERSION_CODENAME"`); ok {
		if want := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); inv.OS.PrettyName != want[0] || inv.OS.Codename != want[1] {
			t.Errorf("OS pretty name %q, codename %q; the shell reads %q", inv.OS.PrettyName, inv.OS.Codename, want)
		}
	}
	if out, ok := toolOutput(t, "free", "-b"); ok {
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Swap:" && f[1] != strconv.FormatUint(inv.Hardware.SwapBytes, 10) {
				t.Errorf("SwapBytes = %d, free says %s", inv.Hardware.SwapBytes, f[1])
			}
		}
	}
	assertGatewaysMatchIP(t, inv.Network)
	assertVirtualizationMatchesSystemd(t, inv.Hardware)
	if out, ok := toolOutput(t, "lsblk", "-J", "-b", "-d", "-o", "NAME,MODEL,SIZE,ROTA,SERIAL,TYPE"); ok {
		listed, err := parseLsblk([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range inv.Hardware.PhysicalDisks {
			i := slices.IndexFunc(listed, func(l agentproto.PhysicalDisk) bool { return l.Name == d.Name })
			if i < 0 || listed[i].SizeBytes != d.SizeBytes || listed[i].Rotational != d.Rotational {
				t.Errorf("disk %+v; lsblk lists %+v", d, listed)
			}
		}
	}
	if out, ok := toolOutput(t, "lscpu", "-J"); ok {
		var doc struct {
			Lscpu []struct{ Field, Data string } `json:"lscpu"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		for _, f := range doc.Lscpu {
			if f.Field == "Vendor ID:" && f.Data != inv.Hardware.CPUVendor {
				t.Errorf("CPUVendor = %q, lscpu says %q", inv.Hardware.CPUVendor, f.Data)
			}
			if f.Field == "CPU(s):" && f.Data != strconv.Itoa(inv.Hardware.CPUThreads) {
				t.Errorf("CPUThreads = %d, lscpu says %s", inv.Hardware.CPUThreads, f.Data)
			}
		}
	}
	if out, ok := toolOutput(t, "last", "-w", "-n", "50"); ok {
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] == "reboot" || f[0] == "shutdown" || f[0] == "wtmp" {
				continue
			}
			user := f[0]
			if len(inv.LastLogons) == 0 || inv.LastLogons[0].Username != user {
				t.Errorf("last logon %+v, last says %q", inv.LastLogons, user)
			}
			break
		}
	}
}

func assertGatewaysMatchIP(t *testing.T, nics []agentproto.NetworkInterface) {
	t.Helper()
	got := map[string][]string{}
	for _, n := range nics {
		if len(n.Gateways) > 0 {
			got[n.Name] = n.Gateways
		}
	}
	want := map[string][]string{}
	for _, family := range []string{"-4", "-6"} {
		out, ok := toolOutput(t, "ip", "-j", family, "route", "show", "default")
		if !ok {
			return
		}
		var routes []struct{ Gateway, Dev string }
		if err := json.Unmarshal([]byte(out), &routes); err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Gateway != "" && !slices.Contains(want[r.Dev], r.Gateway) {
				want[r.Dev] = append(want[r.Dev], r.Gateway)
			}
		}
	}
	for dev, gateways := range want {
		if !slices.Equal(got[dev], gateways) {
			t.Errorf("gateways %q, ip route says %q", got, want)
		}
	}
	if len(got) != len(want) {
		t.Errorf("gateways %q, ip route says %q", got, want)
	}
}

// assertVirtualizationMatchesSystemd compares the verdict with systemd-detect-virt's answer
// for the same kind. Its overall answer may differ by design: it trusts a /.dockerenv that a
// VM verdict outranks here.
func assertVirtualizationMatchesSystemd(t *testing.T, hw agentproto.Hardware) {
	t.Helper()
	flag := map[string]string{virtVM: "--vm", virtContainer: "--container"}[hw.VirtualizationType]
	if flag == "" {
		return
	}
	// systemd-detect-virt exits 1 when it finds nothing, printing "none".
	out, _ := exec.Command("systemd-detect-virt", flag).Output()
	if want := strings.TrimSpace(string(out)); want != "" && want != hw.Virtualization {
		t.Errorf("virtualization %s/%s, systemd-detect-virt %s says %q", hw.VirtualizationType, hw.Virtualization, flag, want)
	}
}

// toolOutput runs a tool of the machine, reporting false when it is not installed or fails.
func toolOutput(t *testing.T, name string, args ...string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Logf("%s not installed: comparison skipped", name)
		return "", false
	}
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Logf("%s %s: %v: comparison skipped", name, strings.Join(args, " "), err)
		return "", false
	}
	return string(out), true
}
