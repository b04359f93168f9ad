package main

import (
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"

	"gale/internal/agent"
)

func TestARetiredAgentEndsSoItsServiceManagerLeavesItStopped(t *testing.T) {
	for _, c := range []struct {
		goos        string
		interactive bool
		code        int
		stop        bool
	}{
		{"linux", false, agent.ExitDecommissioned, false}, // systemd: SuccessExitStatus=3
		{"darwin", false, 0, false},                       // launchd: KeepAlive SuccessfulExit=false
		{"windows", false, 0, true},                       // SCM: stops its own service
		{"windows", true, agent.ExitDecommissioned, false},
		{"darwin", true, agent.ExitDecommissioned, false},
	} {
		if code, stop := retiredExit(c.goos, c.interactive); code != c.code || stop != c.stop {
			t.Errorf("%s interactive=%v: exit %d stop %v, want %d %v", c.goos, c.interactive, code, stop, c.code, c.stop)
		}
	}
}

func TestServiceOptionsRestartAFailedAgentOnEverySystem(t *testing.T) {
	o := serviceConfig("/etc/gale-agent/agent.json").Option
	if o["Restart"] != "on-failure" || o["SuccessExitStatus"] != "3" {
		t.Errorf("systemd options = %v", o)
	}
	if o["OnFailure"] != "restart" || o["OnFailureDelayDuration"] != "5s" || o["OnFailureResetPeriod"] != 86400 {
		t.Errorf("Windows recovery options = %v", o)
	}
	plist, _ := o["LaunchdConfig"].(string)
	// The template's actions stripped, the job is a well-formed plist whose KeepAlive restarts
	// only an unsuccessful exit.
	doc := regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAllString(plist, "")
	dec := xml.NewDecoder(strings.NewReader(doc))
	dec.Strict = false
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the launchd job is not well formed: %v\n%s", err, doc)
		}
	}
	keepAlive := regexp.MustCompile(`<key>KeepAlive</key>\s*<dict>\s*<key>SuccessfulExit</key>\s*<false/>\s*</dict>`)
	if !keepAlive.MatchString(plist) || !strings.Contains(plist, "<key>RunAtLoad</key>\n\t<true/>") {
		t.Errorf("launchd job without KeepAlive SuccessfulExit=false and RunAtLoad:\n%s", plist)
	}
}
