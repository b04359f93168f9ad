package pam

import (
	"fmt"
	"testing"
	"time"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"/usr/bin/*", "/usr/bin/id", true},
		{"/usr/bin/*", "/usr/bin/sub/id", true},
		{"*/id", "/usr/bin/id", true},
		{"*/id", "/usr/bin/idx", false},
		{"/usr/bin/r?", "/usr/bin/rm", true},
		{"/usr/bin/r?", "/usr/bin/rmx", false},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"", "", true},
		{"", "x", false},
	} {
		if got := glob(c.pattern).match(c.s); got != c.want {
			t.Errorf("glob %q on %q = %v", c.pattern, c.s, got)
		}
	}
}

func TestWindow(t *testing.T) {
	w := compileWindow(&PAMTimeWindow{Start: "22:00", End: "06:00", Days: []int{1}, Timezone: "Europe/Paris"})
	mon := time.Date(2026, 11, 23, 22, 30, 0, 0, time.UTC) // Monday 23:30 in Paris
	if !w.open(mon) {
		t.Error("Monday 23:30 Paris is in an overnight Monday window")
	}
	if w.open(mon.Add(-2 * time.Hour)) {
		t.Error("Monday 21:30 Paris is before the window")
	}
	if w.open(mon.Add(24 * time.Hour)) {
		t.Error("Tuesday is not a day of the window")
	}
}

// benchRules is n rules of which none matches the subject but the last.
func benchRules(n int) *ruleSet {
	rs := &ruleSet{defaultVerdict: VerdictRequireApproval}
	for i := range n - 1 {
		p := fmt.Sprintf("/opt/vendor%d/*", i)
		u := fmt.Sprintf("user%d", i)
		rs.rules = append(rs.rules, compile(PAMRule{ID: fmt.Sprint(i), Verdict: VerdictAutoApprove, MatchPathGlob: &p, MatchUser: &u}, nil))
	}
	cmd := "--install"
	rs.rules = append(rs.rules, compile(PAMRule{ID: "last", Verdict: VerdictAutoDeny, MatchCommandLine: &cmd}, nil))
	return rs
}

func BenchmarkDecideMatcher(b *testing.B) {
	rs := benchRules(1000)
	subj := Subject{User: "alice", Path: "/usr/bin/apt-get", SHA256: "ab", CommandLine: "/usr/bin/apt-get --install vim",
		Parent: "/usr/bin/bash", Groups: []string{"sudo", "users"}, At: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		if v := rs.decide(subj); v.RuleID != "last" {
			b.Fatal(v)
		}
	}
}
