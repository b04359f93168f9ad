// Package agentsim simulates a fleet of agents over the real agent protocol, to measure how
// the server holds up: each simulated agent enrolls (once; credentials are kept in a state
// file), opens its live channel, sends heartbeats with plausible metrics, and answers
// commands at once. It measures heartbeat round trips (sent → acknowledged) and, when given
// an administrator token, how long a command takes from the POST to reaching its agent.
package agentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"gale/internal/wire/agentproto"
)

// Options describe a run.
type Options struct {
	Server string // base address, without /api/v1
	Agents int
	// EnrollmentKey and EnrollmentSecret enroll the agents missing from the state file.
	EnrollmentKey    string
	EnrollmentSecret string
	// StateFile keeps enrolled agents' credentials between runs.
	StateFile string
	Heartbeat time.Duration
	Duration  time.Duration
	// AdminToken, when set, lets the run send Commands commands and time their delivery.
	AdminToken string
	Commands   int
	// Fleet, with AdminToken, runs a script on every agent once they are connected (an
	// automation targeting their organization, POST /automations/{id}/run) and times its
	// dispatch and its results; with Scan it asks for a patch scan of every agent instead.
	Fleet bool
	Scan  bool
	// Progress receives a line every few seconds.
	Progress io.Writer
}

// Creds are one simulated agent's credentials.
type Creds struct {
	DeviceID string `json:"deviceId"`
	Token    string `json:"token"`
}

// Report is what a run measured.
type Report struct {
	Agents            int
	Connected         int
	ConnectFailures   int
	Heartbeats        int
	HeartbeatP50      time.Duration
	HeartbeatP99      time.Duration
	HeartbeatMax      time.Duration
	Commands          int
	CommandP50        time.Duration
	CommandP99        time.Duration
	CommandMax        time.Duration
	HeartbeatsMissing int
	// The fleet run: devices it ran on, from the first execute request to the last agent
	// receiving its command (Dispatch) and to every result stored (Stored), and the heartbeat
	// latency meanwhile.
	FleetWork         string
	FleetDevices      int
	FleetDispatch     time.Duration
	FleetStored       time.Duration
	FleetHeartbeatP99 time.Duration
	// FleetBareP99 is the latency of a bare request (GET /health: no database, no
	// authentication) sent every 50 ms during the fleet run: the host's floor meanwhile.
	FleetBareP99 time.Duration
}

func (r Report) String() string {
	fleet := ""
	if r.FleetDevices > 0 {
		fleet = fmt.Sprintf("\nfleet %s on %d agents: dispatched in %s, every result stored in %s, heartbeat p99 meanwhile %s, "+
			"bare request p99 meanwhile %s", r.FleetWork, r.FleetDevices, r.FleetDispatch, r.FleetStored, r.FleetHeartbeatP99, r.FleetBareP99)
	}
	return fmt.Sprintf("agents %d, connected at once %d (connection failures %d)\nheartbeats %d (unacknowledged %d): p50 %s, p99 %s, max %s\n"+
		"commands %d: POST→agent p50 %s, p99 %s, max %s", r.Agents, r.Connected, r.ConnectFailures, r.Heartbeats,
		r.HeartbeatsMissing, r.HeartbeatP50, r.HeartbeatP99, r.HeartbeatMax, r.Commands, r.CommandP50, r.CommandP99, r.CommandMax) + fleet
}

type sim struct {
	o        Options
	http     *http.Client
	mu       sync.Mutex
	hb       []time.Duration
	hbAt     []time.Time // when each heartbeat of hb was sent
	missing  int
	received sync.Map // command ID → time received
	conns    atomic.Int64
	peak     atomic.Int64
	failures atomic.Int64
}

// Run enrolls what is missing, connects every agent, runs for Duration and reports.
func Run(ctx context.Context, o Options) (Report, error) {
	s := &sim{o: o, http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	creds, err := s.enrollAll(ctx)
	if err != nil {
		return Report{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var wg sync.WaitGroup
	// Connections open at a steady pace so the run measures steady state, not a stampede.
	pace := time.NewTicker(time.Second / 1000)
	for _, c := range creds {
		<-pace.C
		wg.Go(func() { s.agent(runCtx, c) })
	}
	pace.Stop()
	s.progress("all %d agents started", len(creds))
	var cmdLat []time.Duration
	if o.AdminToken != "" && o.Commands > 0 {
		time.Sleep(2 * time.Second)
		cmdLat = s.commands(runCtx, creds)
	}
	var fleet Report
	if o.AdminToken != "" && o.Fleet {
		time.Sleep(2 * time.Second)
		if fleet, err = s.fleet(runCtx, creds); err != nil {
			s.progress("fleet run: %v", err)
		}
	}
	go s.report(runCtx)
	wg.Wait()
	rep := Report{Agents: len(creds), Connected: int(s.peak.Load()), ConnectFailures: int(s.failures.Load()),
		FleetWork: fleet.FleetWork, FleetDevices: fleet.FleetDevices, FleetDispatch: fleet.FleetDispatch, FleetStored: fleet.FleetStored,
		FleetHeartbeatP99: fleet.FleetHeartbeatP99, FleetBareP99: fleet.FleetBareP99}
	s.mu.Lock()
	rep.Heartbeats, rep.HeartbeatsMissing = len(s.hb), s.missing
	rep.HeartbeatP50, rep.HeartbeatP99, rep.HeartbeatMax = percentiles(s.hb)
	s.mu.Unlock()
	rep.Commands = len(cmdLat)
	rep.CommandP50, rep.CommandP99, rep.CommandMax = percentiles(cmdLat)
	return rep, nil
}

func percentiles(d []time.Duration) (p50, p99, maxd time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)*99/100, len(s)-1)], s[len(s)-1]
}

func (s *sim) progress(format string, args ...any) {
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

func (s *sim) report(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		p50, p99, _ := percentiles(s.hb)
		n := len(s.hb)
		s.mu.Unlock()
		s.progress("connected %d, heartbeats %d, p50 %s, p99 %s", s.conns.Load(), n, p50, p99)
	}
}

func (s *sim) post(ctx context.Context, path, token string, in, out any) error {
	b, _ := json.Marshal(in)
	return s.do(ctx, http.MethodPost, path, token, bytes.NewReader(b), out)
}

func (s *sim) get(ctx context.Context, path string, out any) error {
	return s.do(ctx, http.MethodGet, path, s.o.AdminToken, nil, out)
}

// do sends a request to the API and decodes its JSON answer into out (when not nil).
func (s *sim) do(ctx context.Context, method, path, token string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.o.Server+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, strings.TrimSpace(string(raw)))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// enrollAll loads the state file and enrolls agents until there are o.Agents.
func (s *sim) enrollAll(ctx context.Context) ([]Creds, error) {
	var creds []Creds
	if b, err := os.ReadFile(s.o.StateFile); err == nil {
		if err := json.Unmarshal(b, &creds); err != nil {
			return nil, fmt.Errorf("read %s: %w", s.o.StateFile, err)
		}
	}
	missing := s.o.Agents - len(creds)
	if missing > 0 && s.o.EnrollmentKey == "" {
		return nil, fmt.Errorf("%d agents to enroll but no enrollment key given", missing)
	}
	if missing > 0 {
		s.progress("enrolling %d agents", missing)
		var mu sync.Mutex
		var firstErr error
		var wg sync.WaitGroup
		next := make(chan int)
		for range 16 {
			wg.Go(func() {
				for i := range next {
					var r agentproto.EnrollResponse
					err := s.post(ctx, agentproto.PathEnroll, "", agentproto.EnrollRequest{EnrollmentKey: s.o.EnrollmentKey,
						EnrollmentSecret: s.o.EnrollmentSecret, Hostname: fmt.Sprintf("sim-%06d", i), OSType: agentproto.OSLinux,
						OSVersion: "12", Architecture: "amd64", AgentVersion: "sim"}, &r)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					if err == nil {
						creds = append(creds, Creds{DeviceID: r.DeviceID, Token: r.AuthToken})
					}
					mu.Unlock()
				}
			})
		}
		for i := len(creds); i < s.o.Agents; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		if b, err := json.Marshal(creds); err == nil {
			_ = os.WriteFile(s.o.StateFile, b, 0o600)
		}
		if firstErr != nil {
			return nil, firstErr
		}
	}
	return creds[:s.o.Agents], nil
}

// agent is one simulated agent: connect, heartbeat, answer commands, reconnect on failure.
func (s *sim) agent(ctx context.Context, c Creds) {
	for ctx.Err() == nil {
		if err := s.session(ctx, c); err != nil && ctx.Err() == nil {
			s.failures.Add(1)
			time.Sleep(time.Duration(1000+rand.IntN(2000)) * time.Millisecond)
		}
	}
}

func (s *sim) session(ctx context.Context, c Creds) error {
	url := "ws" + strings.TrimPrefix(s.o.Server, "http") + "/api/v1" + agentproto.PathWebSocket
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + c.Token}}})
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	for n := s.conns.Add(1); ; {
		if p := s.peak.Load(); n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	defer s.conns.Add(-1)
	var mu sync.Mutex
	sent := map[string]time.Time{}
	write := func(typ, id string, payload any) error {
		raw, _ := json.Marshal(payload)
		b, _ := json.Marshal(agentproto.Message{ID: id, Type: typ, Payload: raw})
		return ws.Write(ctx, websocket.MessageText, b)
	}
	go func() {
		// The first heartbeat comes at a random point of the interval, as in a real fleet.
		wait := time.Duration(rand.Int64N(int64(s.o.Heartbeat)))
		for seq := 0; ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = s.o.Heartbeat
			id := fmt.Sprintf("hb-%d", seq)
			m := agentproto.Metrics{CPUPercent: rand.Float64() * 100, RAMPercent: 40 + rand.Float64()*20, RAMUsedMB: 4000,
				RAMTotalMB: 8000, DiskPercent: 55, DiskUsedGB: 110, DiskTotalGB: 200, ProcessCount: 180}
			mu.Lock()
			sent[id] = time.Now()
			mu.Unlock()
			if write(agentproto.TypeHeartbeat, id, agentproto.Heartbeat{AgentVersion: "sim", Metrics: &m, UptimeSeconds: 3600}) != nil {
				return
			}
		}
	}()
	defer func() {
		mu.Lock()
		s.mu.Lock()
		s.missing += len(sent)
		s.mu.Unlock()
		mu.Unlock()
	}()
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		var msg agentproto.Message
		if json.Unmarshal(data, &msg) != nil {
			continue
		}
		switch msg.Type {
		case agentproto.TypeHeartbeatAck:
			mu.Lock()
			at, ok := sent[msg.ID]
			delete(sent, msg.ID)
			mu.Unlock()
			if ok {
				s.mu.Lock()
				s.hb, s.hbAt = append(s.hb, time.Since(at)), append(s.hbAt, at)
				s.mu.Unlock()
			}
		case agentproto.TypeCommand:
			s.received.LoadOrStore(msg.ID, time.Now())
			var cmd agentproto.Command
			_ = json.Unmarshal(msg.Payload, &cmd)
			// As gale-agent does, the result goes over HTTP, whose answer confirms it was recorded.
			go func() {
				code := 0
				res := agentproto.CommandResult{CommandID: msg.ID, Status: agentproto.ResultCompleted, ExitCode: &code, Stdout: "ok"}
				switch cmd.Type {
				case agentproto.CommandPatchScan:
					res.Result, _ = json.Marshal(scanResult)
				case agentproto.CommandMonitorChecks:
					res.Result, _ = json.Marshal(monitorResults(cmd.Payload))
				}
				path := "/agents/" + c.DeviceID + "/commands/" + msg.ID + "/result"
				if err := s.post(ctx, path, c.Token, res, nil); err != nil && ctx.Err() == nil {
					s.progress("result: %v", err)
				}
			}()
		case agentproto.TypeStop:
			return nil
		}
	}
}

// commands sends reboot-free commands to random connected agents one after another and
// measures the time from the POST leaving to the agent receiving the command.
func (s *sim) commands(ctx context.Context, creds []Creds) []time.Duration {
	var out []time.Duration
	for i := 0; i < s.o.Commands && ctx.Err() == nil; i++ {
		c := creds[rand.IntN(len(creds))]
		start := time.Now()
		var cmd struct {
			ID string `json:"id"`
		}
		err := s.post(ctx, "/devices/"+c.DeviceID+"/commands", s.o.AdminToken, map[string]any{"type": "run_script",
			"payload": map[string]any{"language": "sh", "script": "true"}}, &cmd)
		if err != nil {
			s.progress("command: %v", err)
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if at, ok := s.received.Load(cmd.ID); ok {
				out = append(out, at.(time.Time).Sub(start))
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

// fleet runs a script on every agent through an automation and times it: the run's request,
// the commands reaching the agents, and the results stored (polling the executions the server
// counts as completed).
func (s *sim) fleet(ctx context.Context, creds []Creds) (Report, error) {
	var dev struct {
		OrgID string `json:"orgId"`
	}
	if err := s.get(ctx, "/devices/"+creds[0].DeviceID, &dev); err != nil {
		return Report{}, err
	}
	if s.o.Scan {
		return s.measure(ctx, "patch scan", func() ([]string, func() (bool, error), error) { return s.startScan(ctx, creds) })
	}
	var sc struct {
		ID string `json:"id"`
	}
	if err := s.post(ctx, "/scripts", s.o.AdminToken, map[string]any{"name": fmt.Sprintf("Fleet %d", time.Now().UnixNano()),
		"orgId": dev.OrgID, "osTypes": []string{"linux"}, "language": "sh", "content": "uptime"}, &sc); err != nil {
		return Report{}, err
	}
	var auto struct {
		ID string `json:"id"`
	}
	if err := s.post(ctx, "/automations", s.o.AdminToken, map[string]any{"name": fmt.Sprintf("Fleet %d", time.Now().UnixNano()),
		"orgId": dev.OrgID, "trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "organization"},
		"actions": []map[string]any{{"type": "run_script", "scriptId": sc.ID}}}, &auto); err != nil {
		return Report{}, err
	}
	return s.measure(ctx, "script", func() ([]string, func() (bool, error), error) {
		var run struct {
			ID    string `json:"id"`
			Steps []struct {
				CommandID *string `json:"commandId"`
			} `json:"steps"`
		}
		if err := s.post(ctx, "/automations/"+auto.ID+"/run", s.o.AdminToken, map[string]any{}, &run); err != nil {
			return nil, nil, err
		}
		// The run hands its devices over in chunks: its steps fill in as they go.
		var commandIDs []string
		for deadline := time.Now().Add(60 * time.Second); ; {
			commandIDs = commandIDs[:0]
			for _, st := range run.Steps {
				if st.CommandID != nil {
					commandIDs = append(commandIDs, *st.CommandID)
				}
			}
			if len(commandIDs) >= len(creds) || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Second)
			if err := s.get(ctx, "/automations/runs/"+run.ID, &run); err != nil {
				return nil, nil, err
			}
		}
		stored := func() (bool, error) {
			var page struct {
				Pagination struct {
					Total int `json:"total"`
				} `json:"pagination"`
			}
			err := s.get(ctx, "/scripts/"+sc.ID+"/executions?status=completed&page=1&limit=1", &page)
			return err == nil && page.Pagination.Total >= len(commandIDs), err
		}
		return commandIDs, stored, nil
	})
}

// startScan asks for a patch scan of every agent and returns the scan's commands and how to
// tell that every result was ingested (the job completed).
func (s *sim) startScan(ctx context.Context, creds []Creds) ([]string, func() (bool, error), error) {
	ids := make([]string, len(creds))
	for i, c := range creds {
		ids[i] = c.DeviceID
	}
	var job struct {
		ID string `json:"id"`
	}
	if err := s.post(ctx, "/patches/scan", s.o.AdminToken, map[string]any{"deviceIds": ids}, &job); err != nil {
		return nil, nil, err
	}
	var detail struct {
		Status  string `json:"status"`
		Devices []struct {
			CommandID *string `json:"commandId"`
		} `json:"devices"`
	}
	if err := s.get(ctx, "/patches/jobs/"+job.ID, &detail); err != nil {
		return nil, nil, err
	}
	var commandIDs []string
	for _, d := range detail.Devices {
		if d.CommandID != nil {
			commandIDs = append(commandIDs, *d.CommandID)
		}
	}
	stored := func() (bool, error) {
		var j struct {
			Status string `json:"status"`
		}
		err := s.get(ctx, "/patches/jobs/"+job.ID, &j)
		return err == nil && j.Status != "running", err
	}
	return commandIDs, stored, nil
}

// measure starts a fleet-wide piece of work and times it: from the request to the last agent
// receiving its command (dispatch) and to every result stored, with the heartbeat latency and
// a bare request's meanwhile.
func (s *sim) measure(ctx context.Context, what string, begin func() ([]string, func() (bool, error), error)) (Report, error) {
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	bare := make(chan []time.Duration, 1)
	go func() { bare <- s.probe(probeCtx, 50*time.Millisecond) }()
	start := time.Now()
	commandIDs, stored, err := begin()
	if err != nil {
		return Report{}, err
	}
	s.progress("%s: %d commands started in %s", what, len(commandIDs), time.Since(start))
	rep := Report{FleetWork: what, FleetDevices: len(commandIDs)}
	for ctx.Err() == nil {
		last, all := start, true
		for _, id := range commandIDs {
			at, ok := s.received.Load(id)
			if !ok {
				all = false
				break
			}
			if t := at.(time.Time); t.After(last) {
				last = t
			}
		}
		if all {
			rep.FleetDispatch = last.Sub(start)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.progress("%s: every command received after %s", what, rep.FleetDispatch)
	for ctx.Err() == nil {
		done, err := stored()
		if err != nil {
			return rep, err
		}
		if done {
			rep.FleetStored = time.Since(start)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.progress("%s: every result stored after %s", what, rep.FleetStored)
	stopProbe()
	_, rep.FleetBareP99, _ = percentiles(<-bare)
	end := start.Add(rep.FleetStored)
	s.mu.Lock()
	var during []time.Duration
	for i, at := range s.hbAt {
		if !at.Before(start) && !at.After(end) {
			during = append(during, s.hb[i])
		}
	}
	s.mu.Unlock()
	_, rep.FleetHeartbeatP99, _ = percentiles(during)
	return rep, nil
}

// scanResult is what every simulated agent's patch scan finds: a few updates, one of them a
// security one, as a typical server's daily scan.
var scanResult = agentproto.PatchScanResult{Manager: agentproto.ManagerApt, Installed: 612, Updates: []agentproto.PackageUpdate{
	{Name: "openssl", Architecture: "amd64", InstalledVersion: "3.0.15-1~deb12u1", AvailableVersion: "3.0.17-1~deb12u2",
		Origin: "bookworm-security", Security: true},
	{Name: "curl", Architecture: "amd64", InstalledVersion: "7.88.1-10+deb12u8", AvailableVersion: "7.88.1-10+deb12u12", Origin: "bookworm"},
	{Name: "tzdata", Architecture: "all", InstalledVersion: "2024a-0+deb12u1", AvailableVersion: "2025b-0+deb12u1", Origin: "bookworm"},
}}

// probe times a bare request (GET /health, answered without the database or authentication)
// every interval until ctx ends, from its own connection: what any request waits for on the
// host at the moment, whatever it does.
func (s *sim) probe(ctx context.Context, every time.Duration) []time.Duration {
	client := &http.Client{Timeout: 30 * time.Second}
	var lat []time.Duration
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return lat
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.Server+"/health", nil)
		if err != nil {
			return lat
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		lat = append(lat, time.Since(start))
	}
}

// monitorResults answers a monitor_checks batch as if every target were up, in 1 to 50 ms.
func monitorResults(payload json.RawMessage) agentproto.MonitorChecksResult {
	var in agentproto.MonitorChecks
	_ = json.Unmarshal(payload, &in)
	out := agentproto.MonitorChecksResult{Results: make([]agentproto.MonitorCheckResult, len(in.Checks))}
	for i, c := range in.Checks {
		ms := float64(1 + i%50)
		out.Results[i] = agentproto.MonitorCheckResult{MonitorID: c.MonitorID, Status: agentproto.MonitorOnline, ResponseMs: &ms,
			CheckedAt: time.Now().UTC()}
	}
	return out
}
