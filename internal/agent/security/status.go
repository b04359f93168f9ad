// Package security is the agent's view of a machine's protection on Linux: the firewall, disk
// encryption, password policy, administrators, listening ports, antivirus and automatic
// updates (security_status), threat scans with ClamAV or the built-in signatures
// (security_scan), and the quarantine (threat_action).
package security

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// Options say where the collector reads the system.
type Options struct {
	// Root is the tree whose files (/etc, /var/lib) are read; "" or "/" is the machine's own.
	Root string
	// Proc is the proc file system read for sockets; "" is /proc.
	Proc string
	// Command runs a system tool (nft, lsblk, systemctl) and returns its standard output;
	// nil runs it directly. Tests run the tools in a network namespace of their own.
	Command func(ctx context.Context, name string, args ...string) ([]byte, error)
	// QuarantineDir holds quarantined files; "" is /var/lib/gale-agent/quarantine.
	QuarantineDir string
	// ProgressEvery is how often a running scan reports how many files it looked at; zero is
	// once a second.
	ProgressEvery time.Duration
}

// Collector reads a machine's security state.
type Collector struct{ o Options }

// New returns a Collector.
func New(o Options) *Collector {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	if o.Command == nil {
		o.Command = runTool
	}
	if o.QuarantineDir == "" {
		o.QuarantineDir = "/var/lib/gale-agent/quarantine"
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = time.Second
	}
	return &Collector{o: o}
}

// maxToolOutput bounds what is read of a tool's output.
const maxToolOutput = 8 << 20

func runTool(ctx context.Context, name string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &limitWriter{w: &out, left: maxToolOutput}
	err := cmd.Run()
	return out.Bytes(), err
}

type limitWriter struct {
	w    *bytes.Buffer
	left int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > l.left {
		p = p[:l.left]
	}
	l.left -= len(p)
	l.w.Write(p)
	return n, nil
}

func (c *Collector) path(p string) string { return filepath.Join(c.o.Root, p) }

// Status collects the machine's security state.
func (c *Collector) Status(ctx context.Context) agentproto.SecurityStatus {
	return agentproto.SecurityStatus{
		CollectedAt:      time.Now().UTC(),
		Firewall:         c.firewall(ctx),
		Encryption:       c.encryption(ctx),
		PasswordPolicy:   c.passwordPolicy(),
		Administrators:   c.administrators(),
		ListeningPorts:   c.listeningPorts(),
		Antivirus:        c.antivirus(ctx),
		AutomaticUpdates: c.automaticUpdates(ctx),
	}
}

// unitActive reports whether a systemd unit is active.
func (c *Collector) unitActive(ctx context.Context, unit string) bool {
	out, err := c.o.Command(ctx, "systemctl", "is-active", unit)
	return err == nil && strings.TrimSpace(string(out)) == "active"
}

// firewall prefers the manager in charge (ufw, firewalld) to the raw nftables ruleset.
func (c *Collector) firewall(ctx context.Context) agentproto.FirewallState {
	if conf, err := os.ReadFile(c.path("etc/ufw/ufw.conf")); err == nil {
		if keyValue(conf, "=")["ENABLED"] == "yes" {
			st := agentproto.FirewallState{Backend: agentproto.FirewallUFW, Enabled: true, Detail: "ufw is enabled"}
			if nft, ok := c.nftables(ctx); ok {
				st.Rules, st.InputPolicy = nft.Rules, nft.InputPolicy
			}
			return st
		}
	}
	if c.unitActive(ctx, "firewalld") {
		st := agentproto.FirewallState{Backend: agentproto.FirewallFirewalld, Enabled: true, Detail: "firewalld is running"}
		if nft, ok := c.nftables(ctx); ok {
			st.Rules, st.InputPolicy = nft.Rules, nft.InputPolicy
		}
		return st
	}
	if nft, ok := c.nftables(ctx); ok {
		return nft
	}
	return agentproto.FirewallState{Backend: agentproto.FirewallNone, Detail: "no firewall found (nft is not installed or lists nothing)"}
}

// nftables reads the ruleset. It filters when it holds rules, or an input chain drops or
// rejects by default.
func (c *Collector) nftables(ctx context.Context) (agentproto.FirewallState, bool) {
	out, err := c.o.Command(ctx, "nft", "-j", "list", "ruleset")
	if err != nil {
		return agentproto.FirewallState{}, false
	}
	st, err := parseNftables(out)
	return st, err == nil
}

func parseNftables(out []byte) (agentproto.FirewallState, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return agentproto.FirewallState{}, err
	}
	st := agentproto.FirewallState{Backend: agentproto.FirewallNftables}
	for _, obj := range doc.Nftables {
		if _, ok := obj["rule"]; ok {
			st.Rules++
		}
		raw, ok := obj["chain"]
		if !ok {
			continue
		}
		var ch struct {
			Hook   string `json:"hook"`
			Policy string `json:"policy"`
			Type   string `json:"type"`
		}
		if json.Unmarshal(raw, &ch) == nil && ch.Hook == "input" && ch.Type == "filter" {
			// The strictest input chain decides: a packet must pass every one.
			if st.InputPolicy == "" || ch.Policy == "drop" || (ch.Policy == "reject" && st.InputPolicy == "accept") {
				st.InputPolicy = ch.Policy
			}
		}
	}
	st.Enabled = st.Rules > 0 || st.InputPolicy == "drop" || st.InputPolicy == "reject"
	st.Detail = fmt.Sprintf("nftables: %d rules", st.Rules)
	if st.InputPolicy != "" {
		st.Detail += ", input policy " + st.InputPolicy
	}
	return st, nil
}

// blockDevice is a node of lsblk's tree.
type blockDevice struct {
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	FSType     *string       `json:"fstype"`
	Mountpoint *string       `json:"mountpoint"`
	Children   []blockDevice `json:"children"`
}

func (c *Collector) encryption(ctx context.Context) agentproto.EncryptionState {
	out, err := c.o.Command(ctx, "lsblk", "-J", "-o", "NAME,TYPE,FSTYPE,MOUNTPOINT")
	if err != nil {
		return agentproto.EncryptionState{Status: agentproto.EncryptionUnknown, Volumes: []agentproto.EncryptedVolume{}}
	}
	return parseLsblk(out)
}

// parseLsblk finds the mounted volumes in lsblk's tree and whether a LUKS (crypt) device lies
// between each and its disk.
func parseLsblk(out []byte) agentproto.EncryptionState {
	var doc struct {
		BlockDevices []blockDevice `json:"blockdevices"`
	}
	st := agentproto.EncryptionState{Status: agentproto.EncryptionUnknown, Volumes: []agentproto.EncryptedVolume{}}
	if json.Unmarshal(out, &doc) != nil {
		return st
	}
	var walk func(d blockDevice, encrypted bool)
	walk = func(d blockDevice, encrypted bool) {
		if d.Type == "crypt" || (d.FSType != nil && *d.FSType == "crypto_LUKS") {
			encrypted = true
		}
		if d.Mountpoint != nil && *d.Mountpoint != "" && d.Type != "loop" && d.Type != "rom" {
			st.Volumes = append(st.Volumes, agentproto.EncryptedVolume{Device: d.Name, Mountpoint: *d.Mountpoint, Encrypted: encrypted})
		}
		for _, ch := range d.Children {
			walk(ch, encrypted)
		}
	}
	for _, d := range doc.BlockDevices {
		walk(d, false)
	}
	enc := 0
	for _, v := range st.Volumes {
		if v.Encrypted {
			enc++
		}
	}
	switch {
	case len(st.Volumes) == 0:
		st.Status = agentproto.EncryptionUnknown
	case enc == len(st.Volumes):
		st.Status = agentproto.EncryptionFull
	case enc > 0:
		st.Status = agentproto.EncryptionPartial
	default:
		st.Status = agentproto.EncryptionNone
	}
	return st
}

// keyValue reads "KEY<sep>value" lines (login.defs uses blanks, pwquality and ufw "="),
// skipping comments.
func keyValue(b []byte, sep string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var k, v string
		var ok bool
		if sep == "" {
			f := strings.Fields(line)
			if len(f) >= 2 {
				k, v, ok = f[0], f[1], true
			}
		} else {
			k, v, ok = strings.Cut(line, sep)
		}
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return out
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func (c *Collector) passwordPolicy() agentproto.PasswordPolicy {
	var p agentproto.PasswordPolicy
	if b, err := os.ReadFile(c.path("etc/login.defs")); err == nil {
		kv := keyValue(b, "")
		p.MaxDays, p.MinDays, p.WarnDays = atoi(kv["PASS_MAX_DAYS"]), atoi(kv["PASS_MIN_DAYS"]), atoi(kv["PASS_WARN_AGE"])
	}
	if b, err := os.ReadFile(c.path("etc/security/pwquality.conf")); err == nil {
		kv := keyValue(b, "=")
		p.MinLength, p.MinClasses = atoi(kv["minlen"]), atoi(kv["minclass"])
	}
	var parts []string
	switch {
	case p.MaxDays <= 0 || p.MaxDays >= 99999:
		parts = append(parts, "passwords never expire")
	default:
		parts = append(parts, fmt.Sprintf("passwords expire after %d days", p.MaxDays))
	}
	if p.MinLength > 0 {
		parts = append(parts, fmt.Sprintf("at least %d characters", p.MinLength))
	} else {
		parts = append(parts, "no length rule")
	}
	if p.MinClasses > 0 {
		parts = append(parts, fmt.Sprintf("%d character classes", p.MinClasses))
	}
	p.Summary = strings.Join(parts, ", ")
	return p
}

// adminGroups are the groups whose members may become root through sudo (or su on wheel).
var adminGroups = []string{"sudo", "wheel", "admin"}

func (c *Collector) administrators() []agentproto.AdminAccount {
	out := []agentproto.AdminAccount{}
	passwd, err := os.ReadFile(c.path("etc/passwd"))
	if err != nil {
		return out
	}
	locked := map[string]bool{}
	if shadow, err := os.ReadFile(c.path("etc/shadow")); err == nil {
		for line := range strings.Lines(string(shadow)) {
			f := strings.Split(strings.TrimSpace(line), ":")
			if len(f) > 1 {
				locked[f[0]] = strings.HasPrefix(f[1], "!") || strings.HasPrefix(f[1], "*")
			}
		}
	}
	type account struct {
		uid   int
		shell string
	}
	accounts := map[string]account{}
	var names []string
	for line := range strings.Lines(string(passwd)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 7 {
			continue
		}
		uid, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		accounts[f[0]] = account{uid: uid, shell: f[6]}
		names = append(names, f[0])
	}
	seen := map[string]bool{}
	add := func(name, via string) {
		a, ok := accounts[name]
		if !ok || seen[name] {
			return
		}
		seen[name] = true
		out = append(out, agentproto.AdminAccount{Name: name, UID: a.uid, Via: via, Shell: a.shell, Locked: locked[name],
			LastLogin: c.lastLogin(a.uid)})
	}
	for _, n := range names {
		if accounts[n].uid == 0 {
			add(n, "uid0")
		}
	}
	if group, err := os.ReadFile(c.path("etc/group")); err == nil {
		for line := range strings.Lines(string(group)) {
			f := strings.Split(strings.TrimSpace(line), ":")
			if len(f) < 4 || !slices.Contains(adminGroups, f[0]) || f[3] == "" {
				continue
			}
			for _, m := range strings.Split(f[3], ",") {
				add(strings.TrimSpace(m), f[0])
			}
		}
	}
	return out
}

// lastlogRecord is the size of a record of /var/log/lastlog (struct lastlog: a 32-bit time,
// the terminal, the remote host), one per uid at uid × size.
const lastlogRecord = 4 + 32 + 256

// lastLogin reads uid's last sign-in from /var/log/lastlog (little-endian, as on every platform
// the agent ships for); nil when it never signed in, or the file is absent or short.
func (c *Collector) lastLogin(uid int) *time.Time {
	f, err := os.Open(c.path("var/log/lastlog"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], int64(uid)*lastlogRecord); err != nil {
		return nil
	}
	sec := binary.LittleEndian.Uint32(b[:])
	if sec == 0 {
		return nil
	}
	t := time.Unix(int64(sec), 0).UTC()
	return &t
}

// listeningPorts reads the kernel's socket tables: TCP sockets listening (state 0A) and UDP
// sockets bound without a peer (state 07).
func (c *Collector) listeningPorts() []agentproto.ListeningPort {
	out := []agentproto.ListeningPort{}
	seen := map[string]bool{}
	for _, t := range []struct{ file, proto, state string }{
		{"net/tcp", "tcp", "0A"}, {"net/tcp6", "tcp6", "0A"}, {"net/udp", "udp", "07"}, {"net/udp6", "udp6", "07"},
	} {
		b, err := os.ReadFile(filepath.Join(c.o.Proc, t.file))
		if err != nil {
			continue
		}
		for _, p := range parseSockets(b, t.proto, t.state) {
			key := p.Protocol + " " + p.Address + " " + strconv.Itoa(p.Port)
			if !seen[key] {
				seen[key] = true
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b agentproto.ListeningPort) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return strings.Compare(a.Protocol+a.Address, b.Protocol+b.Address)
	})
	return out
}

// parseSockets reads a /proc/net/{tcp,udp}{,6} table.
func parseSockets(b []byte, proto, state string) []agentproto.ListeningPort {
	var out []agentproto.ListeningPort
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 || f[3] != state {
			continue
		}
		if proto == "udp" || proto == "udp6" {
			if _, port, ok := strings.Cut(f[2], ":"); !ok || port != "0000" {
				continue // connected, not waiting
			}
		}
		hexAddr, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			continue
		}
		addr, ok := kernelAddr(hexAddr)
		if !ok {
			continue
		}
		out = append(out, agentproto.ListeningPort{Protocol: proto, Address: addr.String(), Port: int(port), Exposed: !addr.IsLoopback()})
	}
	return out
}

// kernelAddr decodes an address as the kernel prints it: 32-bit words in host (little-endian)
// order.
func kernelAddr(s string) (netip.Addr, bool) {
	raw, err := hex.DecodeString(s)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, false
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	a, ok := netip.AddrFromSlice(raw)
	return a.Unmap(), ok
}

func (c *Collector) antivirus(ctx context.Context) agentproto.AntivirusState {
	var st agentproto.AntivirusState
	for _, bin := range []string{"usr/bin/clamscan", "usr/sbin/clamd", "usr/bin/clamdscan"} {
		if _, err := os.Stat(c.path(bin)); err == nil {
			st.Installed = true
		}
	}
	if !st.Installed {
		return st
	}
	st.Provider = "clamav"
	st.DaemonRunning = c.unitActive(ctx, "clamav-daemon")
	st.RealTimeProtection = st.DaemonRunning && c.unitActive(ctx, "clamav-clamonacc")
	for _, db := range []string{"daily.cld", "daily.cvd"} {
		if info, err := os.Stat(c.path("var/lib/clamav/" + db)); err == nil {
			t := info.ModTime().UTC()
			if st.SignaturesUpdatedAt == nil || t.After(*st.SignaturesUpdatedAt) {
				st.SignaturesUpdatedAt = &t
			}
		}
	}
	return st
}

func (c *Collector) automaticUpdates(ctx context.Context) agentproto.AutomaticUpdates {
	if _, err := os.Stat(c.path("usr/bin/unattended-upgrade")); err == nil {
		files, _ := filepath.Glob(c.path("etc/apt/apt.conf.d/*"))
		on := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(b)) {
				line = strings.TrimSpace(line)
				if strings.HasPrefix(line, "//") {
					continue
				}
				if v, ok := strings.CutPrefix(line, `APT::Periodic::Unattended-Upgrade`); ok {
					on = strings.Contains(v, `"1"`) || strings.Contains(v, `"true"`)
				}
			}
		}
		if on {
			return agentproto.AutomaticUpdates{Enabled: true, Mechanism: "unattended-upgrades"}
		}
	}
	for _, timer := range []string{"dnf-automatic.timer", "dnf-automatic-install.timer"} {
		if c.unitActive(ctx, timer) {
			return agentproto.AutomaticUpdates{Enabled: true, Mechanism: "dnf-automatic"}
		}
	}
	return agentproto.AutomaticUpdates{}
}
