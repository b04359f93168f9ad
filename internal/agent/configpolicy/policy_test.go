package configpolicy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gale/internal/wire/agentproto"
)

func write(t *testing.T, root, path, content string) {
	t.Helper()
	full := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fakePackages(manager string, m map[string]string) Packages {
	return func(context.Context) (string, map[string]string, error) { return manager, m, nil }
}

func one(t *testing.T, e *Evaluator, r agentproto.PolicyRule) agentproto.PolicyRuleResult {
	t.Helper()
	res := e.Evaluate(context.Background(), []agentproto.PolicyRule{r})
	if len(res) != 1 || res[0].Type != r.Type || res[0].Rule != 0 {
		t.Fatalf("results %+v", res)
	}
	return res[0]
}

func TestSoftwareRules(t *testing.T) {
	e := New(Options{Packages: fakePackages(agentproto.ManagerApt, map[string]string{"curl": "7.88.1-10+deb12u5", "telnet": "0.17-44"})})
	cases := []struct {
		rule agentproto.PolicyRule
		pass bool
	}{
		{agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "curl"}, true},
		{agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "curl", MinVersion: "7.88.1-10"}, true},
		{agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "curl", MinVersion: "8.0"}, false},
		// Debian ordering: ~ sorts before the release.
		{agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "curl", MinVersion: "7.88.1-10+deb12u5~rc1"}, true},
		{agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "nginx"}, false},
		{agentproto.PolicyRule{Type: agentproto.RuleProhibitedSoftware, Name: "telnet"}, false},
		{agentproto.PolicyRule{Type: agentproto.RuleProhibitedSoftware, Name: "rsh-client"}, true},
	}
	for _, c := range cases {
		if got := one(t, e, c.rule); got.Passed != c.pass || got.Message == "" {
			t.Errorf("%+v: %+v, want passed %v", c.rule, got, c.pass)
		}
	}
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "nginx"}); got.Actual != "not installed" {
		t.Errorf("actual %q", got.Actual)
	}
}

func TestPackagesOfThisHost(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query on this host")
	}
	manager, pk, err := systemPackages(context.Background(), "/")
	if err != nil || manager != agentproto.ManagerApt {
		t.Fatal(manager, err)
	}
	v, ok := pk["dpkg"]
	if !ok {
		t.Fatalf("dpkg itself is not listed among %d packages", len(pk))
	}
	e := New(Options{})
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleRequiredSoftware, Name: "dpkg", MinVersion: "1.0"}); !got.Passed || got.Actual != v {
		t.Fatalf("%+v", got)
	}
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleProhibitedSoftware, Name: "dpkg"}); got.Passed {
		t.Fatalf("%+v", got)
	}
}

func TestParsePackageLists(t *testing.T) {
	d := parseDpkg([]byte("ii \tcurl\t7.88.1\nrc \told\t1.0\nii \tlibc6:amd64\t2.36-9\n"))
	if d["curl"] != "7.88.1" || d["libc6"] != "2.36-9" || len(d) != 2 {
		t.Fatalf("%v", d)
	}
	r := parseRPM([]byte("bash\t0:5.2.15-3.el9\nkernel\t1:6.1-2\n"))
	if r["bash"] != "5.2.15-3.el9" || r["kernel"] != "1:6.1-2" {
		t.Fatalf("%v", r)
	}
}

func TestDiskSpaceRule(t *testing.T) {
	dir := t.TempDir()
	e := New(Options{})
	huge, none := 1e9, 0.0
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleDiskSpaceMinimum, MountPoint: dir, MinFreeGB: &none}); !got.Passed || got.Actual == "" {
		t.Fatalf("%+v", got)
	}
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleDiskSpaceMinimum, MountPoint: dir, MinFreeGB: &huge}); got.Passed {
		t.Fatalf("%+v", got)
	}
	over := 100.1
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleDiskSpaceMinimum, MountPoint: dir, MinFreePercent: &over}); got.Passed {
		t.Fatalf("%+v", got)
	}
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleDiskSpaceMinimum, MountPoint: filepath.Join(dir, "missing"), MinFreeGB: &none}); got.Passed || got.Message == "" {
		t.Fatalf("%+v", got)
	}
	// The default mount point is the root, under Root.
	if got := one(t, New(Options{Root: dir}), agentproto.PolicyRule{Type: agentproto.RuleDiskSpaceMinimum, MinFreeGB: &none}); !got.Passed {
		t.Fatalf("%+v", got)
	}
}

func TestOSVersionRule(t *testing.T) {
	root := t.TempDir()
	write(t, root, "/etc/os-release", "NAME=\"Debian GNU/Linux\"\n# comment\nVERSION_ID=\"12.4\"\n")
	e := New(Options{Root: root})
	for min, pass := range map[string]bool{"12": true, "12.4": true, "12.10": false, "11.9": true, "13": false} {
		if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleOSVersion, MinVersion: min}); got.Passed != pass || got.Actual != "12.4" {
			t.Errorf("min %s: %+v", min, got)
		}
	}
	if got := one(t, New(Options{Root: t.TempDir()}), agentproto.PolicyRule{Type: agentproto.RuleOSVersion, MinVersion: "1"}); got.Passed {
		t.Fatalf("%+v", got)
	}
}

func TestConfigCheckRule(t *testing.T) {
	root := t.TempDir()
	write(t, root, "/etc/ssh/sshd_config", "# PermitRootLogin yes\nPermitRootLogin no\nPort: 2222\nBanner=/etc/issue.net\nPermitRootLogin yes\n")
	e := New(Options{Root: root})
	rule := func(key, op, expected string) agentproto.PolicyRule {
		return agentproto.PolicyRule{Type: agentproto.RuleConfigCheck, Path: "/etc/ssh/sshd_config", Key: key, Operator: op, Expected: expected}
	}
	cases := []struct {
		rule agentproto.PolicyRule
		pass bool
	}{
		{rule("PermitRootLogin", "eq", "no"), true}, // the first occurrence wins; comments are skipped
		{rule("PermitRootLogin", "ne", "no"), false},
		{rule("Port", "eq", "2222"), true},
		{rule("Banner", "contains", "issue"), true},
		{rule("Banner", "present", ""), true},
		{rule("X11Forwarding", "absent", ""), true},
		{rule("X11Forwarding", "eq", "no"), false},
		{agentproto.PolicyRule{Type: agentproto.RuleConfigCheck, Path: "/etc/missing.conf", Key: "a", Operator: "absent"}, true},
		{agentproto.PolicyRule{Type: agentproto.RuleConfigCheck, Path: "/etc/missing.conf", Key: "a", Operator: "eq", Expected: "b"}, false},
		{agentproto.PolicyRule{Type: agentproto.RuleConfigCheck, Path: "relative", Key: "a", Operator: "present"}, false},
	}
	for _, c := range cases {
		if got := one(t, e, c.rule); got.Passed != c.pass {
			t.Errorf("%+v: %+v, want %v", c.rule, got, c.pass)
		}
	}
}

func TestServiceRule(t *testing.T) {
	var asked []string
	e := New(Options{ServiceActive: func(_ context.Context, name string) (string, error) {
		asked = append(asked, name)
		if name == "ssh.service" {
			return "active", nil
		}
		return "inactive", nil
	}})
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleServiceRunning, Name: "ssh.service"}); !got.Passed {
		t.Fatalf("%+v", got)
	}
	if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleServiceRunning, Name: "cups"}); got.Passed || got.Actual != "inactive" {
		t.Fatalf("%+v", got)
	}
	for _, bad := range []string{"--all", "a b", "x;rm", "../../x"} {
		if got := one(t, e, agentproto.PolicyRule{Type: agentproto.RuleServiceRunning, Name: bad}); got.Passed {
			t.Fatalf("%q: %+v", bad, got)
		}
	}
	if len(asked) != 2 {
		t.Fatalf("systemctl asked about %v", asked)
	}
}

func TestHandleReportsEveryRule(t *testing.T) {
	e := New(Options{Packages: fakePackages(agentproto.ManagerApt, map[string]string{})})
	payload, _ := json.Marshal(agentproto.PolicyEvaluate{PolicyID: "p", Rules: []agentproto.PolicyRule{
		{Type: agentproto.RuleRequiredSoftware, Name: "curl"}, {Type: "bogus"}}})
	res := e.Handle(context.Background(), agentproto.Command{Type: agentproto.CommandPolicyEvaluate, Payload: payload})
	var out agentproto.PolicyEvaluateResult
	if res.Status != agentproto.ResultCompleted || json.Unmarshal(res.Result, &out) != nil || len(out.Results) != 2 ||
		out.Results[0].Passed || out.Results[1].Rule != 1 || out.Results[1].Passed {
		t.Fatalf("%+v %s", res, res.Result)
	}
	if res := e.Handle(context.Background(), agentproto.Command{Payload: []byte("{")}); res.Status != agentproto.ResultFailed {
		t.Fatalf("%+v", res)
	}
}
