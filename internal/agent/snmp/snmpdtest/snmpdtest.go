// Package snmpdtest runs a real net-snmp agent (snmpd) for tests: its own configuration and
// persistent directory under the test's temporary directory, a free loopback UDP port, a v2c
// community, v3 authPriv users (SHA/AES and SHA-256/AES-256), one integer the test sets (a pass_persist
// script) and any table the test gives under 1.0.8802 (another, for LLDP-MIB). It never reads
// or writes the host's SNMP configuration.
package snmpdtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

// Credentials of the daemon.
const (
	Community = "galepublic"
	User      = "galeuser"
	// User256 authenticates with SHA-256 and encrypts with AES-256 (the same passwords).
	User256  = "galeuser256"
	AuthPass = "galeauthpass"
	PrivPass = "galeprivpass"
	// PassOID is the integer the test sets with SetValue.
	PassOID = "1.3.6.1.4.1.8072.9999.1.0"
)

// Hosts are the loopback addresses the daemon answers on, so one daemon can be several
// devices of an organization (whose devices have distinct addresses).
var Hosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// Daemon is a running snmpd.
type Daemon struct {
	Port int
	dir  string
}

// TableRoot is the subtree that Start's entries are served under: IEEE 802's MIBs (LLDP).
const TableRoot = "1.0.8802"

// Entry is a value the daemon serves under TableRoot. Type is a pass script's: integer,
// gauge, counter, timeticks, ipaddress, objectid, string, or octet (Value in hex, "00 1a").
type Entry struct {
	OID, Type, Value string
}

// Start starts snmpd for t and stops it when t ends; it skips t when snmpd is not installed.
// It also serves entries (for GET, GETNEXT and walks) under TableRoot.
func Start(t testing.TB, entries ...Entry) *Daemon {
	t.Helper()
	snmpd, err := exec.LookPath("snmpd")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/snmpd"); err != nil {
			t.Skip("snmpd is not installed (Debian package snmpd); the SNMP tests need a real SNMP agent")
		}
		snmpd = "/usr/sbin/snmpd"
	}
	if _, err := exec.LookPath("snmpget"); err != nil {
		t.Skip("snmpget is not installed (Debian package snmp); the SNMP tests compare with it")
	}
	d := &Daemon{Port: freeUDPPort(t), dir: t.TempDir()}
	must(t, os.MkdirAll(filepath.Join(d.dir, "persist"), 0o700))
	d.SetValue(t, 0)
	script := filepath.Join(d.dir, "pass.sh")
	// A pass_persist script: snmpd keeps it running and asks it each time (a plain pass
	// script's output is cached by snmpd for 30 seconds).
	must(t, os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
while read -r cmd; do
	case "$cmd" in
	PING) echo PONG ;;
	get) read -r oid; if [ "$oid" = ".%[1]s" ]; then echo "$oid"; echo integer; cat '%[2]s'; else echo NONE; fi ;;
	getnext) read -r oid; echo NONE ;;
	set) read -r oid; read -r value; echo not-writable ;;
	*) exit 0 ;;
	esac
done
`, PassOID, filepath.Join(d.dir, "value"))), 0o755))
	table := filepath.Join(d.dir, "table.sh")
	must(t, os.WriteFile(filepath.Join(d.dir, "table"), []byte(tableLines(entries)), 0o644))
	// GETNEXT answers the first entry past the OID asked, comparing OIDs arc by arc.
	must(t, os.WriteFile(table, []byte(fmt.Sprintf(`#!/bin/sh
file='%s'
while read -r cmd; do
	case "$cmd" in
	PING) echo PONG ;;
	get|getnext) read -r oid
		awk -F '	' -v want="$oid" -v next_="$([ "$cmd" = getnext ] && echo 1)" '
		function cmp(a, b,   x, y, na, nb, i) {
			na = split(a, x, "."); nb = split(b, y, ".")
			for (i = 2; i <= na && i <= nb; i++) { if (x[i] + 0 != y[i] + 0) return x[i] + 0 < y[i] + 0 ? -1 : 1 }
			return na - nb
		}
		{ c = cmp($1, want); if ((next_ && c > 0) || (!next_ && c == 0)) { print $1; print $2; print $3; found = 1; exit } }
		END { if (!found) print "NONE" }' "$file" ;;
	set) read -r oid; read -r value; echo not-writable ;;
	*) exit 0 ;;
	esac
done
`, filepath.Join(d.dir, "table"))), 0o755))
	conf := filepath.Join(d.dir, "snmpd.conf")
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf(`agentAddress udp:127.0.0.1:%[7]d,udp:127.0.0.2:%[7]d,udp:127.0.0.3:%[7]d
rocommunity %[1]s 127.0.0.0/8
createUser %[2]s SHA %[3]s AES %[4]s
rouser %[2]s authPriv
createUser %[10]s SHA-256 %[3]s AES256 %[4]s
rouser %[10]s authPriv
sysLocation Gale test lab
sysContact ops@example.com
pass_persist .%[5]s /bin/sh %[6]s
pass_persist .%[8]s /bin/sh %[9]s
`, Community, User, AuthPass, PrivPass, strings.TrimSuffix(PassOID, ".0"), script, d.Port, TableRoot, table, User256)), 0o600))
	cmd := exec.Command(snmpd, "-f", "-C", "-c", conf, "-Lf", filepath.Join(d.dir, "snmpd.log"), "-r")
	cmd.Env = d.env()
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := d.run("snmpget", append(d.V2cArgs(), "1.3.6.1.2.1.1.5.0")...)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(d.dir, "snmpd.log"))
			t.Fatalf("snmpd did not answer: %v %s\n%s", err, out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d
}

// env keeps the daemon and the tools away from the host's configuration and MIB files.
func (d *Daemon) env() []string {
	p := filepath.Join(d.dir, "persist")
	return append(os.Environ(), "SNMP_PERSISTENT_DIR="+p, "SNMPCONFPATH="+p, "MIBS=", "MIBDIRS="+p)
}

func (d *Daemon) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(tool, args...)
	cmd.Env = d.env()
	return cmd.CombinedOutput()
}

// SetValue sets the integer at PassOID.
func (d *Daemon) SetValue(t testing.TB, v int) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(d.dir, "value"), []byte(strconv.Itoa(v)+"\n"), 0o644))
}

// V2c is the daemon as a v2c target.
func (d *Daemon) V2c() agentproto.SNMPTarget {
	return agentproto.SNMPTarget{Host: "127.0.0.1", Port: d.Port, Version: agentproto.SNMPv2c, Community: Community}
}

// V3 is the daemon as a v3 authPriv (SHA/AES) target.
func (d *Daemon) V3() agentproto.SNMPTarget {
	return agentproto.SNMPTarget{Host: "127.0.0.1", Port: d.Port, Version: agentproto.SNMPv3, V3: &agentproto.SNMPv3Auth{
		Username: User, AuthProtocol: "SHA", AuthPassword: AuthPass, PrivProtocol: "AES", PrivPassword: PrivPass}}
}

// V3SHA256 is the daemon as a v3 authPriv target with SHA-256 and AES-256.
func (d *Daemon) V3SHA256() agentproto.SNMPTarget {
	return agentproto.SNMPTarget{Host: "127.0.0.1", Port: d.Port, Version: agentproto.SNMPv3, V3: &agentproto.SNMPv3Auth{
		Username: User256, AuthProtocol: "SHA-256", AuthPassword: AuthPass, PrivProtocol: "AES-256", PrivPassword: PrivPass}}
}

// V3SHA256Args are net-snmp tool arguments for the SHA-256/AES-256 target (without the OID).
func (d *Daemon) V3SHA256Args() []string {
	return []string{"-On", "-v3", "-l", "authPriv", "-u", User256, "-a", "SHA-256", "-A", AuthPass, "-x", "AES-256", "-X", PrivPass,
		fmt.Sprintf("127.0.0.1:%d", d.Port)}
}

// V2cArgs are net-snmp tool arguments for the v2c target (without the OID).
func (d *Daemon) V2cArgs() []string {
	return []string{"-On", "-v2c", "-c", Community, fmt.Sprintf("127.0.0.1:%d", d.Port)}
}

// V3Args are net-snmp tool arguments for the v3 target (without the OID).
func (d *Daemon) V3Args() []string {
	return []string{"-On", "-v3", "-l", "authPriv", "-u", User, "-a", "SHA", "-A", AuthPass, "-x", "AES", "-X", PrivPass,
		fmt.Sprintf("127.0.0.1:%d", d.Port)}
}

// Walk runs snmpwalk -On with args (V2cArgs or V3Args) under root and returns each OID's
// value as Format prints it.
func (d *Daemon) Walk(t testing.TB, args []string, root string) map[string]string {
	t.Helper()
	out, err := d.run("snmpwalk", append(args, root)...)
	if err != nil {
		t.Fatalf("snmpwalk: %v\n%s", err, out)
	}
	vals := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		oid, val, ok := strings.Cut(sc.Text(), " = ")
		if !ok {
			continue
		}
		vals[strings.TrimPrefix(oid, ".")] = parse(val)
	}
	return vals
}

// parse turns snmpwalk's printing of a value into Format's.
func parse(v string) string {
	typ, val, ok := strings.Cut(v, ": ")
	if !ok {
		return strings.Trim(v, `"`)
	}
	switch typ {
	case "STRING":
		return strings.Trim(val, `"`)
	case "Hex-STRING":
		return strings.TrimSpace(val)
	case "OID":
		return strings.TrimPrefix(val, ".")
	case "Timeticks":
		n, _, _ := strings.Cut(strings.TrimPrefix(val, "("), ")")
		return n
	}
	return val
}

// Format prints a value for comparison with Walk's: its number, or its text.
func Format(v agentproto.SNMPValue) string {
	if v.Number != nil {
		return strconv.FormatFloat(*v.Number, 'f', -1, 64)
	}
	if v.Text != nil {
		return *v.Text
	}
	return ""
}

// tableLines writes entries in OID order, a line each: .oid, type and value separated by tabs.
func tableLines(entries []Entry) string {
	sorted := append([]Entry(nil), entries...)
	arcs := func(oid string) []int {
		var out []int
		for _, a := range strings.Split(strings.Trim(oid, "."), ".") {
			n, _ := strconv.Atoi(a)
			out = append(out, n)
		}
		return out
	}
	sort.Slice(sorted, func(i, j int) bool { return slices.Compare(arcs(sorted[i].OID), arcs(sorted[j].OID)) < 0 })
	var b strings.Builder
	for _, e := range sorted {
		fmt.Fprintf(&b, ".%s\t%s\t%s\n", strings.TrimPrefix(e.OID, "."), e.Type, e.Value)
	}
	return b.String()
}

func freeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
