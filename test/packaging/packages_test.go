package packaging

import (
	"runtime"
	"strings"
	"testing"
)

// installed checks what the two packages of version installed; unitDir is where this
// package format puts systemd units.
func installed(t *testing.T, r *sysroot, version, unitDir string) {
	t.Helper()
	if out := strings.TrimSpace(r.run("gale version; gale-agent version")); out != "gale "+version+"\n"+version {
		t.Fatalf("installed versions: %q", out)
	}
	for script, want := range map[string]string{
		"getent passwd gale | cut -d: -f6":                               "/var/lib/gale",
		"stat -c '%U:%G %a' /var/lib/gale":                               "gale:gale 750",
		"stat -c '%U:%G %a' /etc/gale/gale.env":                          "root:gale 640",
		"stat -c '%U:%G %a' /etc/gale/secrets.env":                       "root:gale 640",
		"grep -c '^JWT_SECRET=.\\{64\\}$' /etc/gale/secrets.env":         "1",
		"grep -c '^APP_ENCRYPTION_KEY=.\\{44\\}$' /etc/gale/secrets.env": "1",
		"ls /usr/lib/gale/agents":                                        version,
		"ls /usr/lib/gale/agents/" + version:                             "gale-agent-linux-" + runtime.GOARCH,
		"grep -h '^ExecStart=' " + unitDir + "/gale.service " + unitDir + "/gale-agent.service": "ExecStart=/usr/bin/gale serve\n" +
			"ExecStart=/usr/bin/gale-agent run --config /etc/gale-agent/agent.json",
	} {
		if got := strings.TrimSpace(r.run(script)); got != want {
			t.Errorf("%s = %q, want %q", script, got, want)
		}
	}
}

func TestDebInstallUpgradeRemovePurge(t *testing.T) {
	onSQLitePass(t)
	needTools(t, "dpkg")
	needRoots(t)
	d1, d2 := build(t, v1), build(t, v2)
	r := newRoot(t, d1.dir, d2.dir)

	out := r.run("dpkg --install " + d1.deb("gale") + " " + d1.deb("gale-agent"))
	if !strings.Contains(out, "set PUBLIC_URL in /etc/gale/gale.env") || !strings.Contains(out, "gale-agent enroll") {
		t.Errorf("the installation tells nothing of what to do next:\n%s", out)
	}
	installed(t, r, v1, "/lib/systemd/system")
	for _, unit := range []string{"gale.service", "gale-agent.service"} {
		if !r.exists("/etc/systemd/system/multi-user.target.wants/" + unit) {
			t.Errorf("%s is not enabled", unit)
		}
	}
	secrets := r.run("cat /etc/gale/secrets.env")
	r.run("echo PUBLIC_URL=https://gale.example.com >>/etc/gale/gale.env")

	r.run("dpkg --compare-versions " + pkgVersion[v2] + " gt " + pkgVersion[v1])
	r.run("dpkg --install " + d2.deb("gale") + " " + d2.deb("gale-agent"))
	installed(t, r, v2, "/lib/systemd/system")
	if got := r.run("cat /etc/gale/secrets.env"); got != secrets {
		t.Error("the upgrade generated new secrets")
	}
	if got := r.run("tail -n 1 /etc/gale/gale.env"); got != "PUBLIC_URL=https://gale.example.com\n" {
		t.Errorf("the upgrade lost the operator's setting: %q", got)
	}

	r.run("dpkg --remove gale gale-agent")
	for _, path := range []string{"/usr/bin/gale", "/usr/bin/gale-agent", "/usr/lib/gale", "/lib/systemd/system/gale.service"} {
		if r.exists(path) {
			t.Errorf("%s is left after removal", path)
		}
	}
	for _, path := range []string{"/etc/gale/gale.env", "/etc/gale/secrets.env", "/var/lib/gale"} {
		if !r.exists(path) {
			t.Errorf("removal (without purge) took %s", path)
		}
	}
	r.run("dpkg --purge gale gale-agent")
	for _, path := range []string{"/etc/gale", "/var/lib/gale", "/etc/gale-agent", "/usr/share/doc/gale",
		"/etc/systemd/system/multi-user.target.wants/gale.service", "/etc/systemd/system/gale.service"} {
		if r.exists(path) {
			t.Errorf("%s is left after purge", path)
		}
	}
	if out := r.run("dpkg-query --show --showformat '${db:Status-Status}\\n' gale gale-agent 2>&1 || true"); strings.Contains(out, "installed") {
		t.Errorf("dpkg still knows the packages: %s", out)
	}
}

func TestRPMInstallUpgradeErase(t *testing.T) {
	onSQLitePass(t)
	needTools(t, "rpm")
	needRoots(t)
	d1, d2 := build(t, v1), build(t, v2)
	r := newRoot(t, d1.dir, d2.dir)
	// This machine's RPM database lists none of the packages RPM systems have (shadow-utils,
	// systemd): --nodeps; the scripts find the commands on the machine.
	r.run("rpm --install --nodeps " + d1.rpm("gale") + " " + d1.rpm("gale-agent"))
	installed(t, r, v1, "/usr/lib/systemd/system")
	secrets := r.run("cat /etc/gale/secrets.env")
	r.run("echo PUBLIC_URL=https://gale.example.com >>/etc/gale/gale.env")

	// rpm --upgrade refuses a package that is not newer.
	r.run("rpm --upgrade --nodeps " + d2.rpm("gale") + " " + d2.rpm("gale-agent"))
	installed(t, r, v2, "/usr/lib/systemd/system")
	if got := r.run("cat /etc/gale/secrets.env"); got != secrets {
		t.Error("the upgrade generated new secrets")
	}
	if got := r.run("tail -n 1 /etc/gale/gale.env"); got != "PUBLIC_URL=https://gale.example.com\n" {
		t.Errorf("the upgrade lost the operator's setting: %q", got)
	}

	r.run("rpm --erase gale gale-agent")
	for _, path := range []string{"/usr/bin/gale", "/usr/bin/gale-agent", "/usr/lib/gale", "/usr/share/doc/gale",
		"/usr/lib/systemd/system/gale.service", "/etc/gale/gale.env"} {
		if r.exists(path) {
			t.Errorf("%s is left after erase", path)
		}
	}
	// RPM keeps a changed configuration file aside, and what the package did not install:
	// the secrets and the server's state.
	for _, path := range []string{"/etc/gale/gale.env.rpmsave", "/etc/gale/secrets.env", "/var/lib/gale"} {
		if !r.exists(path) {
			t.Errorf("erase took %s", path)
		}
	}
	if out, err := r.try("rpm --query gale gale-agent"); err == nil {
		t.Errorf("rpm still knows the packages: %s", out)
	}
}
