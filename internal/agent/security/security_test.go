package security

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

func write(t *testing.T, root, path, content string) {
	t.Helper()
	p := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// noTools is a system without nft, lsblk or systemd.
func noTools(context.Context, string, ...string) ([]byte, error) { return nil, exec.ErrNotFound }

// A root's files say its password policy, administrators, antivirus and automatic updates.
func TestStatusFromARoot(t *testing.T) {
	root := t.TempDir()
	write(t, root, "etc/login.defs", "# ageing\nPASS_MAX_DAYS\t90\nPASS_MIN_DAYS 1\nPASS_WARN_AGE 7\n")
	write(t, root, "etc/security/pwquality.conf", "# length\nminlen = 12\nminclass = 3\n")
	write(t, root, "etc/passwd", "root:x:0:0:root:/root:/bin/bash\ntoor:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/bash\n"+
		"bob:x:1001:1001::/home/bob:/bin/bash\ncarol:x:1002:1002::/home/carol:/bin/zsh\n")
	write(t, root, "etc/shadow", "root:!:19000::::::\ntoor:$6$x:19000::::::\nalice:$6$y:19000::::::\nbob:*:19000::::::\ncarol:$6$z:19000::::::\n")
	write(t, root, "etc/group", "root:x:0:\nsudo:x:27:alice,bob\nwheel:x:10:alice\nusers:x:100:carol\n")
	write(t, root, "etc/ufw/ufw.conf", "ENABLED=no\n")
	// alice (uid 1000) last signed in on 1 June 2026; the others never did.
	lastlog := make([]byte, 1001*lastlogRecord)
	signedIn := time.Date(2026, 6, 1, 8, 30, 0, 0, time.UTC)
	binary.LittleEndian.PutUint32(lastlog[1000*lastlogRecord:], uint32(signedIn.Unix()))
	write(t, root, "var/log/lastlog", string(lastlog))
	write(t, root, "usr/bin/clamscan", "")
	write(t, root, "var/lib/clamav/daily.cld", "")
	write(t, root, "usr/bin/unattended-upgrade", "")
	write(t, root, "etc/apt/apt.conf.d/20auto-upgrades", "APT::Periodic::Update-Package-Lists \"1\";\nAPT::Periodic::Unattended-Upgrade \"1\";\n")
	c := New(Options{Root: root, Proc: t.TempDir(), Command: noTools})
	st := c.Status(context.Background())

	if p := st.PasswordPolicy; p.MaxDays != 90 || p.MinDays != 1 || p.WarnDays != 7 || p.MinLength != 12 || p.MinClasses != 3 ||
		p.Summary != "passwords expire after 90 days, at least 12 characters, 3 character classes" {
		t.Errorf("password policy %+v", p)
	}
	want := []agentproto.AdminAccount{{Name: "root", UID: 0, Via: "uid0", Shell: "/bin/bash", Locked: true},
		{Name: "toor", UID: 0, Via: "uid0", Shell: "/bin/sh"}, {Name: "alice", UID: 1000, Via: "sudo", Shell: "/bin/bash"},
		{Name: "bob", UID: 1001, Via: "sudo", Shell: "/bin/bash", Locked: true}}
	var got []agentproto.AdminAccount
	for _, a := range st.Administrators {
		if a.Name == "alice" && (a.LastLogin == nil || !a.LastLogin.Equal(signedIn)) {
			t.Errorf("alice's last login %v, want %v", a.LastLogin, signedIn)
		} else if a.Name != "alice" && a.LastLogin != nil {
			t.Errorf("%s never signed in, last login %v", a.Name, a.LastLogin)
		}
		a.LastLogin = nil
		got = append(got, a)
	}
	if !slices.Equal(got, want) {
		t.Errorf("administrators %+v", st.Administrators)
	}
	if st.Firewall.Backend != agentproto.FirewallNone || st.Firewall.Enabled {
		t.Errorf("firewall with ufw disabled and no nft: %+v", st.Firewall)
	}
	if a := st.Antivirus; !a.Installed || a.Provider != "clamav" || a.DaemonRunning || a.RealTimeProtection || a.SignaturesUpdatedAt == nil {
		t.Errorf("antivirus %+v", a)
	}
	if u := st.AutomaticUpdates; !u.Enabled || u.Mechanism != "unattended-upgrades" {
		t.Errorf("automatic updates %+v", u)
	}
	if st.Encryption.Status != agentproto.EncryptionUnknown {
		t.Errorf("encryption without lsblk %+v", st.Encryption)
	}

	write(t, root, "etc/ufw/ufw.conf", "ENABLED=yes\n")
	write(t, root, "etc/apt/apt.conf.d/99off", "APT::Periodic::Unattended-Upgrade \"0\";\n")
	st = c.Status(context.Background())
	if st.Firewall.Backend != agentproto.FirewallUFW || !st.Firewall.Enabled || st.AutomaticUpdates.Enabled {
		t.Errorf("ufw enabled, updates off: %+v %+v", st.Firewall, st.AutomaticUpdates)
	}
	if empty := New(Options{Root: t.TempDir(), Command: noTools}).Status(context.Background()); empty.PasswordPolicy.Summary !=
		"passwords never expire, no length rule" || len(empty.Administrators) != 0 || empty.Antivirus.Installed {
		t.Errorf("an empty root: %+v", empty)
	}
}

func TestLsblkTree(t *testing.T) {
	out := `{"blockdevices": [
	  {"name":"sda","type":"disk","fstype":null,"mountpoint":null,"children":[
	    {"name":"sda1","type":"part","fstype":"vfat","mountpoint":"/boot/efi"},
	    {"name":"sda2","type":"part","fstype":"crypto_LUKS","mountpoint":null,"children":[
	      {"name":"root","type":"crypt","fstype":"ext4","mountpoint":"/"}]}]},
	  {"name":"loop0","type":"loop","fstype":"squashfs","mountpoint":"/snap/core/1"}]}`
	st := parseLsblk([]byte(out))
	want := []agentproto.EncryptedVolume{{Device: "sda1", Mountpoint: "/boot/efi"}, {Device: "root", Mountpoint: "/", Encrypted: true}}
	if st.Status != agentproto.EncryptionPartial || !slices.Equal(st.Volumes, want) {
		t.Fatalf("%+v", st)
	}
	if st := parseLsblk([]byte(`{"blockdevices":[{"name":"vda","type":"disk","fstype":"ext4","mountpoint":"/"}]}`)); st.Status != agentproto.EncryptionNone {
		t.Fatalf("plain disk %+v", st)
	}
	// This machine's own tree reads, whatever it holds.
	if _, err := exec.LookPath("lsblk"); err == nil {
		if st := New(Options{}).encryption(context.Background()); st.Status == "" {
			t.Fatalf("host %+v", st)
		}
	}
}

// Listening sockets come from the kernel's tables: a listener on the loopback is found and
// not exposed.
func TestListeningPorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ports := New(Options{}).listeningPorts()
	if !slices.Contains(ports, agentproto.ListeningPort{Protocol: "tcp", Address: "127.0.0.1", Port: port}) {
		t.Fatalf("port %d not among %+v", port, ports)
	}
	table := "  sl  local_address rem_address   st\n" +
		"   0: 00000000:0016 00000000:0000 0A 00000000:00000000\n" +
		"   1: 0100007F:1F90 0100007F:D4C2 01 00000000:00000000\n"
	got := parseSockets([]byte(table), "tcp", "0A")
	if !slices.Equal(got, []agentproto.ListeningPort{{Protocol: "tcp", Address: "0.0.0.0", Port: 22, Exposed: true}}) {
		t.Fatalf("parsed %+v", got)
	}
	v6 := "  sl  local_address rem_address st\n   0: 00000000000000000000000001000000:0277 00000000000000000000000000000000:0000 07 0\n"
	if got := parseSockets([]byte(v6), "udp6", "07"); !slices.Equal(got, []agentproto.ListeningPort{{Protocol: "udp6", Address: "::1", Port: 631}}) {
		t.Fatalf("udp6 %+v", got)
	}
}

// nftables in a network namespace of the test's own: an input chain dropping by default with
// one rule is an enabled firewall.
func TestNftablesInANamespace(t *testing.T) {
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian packages iproute2, nftables)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ns := fmt.Sprintf("galetest-sec-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	inNS := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...).Output()
	}
	c := New(Options{Root: t.TempDir(), Command: inNS})
	if st := c.firewall(context.Background()); st.Backend != agentproto.FirewallNftables || st.Enabled || st.Rules != 0 {
		t.Fatalf("empty ruleset %+v", st)
	}
	for _, cmd := range []string{"add table inet galetest", "add chain inet galetest input { type filter hook input priority 0; policy drop; }",
		"add rule inet galetest input tcp dport 22 accept"} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, strings.Fields(cmd)...)...).CombinedOutput(); err != nil {
			t.Fatalf("nft %s: %v %s", cmd, err, out)
		}
	}
	if st := c.firewall(context.Background()); st.Backend != agentproto.FirewallNftables || !st.Enabled || st.Rules != 1 || st.InputPolicy != "drop" {
		t.Fatalf("ruleset %+v", st)
	}
}

// The EICAR test file is found by the built-in signatures, quarantined into a 0700
// directory, restored, and removed; a file changed since the scan is not touched.
func TestScanAndQuarantine(t *testing.T) {
	dir := t.TempDir()
	q := filepath.Join(t.TempDir(), "quarantine")
	eicarPath := filepath.Join(dir, "sub", "eicar.com")
	write(t, dir, "sub/eicar.com", eicar+"\r\n")
	write(t, dir, "clean.txt", "hello")
	write(t, dir, "long.txt", eicar+strings.Repeat("x", 100))
	c := New(Options{Root: t.TempDir(), QuarantineDir: q})
	res, err := c.Scan(context.Background(), agentproto.SecurityScan{ScanType: agentproto.ScanCustom, Paths: []string{dir}}, nil)
	if err != nil || res.Engine != "builtin" || res.FilesScanned != 3 || len(res.Threats) != 1 {
		t.Fatalf("scan %+v %v", res, err)
	}
	th := res.Threats[0]
	sum := sha256.Sum256([]byte(eicar + "\r\n"))
	if th.FilePath != eicarPath || th.Name != "EICAR-Test-File" || th.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("threat %+v", th)
	}
	for _, bad := range []agentproto.SecurityScan{{ScanType: "deep"}, {ScanType: agentproto.ScanCustom}, {ScanType: agentproto.ScanCustom, Paths: []string{"relative"}}} {
		if _, err := c.Scan(context.Background(), bad, nil); err == nil {
			t.Errorf("scan %+v accepted", bad)
		}
	}

	act := func(action string, sha string) (agentproto.ThreatActionResult, error) {
		return c.Act(agentproto.ThreatAction{Action: action, FilePath: eicarPath, SHA256: sha})
	}
	if _, err := act(agentproto.ThreatQuarantine, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "changed since the scan") {
		t.Fatalf("quarantine with another checksum: %v", err)
	}
	r, err := act(agentproto.ThreatQuarantine, th.SHA256)
	if err != nil || r.Location != filepath.Join(q, th.SHA256) {
		t.Fatalf("quarantine %+v %v", r, err)
	}
	if _, err := os.Stat(eicarPath); !os.IsNotExist(err) {
		t.Fatalf("the file is still in place: %v", err)
	}
	if info, err := os.Stat(q); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("quarantine directory %v %v", info.Mode(), err)
	}
	if res, _ := c.Scan(context.Background(), agentproto.SecurityScan{ScanType: agentproto.ScanCustom, Paths: []string{dir}}, nil); len(res.Threats) != 0 {
		t.Fatalf("found again after the quarantine: %+v", res.Threats)
	}
	if r, err := act(agentproto.ThreatRestore, th.SHA256); err != nil || r.Location != eicarPath {
		t.Fatalf("restore %+v %v", r, err)
	}
	if info, err := os.Stat(eicarPath); err != nil || info.Mode().Perm() != 0o644 {
		t.Fatalf("restored file %v %v", info, err)
	}
	if _, err := act(agentproto.ThreatRestore, th.SHA256); err == nil {
		t.Fatal("a second restore succeeded")
	}
	if _, err := act(agentproto.ThreatQuarantine, th.SHA256); err != nil {
		t.Fatal(err)
	}
	if _, err := act(agentproto.ThreatRemove, th.SHA256); err != nil {
		t.Fatalf("remove from the quarantine: %v", err)
	}
	if left, _ := os.ReadDir(q); len(left) != 0 {
		t.Fatalf("the quarantine keeps %d entries", len(left))
	}
	if _, err := c.Act(agentproto.ThreatAction{Action: "burn", FilePath: eicarPath, SHA256: th.SHA256}); err == nil {
		t.Fatal("an unknown action was accepted")
	}
	if _, err := c.Act(agentproto.ThreatAction{Action: agentproto.ThreatRemove, FilePath: "relative", SHA256: th.SHA256}); err == nil {
		t.Fatal("a relative path was accepted")
	}
}

// A running scan reports over the live channel how many files it has looked at so far, naming
// its command, and its result the final count.
func TestAScanReportsItsProgress(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("security commands run on Linux only")
	}
	dir := t.TempDir()
	for i := range 5 {
		write(t, dir, fmt.Sprintf("f%d.txt", i), "hello")
	}
	reg := capability.New()
	New(Options{Root: t.TempDir(), QuarantineDir: filepath.Join(t.TempDir(), "q"), ProgressEvery: time.Nanosecond}).Register(reg)
	var sent []agentproto.SecurityScanProgress
	reg.Start(context.Background(), capability.Host{Send: func(typ string, payload any) {
		if p, ok := payload.(agentproto.SecurityScanProgress); ok && typ == agentproto.TypeSecurityScanProgress {
			sent = append(sent, p)
		}
	}})
	payload, _ := json.Marshal(agentproto.SecurityScan{ScanType: agentproto.ScanCustom, Paths: []string{dir}})
	res := reg.RunCommand(context.Background(), agentproto.Command{ID: "c1", Type: agentproto.CommandSecurityScan, Payload: payload})
	var out agentproto.SecurityScanResult
	if res.Status != agentproto.ResultCompleted || json.Unmarshal(res.Result, &out) != nil || out.FilesScanned != 5 {
		t.Fatalf("scan = %+v", res)
	}
	if len(sent) == 0 {
		t.Fatal("the scan reported no progress")
	}
	for i, p := range sent {
		if p.CommandID != "c1" || p.FilesScanned < 1 || p.FilesScanned > 5 || (i > 0 && p.FilesScanned <= sent[i-1].FilesScanned) {
			t.Fatalf("progress reports = %+v", sent)
		}
	}
}
