package agentsim_test

import (
	"path/filepath"
	"testing"
	"time"

	"gale/internal/testkit/agentsim"
	"gale/internal/testkit/apptest"
)

func TestSimulatedAgentsHeartbeatAndReceiveCommands(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "sim")
	var key struct {
		Key              string `json:"key"`
		EnrollmentSecret string `json:"enrollmentSecret"`
	}
	e.Must(201, ten.Org, "POST", "/api/v1/enrollment-keys", map[string]any{"name": "sim", "maxUsage": 5,
		"issueEnrollmentSecret": true}).JSON(t, &key)
	state := filepath.Join(t.TempDir(), "state.json")
	o := agentsim.Options{Server: e.Server.URL, Agents: 4, EnrollmentKey: key.Key, EnrollmentSecret: key.EnrollmentSecret,
		StateFile: state, Heartbeat: 300 * time.Millisecond, Duration: 4 * time.Second, AdminToken: ten.Org.Token, Commands: 5}
	rep, err := agentsim.Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Agents != 4 || rep.Connected != 4 || rep.ConnectFailures != 0 {
		t.Fatalf("report %+v: want 4 agents connected at once without failures", rep)
	}
	if rep.Heartbeats < 4*5 || rep.HeartbeatP99 <= 0 {
		t.Fatalf("report %+v: want every agent to have several acknowledged heartbeats", rep)
	}
	if rep.Commands != 5 || rep.CommandMax <= 0 {
		t.Fatalf("report %+v: want all 5 commands to reach their agents", rep)
	}
	var list struct {
		Total int `json:"total"`
	}
	e.Must(200, ten.Org, "GET", "/api/v1/devices?includeTotal=true&status=online", nil).JSON(t, &list)
	if list.Total != 4 {
		t.Fatalf("%d online devices, want the 4 simulated ones", list.Total)
	}

	// A second run reuses the enrolled agents from the state file: the key (maxUsage 5) would
	// not allow enrolling 4 more.
	o.Duration, o.Commands = time.Second, 0
	if rep, err := agentsim.Run(t.Context(), o); err != nil || rep.Agents != 4 {
		t.Fatalf("second run: %+v, %v", rep, err)
	}
}
