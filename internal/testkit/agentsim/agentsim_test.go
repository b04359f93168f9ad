package agentsim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gale/internal/testkit/agentsim"
	"gale/internal/testkit/apptest"
)

type enrollmentKey struct {
	Key              string `json:"key"`
	EnrollmentSecret string `json:"enrollmentSecret"`
}

// newTenant makes a tenant and an enrollment key of its organization for up to agents agents.
func newTenant(t *testing.T, e *apptest.Env, name string, agents int) (apptest.Tenant, enrollmentKey) {
	ten := e.NewTenant(e.Admin(), name)
	var key enrollmentKey
	e.Must(201, ten.Org, "POST", "/api/v1/enrollment-keys", map[string]any{"name": name, "maxUsage": agents,
		"issueEnrollmentSecret": true}).JSON(t, &key)
	return ten, key
}

func TestSimulatedAgentsHeartbeatAndReceiveCommands(t *testing.T) {
	e := apptest.New(t)
	ten, key := newTenant(t, e, "sim", 5)
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
	// The run waits for the last heartbeats' acknowledgements: none is left unacknowledged.
	if h := rep.Heartbeats; h.Acked < 4*5 || h.P99 <= 0 || h.Unacked != 0 || h.Sent != h.Acked {
		t.Fatalf("report %+v: want every agent to have several heartbeats, all acknowledged", rep)
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

func TestMixedLoadListsAloneThenBesideTheAgents(t *testing.T) {
	e := apptest.New(t)
	ten, key := newTenant(t, e, "mix", 3)
	rep, err := agentsim.Run(t.Context(), agentsim.Options{Server: e.Server.URL, Agents: 3, EnrollmentKey: key.Key,
		EnrollmentSecret: key.EnrollmentSecret, StateFile: filepath.Join(t.TempDir(), "state.json"), Heartbeat: 200 * time.Millisecond,
		Duration: 2 * time.Second, AdminToken: ten.Partner.Token, ListClients: 2, ListPath: "/api/v1/devices?limit=50",
		SpreadSources: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]agentsim.ListLoad{"alone": rep.ListAlone, "mixed": rep.ListMixed} {
		if l.OK == 0 || l.Errors != 0 || l.Overloaded != 0 || l.PerSecond() <= 0 {
			t.Errorf("list %s: %+v, want 200 answers only", name, l)
		}
	}
	// Heartbeats start after the list alone and end with the mixed phase: nearly all of them
	// fall in it, and each agent connected from its own loopback address.
	if m := rep.MixedHeartbeats; m.Sent == 0 || m.Unacked != 0 || m.Sent > rep.Heartbeats.Sent {
		t.Errorf("heartbeats of the mixed phase %+v, of the run %+v", m, rep.Heartbeats)
	}
	if rep.Connected != 3 || rep.ConnectFailures != 0 {
		t.Errorf("report %+v: want 3 agents connected without failures", rep)
	}
	if s := rep.String(); !strings.Contains(s, "mixed/alone") {
		t.Errorf("report without the comparison of the phases:\n%s", s)
	}
}

// A peer that never acknowledges (as a server whose queue never reaches the heartbeats) leaves
// every heartbeat unacknowledged, counted once the grace after the run has passed.
func TestHeartbeatsNeverAcknowledgedAreCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			if _, _, err := ws.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "state.json")
	raw, _ := json.Marshal([]agentsim.Creds{{DeviceID: "a", Token: "t"}, {DeviceID: "b", Token: "t"}})
	if err := os.WriteFile(state, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := agentsim.Run(t.Context(), agentsim.Options{Server: srv.URL, Agents: 2, StateFile: state,
		Heartbeat: 100 * time.Millisecond, Duration: time.Second, Grace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if h := rep.Heartbeats; h.Sent < 2*5 || h.Acked != 0 || h.Unacked != h.Sent {
		t.Fatalf("heartbeats %+v: want several sent, none acknowledged", h)
	}
}
