package pkgversion

import (
	"os/exec"
	"testing"

	"gale/internal/wire/agentproto"
)

// debPairs are orderings where a naive comparison goes wrong.
var debPairs = [][2]string{
	{"1:1.0", "2.0"},
	{"1.0~rc1", "1.0"},
	{"1.0~rc1", "1.0~rc2"},
	{"1.0~~", "1.0~"},
	{"1.0+deb12u1", "1.0"},
	{"1.0", "1.0a"},
	{"1.0a", "1.0.1"},
	{"1.0-1", "1.0-1.1"},
	{"1.0-1", "1.0-1+b1"},
	{"1.0-10", "1.0-9"},
	{"2.36-9+deb12u3", "2.36-9+deb12u10"},
	{"1.2.3-1ubuntu1", "1.2.3-1ubuntu1.1"},
	{"1.2.3-1ubuntu1", "1.2.3-1"},
	{"1.2.3-0ubuntu0.22.04.1", "1.2.3-0ubuntu1"},
	{"5.15.0-91.101~20.04.1", "5.15.0-91.101"},
	{"1.0", "1.0"},
	{"0:1.0", "1.0"},
	{"1.01", "1.1"},
	{"1.0-a", "1.0-A"},
	{"10.0", "9.9"},
	{"1.0+dfsg-1", "1.0-1"},
	{"7.88.1-10+deb12u5", "7.88.1-10+deb12u14"},
	{"2:8.2.3995-1ubuntu2", "1:9.0-1"},
	{"1.2-3-4", "1.2-3"},
}

func TestDebianOrderMatchesDpkg(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("dpkg is not installed: the Debian ordering cannot be checked against it")
	}
	for _, p := range debPairs {
		got, err := Compare(agentproto.ManagerApt, p[0], p[1])
		if err != nil {
			t.Fatalf("Compare(%q, %q): %v", p[0], p[1], err)
		}
		want := 0
		for _, c := range []struct {
			op string
			n  int
		}{{"lt", -1}, {"gt", 1}, {"eq", 0}} {
			if exec.Command(dpkg, "--compare-versions", p[0], c.op, p[1]).Run() == nil {
				want = c.n
				break
			}
		}
		if got != want {
			t.Errorf("Compare(apt, %q, %q) = %d, dpkg says %d", p[0], p[1], got, want)
		}
		if back, _ := Compare(agentproto.ManagerApt, p[1], p[0]); back != -want {
			t.Errorf("Compare(apt, %q, %q) = %d, want %d", p[1], p[0], back, -want)
		}
	}
}

func TestRPMOrder(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.0-1", "1.0-2", -1},
		{"1:1.0-1", "2.0-1", 1},
		{"0:1.0-1", "1.0-1", 0},
		{"1.0~rc1-1", "1.0-1", -1},
		{"1.0~rc1-1", "1.0~rc2-1", -1},
		{"1.0^git1-1", "1.0-1", 1},
		{"1.0^git1-1", "1.0.1-1", -1},
		{"1.0^-1", "1.0-1", 1},
		{"1.0~rc1^git1-1", "1.0~rc1-1", 1},
		{"1.0-1.el9", "1.0-1.el9_2", -1},
		{"3.0.7-18.el9", "3.0.7-24.el9", -1},
		{"1.10-1", "1.9-1", 1},
		{"1.0a-1", "1.0-1", 1},
		{"1.0a-1", "1.0.1-1", -1},
		{"2.0-1.fc39", "2.0-1.fc39", 0},
		{"1.001-1", "1.1-1", 0},
		{"5.14.0-362.8.1.el9_3", "5.14.0-362.13.1.el9_3", -1},
	} {
		got, err := Compare(agentproto.ManagerDnf, c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("Compare(dnf, %q, %q) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
}

func TestValid(t *testing.T) {
	for _, c := range []struct {
		manager, v string
		want       bool
	}{
		{agentproto.ManagerApt, "1:2.36-9+deb12u4", true},
		{agentproto.ManagerApt, "1.0~rc1", true},
		{agentproto.ManagerApt, "", false},
		{agentproto.ManagerApt, "abc", false},
		{agentproto.ManagerApt, "1.0 ", false},
		{agentproto.ManagerApt, "1.0;rm", false},
		{agentproto.ManagerApt, "-o", false},
		{agentproto.ManagerApt, "1.0é", false},
		{agentproto.ManagerApt, "x:1.0", false},
		{agentproto.ManagerDnf, "1:3.0.7-24.el9", true},
		{agentproto.ManagerDnf, "1.0^git1-1", true},
		{agentproto.ManagerDnf, "1.0", true},
		{agentproto.ManagerDnf, "-1.0", false},
		{agentproto.ManagerDnf, "1.0 -x", false},
		{agentproto.ManagerDnf, "1.0-1-2", false},
		{"brew", "1.0", false},
	} {
		if got := Valid(c.manager, c.v); got != c.want {
			t.Errorf("Valid(%s, %q) = %v, want %v", c.manager, c.v, got, c.want)
		}
	}
	if _, err := Compare(agentproto.ManagerApt, "1.0", "not a version"); err == nil {
		t.Error("Compare accepted an invalid version")
	}
	if _, err := Compare("brew", "1.0", "1.0"); err == nil {
		t.Error("Compare accepted an unknown manager")
	}
}
