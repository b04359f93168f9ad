// Package agentsim simulates a fleet of agents over the real agent protocol, to measure how
// the server holds up: each simulated agent enrolls (once; credentials are kept in a state
// file), opens its live channel, sends heartbeats with plausible metrics, and answers
// commands at once. It measures heartbeat round trips (sent → acknowledged) and, when given
// an administrator token, how long a command takes from the POST to reaching its agent. With
// list clients it also loads the API beside the agents (a mixed load) and compares.
package agentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
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
	// Duration is how long the agents run once started; with ListClients, the length of each
	// phase of the list load instead.
	Duration time.Duration
	// Grace is how long the agents, once they stop heartbeating at the end of the run, still
	// wait for the acknowledgements of the heartbeats they sent; a heartbeat not acknowledged
	// by then counts as unacknowledged. Zero means 5 s.
	Grace time.Duration
	// AdminToken, when set, lets the run send Commands commands and time their delivery.
	AdminToken string
	Commands   int
	// Fleet, with AdminToken, runs a script on every agent once they are connected (an
	// automation targeting their organization, POST /automations/{id}/run) and times its
	// dispatch and its results; with Scan it asks for a patch scan of every agent instead.
	Fleet bool
	Scan  bool
	// ListClients, when above zero, make the run a mixed load: that many clients send GET
	// ListPath (a path below Server, with AdminToken) one after another, for Duration before
	// any agent connects (the list alone), then for Duration again once every agent is
	// connected and heartbeating (mixed); the run ends with the mixed phase.
	ListClients int
	ListPath    string
	// SpreadSources binds each agent's connection to its own address of 127.0.0.0/8 (all of
	// it loopback on Linux), so that a server on loopback can hold more connections than one
	// source address has ephemeral ports (about 28,000).
	SpreadSources bool
	// Progress receives a line every few seconds.
	Progress io.Writer
}

// Creds are one simulated agent's credentials.
type Creds struct {
	DeviceID string `json:"deviceId"`
	Token    string `json:"token"`
}

// Heartbeats is what a window of the run measured of the heartbeats sent in it.
type Heartbeats struct {
	Sent  int
	Acked int
	// Unacked were not acknowledged by the end of the run and its grace (or their connection
	// closed first).
	Unacked int
	// P50, P99 and Max are of the acknowledged ones, from sending to the acknowledgement.
	P50, P99, Max time.Duration
}

func (h Heartbeats) String() string {
	return fmt.Sprintf("%d sent, %d acknowledged, %d unacknowledged; acknowledged after p50 %s, p99 %s, max %s",
		h.Sent, h.Acked, h.Unacked, h.P50.Round(time.Microsecond), h.P99.Round(time.Microsecond), h.Max.Round(time.Microsecond))
}

// Report is what a run measured.
type Report struct {
	Agents          int
	Connected       int
	ConnectFailures int
	Heartbeats      Heartbeats // the whole run
	Commands        int
	CommandP50      time.Duration
	CommandP99      time.Duration
	CommandMax      time.Duration
	// The mixed load: the list alone and beside the agents, and the heartbeats sent during
	// the mixed phase.
	ListClients     int
	ListPath        string
	ListAlone       ListLoad
	ListMixed       ListLoad
	MixedHeartbeats Heartbeats
	// The fleet run: devices it ran on, from the first execute request to the last agent
	// receiving its command (Dispatch) and to every result stored (Stored), and the heartbeats
	// sent meanwhile.
	FleetWork       string
	FleetDevices    int
	FleetDispatch   time.Duration
	FleetStored     time.Duration
	FleetHeartbeats Heartbeats
	fleetFrom       time.Time
	fleetTo         time.Time
	// FleetBareP99 is the latency of a bare request (GET /health: no database, no
	// authentication) sent every 50 ms during the fleet run: the host's floor meanwhile.
	FleetBareP99 time.Duration
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agents %d, connected at once %d (connection failures %d)\nheartbeats, whole run: %s", r.Agents, r.Connected,
		r.ConnectFailures, r.Heartbeats)
	if r.Commands > 0 {
		fmt.Fprintf(&b, "\ncommands %d: POST→agent p50 %s, p99 %s, max %s", r.Commands, r.CommandP50, r.CommandP99, r.CommandMax)
	}
	if r.ListClients > 0 {
		fmt.Fprintf(&b, "\nlist GET %s, %d clients:\n  alone: %s\n  mixed: %s\n  mixed/alone: %.0f %% of the requests per second"+
			"\nheartbeats during the mixed phase: %s", r.ListPath, r.ListClients, r.ListAlone, r.ListMixed,
			100*r.ListMixed.PerSecond()/max(r.ListAlone.PerSecond(), 1e-9), r.MixedHeartbeats)
	}
	if r.FleetDevices > 0 {
		fmt.Fprintf(&b, "\nfleet %s on %d agents: dispatched in %s, every result stored in %s, bare request p99 meanwhile %s"+
			"\nheartbeats during the fleet run: %s", r.FleetWork, r.FleetDevices, r.FleetDispatch.Round(time.Millisecond),
			r.FleetStored.Round(time.Millisecond), r.FleetBareP99.Round(time.Microsecond),
			r.FleetHeartbeats)
	}
	return b.String()
}

type sim struct {
	o    Options
	http *http.Client
	// wsHTTP opens the agents' connections (nil: the default client).
	wsHTTP   *http.Client
	mu       sync.Mutex
	hb       []time.Duration
	hbAt     []time.Time // when each heartbeat of hb was sent
	lostAt   []time.Time // when each unacknowledged heartbeat was sent
	received sync.Map    // command ID → time received
	conns    atomic.Int64
	peak     atomic.Int64
	failures atomic.Int64
}

// Run enrolls what is missing, connects every agent, runs for Duration and reports.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Grace <= 0 {
		o.Grace = 5 * time.Second
	}
	s := &sim{o: o, http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if o.SpreadSources {
		s.wsHTTP = &http.Client{Transport: &http.Transport{DialContext: spreadSources()}}
	}
	creds, err := s.enrollAll(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := Report{ListClients: o.ListClients, ListPath: o.ListPath}
	var list *listLoad
	if o.ListClients > 0 {
		list = s.newListLoad()
		list.run(ctx, listWarmUp)
		s.progress("list alone: %d clients for %s", o.ListClients, o.Duration)
		rep.ListAlone = list.run(ctx, o.Duration)
	}
	// The agents heartbeat until runCtx ends; their connections stay open until connCtx ends,
	// Grace later, for the acknowledgements of the last heartbeats.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if o.ListClients == 0 {
		runCtx, stop = context.WithTimeout(ctx, o.Duration)
		defer stop()
	}
	connCtx, closeConns := context.WithCancel(ctx)
	defer closeConns()
	var wg sync.WaitGroup
	// Connections open at a steady pace so the run measures steady state, not a stampede.
	pace := time.NewTicker(time.Second / 1000)
	for _, c := range creds {
		<-pace.C
		wg.Go(func() { s.agent(runCtx, connCtx, c) })
	}
	pace.Stop()
	s.progress("all %d agents started", len(creds))
	go s.report(runCtx)
	var cmdLat []time.Duration
	if o.AdminToken != "" && o.Commands > 0 {
		time.Sleep(2 * time.Second)
		cmdLat = s.commands(runCtx, creds)
	}
	if o.AdminToken != "" && o.Fleet {
		time.Sleep(2 * time.Second)
		if err := s.fleet(runCtx, creds, &rep); err != nil {
			s.progress("fleet run: %v", err)
		}
	}
	var mixedFrom, mixedTo time.Time
	if list != nil {
		s.warmUp(runCtx, len(creds))
		s.progress("mixed: %d clients beside %d connected agents for %s", o.ListClients, s.conns.Load(), o.Duration)
		mixedFrom = time.Now()
		rep.ListMixed = list.run(runCtx, o.Duration)
		mixedTo = time.Now()
		stop()
	}
	<-runCtx.Done()
	s.progress("heartbeats stopped; waiting up to %s for their acknowledgements", o.Grace)
	time.AfterFunc(o.Grace, closeConns)
	wg.Wait()
	rep.Agents, rep.Connected, rep.ConnectFailures = len(creds), int(s.peak.Load()), int(s.failures.Load())
	rep.Heartbeats = s.window(time.Time{}, time.Now())
	rep.MixedHeartbeats = s.window(mixedFrom, mixedTo)
	rep.FleetHeartbeats = s.window(rep.fleetFrom, rep.fleetTo)
	rep.Commands = len(cmdLat)
	rep.CommandP50, rep.CommandP99, rep.CommandMax = percentiles(cmdLat)
	return rep, nil
}

// window sums up the heartbeats sent from..to (none when to is zero).
func (s *sim) window(from, to time.Time) Heartbeats {
	in := func(at time.Time) bool { return !at.Before(from) && at.Before(to) }
	var h Heartbeats
	var lat []time.Duration
	s.mu.Lock()
	for i, at := range s.hbAt {
		if in(at) {
			lat = append(lat, s.hb[i])
		}
	}
	for _, at := range s.lostAt {
		if in(at) {
			h.Unacked++
		}
	}
	s.mu.Unlock()
	h.Acked = len(lat)
	h.Sent = h.Acked + h.Unacked
	h.P50, h.P99, h.Max = percentiles(lat)
	return h
}

// warmUp waits until every agent is connected (or a minute has passed) and then one heartbeat
// interval, so that every agent has begun heartbeating.
func (s *sim) warmUp(ctx context.Context, agents int) {
	for deadline := time.Now().Add(time.Minute); s.conns.Load() < int64(agents) && time.Now().Before(deadline); {
		sleep(ctx, 100*time.Millisecond)
	}
	sleep(ctx, s.o.Heartbeat)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// spreadSources is a dialer that binds each connection to the next address of 127.0.0.0/8
// from 127.1.0.0 on (one per connection; the kernel then picks its port among that address's
// own).
func spreadSources() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var n atomic.Uint32
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		i := n.Add(1) % (254 << 16)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, byte(1+i>>16), byte(i>>8), byte(i))}}
		return d.DialContext(ctx, network, addr)
	}
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

// agent is one simulated agent: connect, heartbeat, answer commands, reconnect on failure,
// until runCtx ends; connCtx bounds the wait for the last acknowledgements.
func (s *sim) agent(runCtx, connCtx context.Context, c Creds) {
	for runCtx.Err() == nil {
		if err := s.session(runCtx, connCtx, c); err != nil && runCtx.Err() == nil {
			s.failures.Add(1)
			sleep(runCtx, time.Duration(1000+rand.IntN(2000))*time.Millisecond)
		}
	}
}

// session is one connection of an agent: it heartbeats until runCtx ends, then stays open
// until every heartbeat it sent is acknowledged or connCtx ends. The heartbeats still
// unacknowledged when it closes are counted lost.
func (s *sim) session(runCtx, connCtx context.Context, c Creds) error {
	url := "ws" + strings.TrimPrefix(s.o.Server, "http") + "/api/v1" + agentproto.PathWebSocket
	ws, _, err := websocket.Dial(runCtx, url, &websocket.DialOptions{HTTPClient: s.wsHTTP,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.Token}}})
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
	stopping := false              // no more heartbeats on this connection
	drained := make(chan struct{}) // closed once stopping with every heartbeat acknowledged
	done := make(chan struct{})
	defer close(done)
	write := func(typ, id string, payload any) error {
		raw, _ := json.Marshal(payload)
		b, _ := json.Marshal(agentproto.Message{ID: id, Type: typ, Payload: raw})
		return ws.Write(runCtx, websocket.MessageText, b)
	}
	go func() {
		// The first heartbeat comes at a random point of the interval, as in a real fleet.
		wait := time.Duration(rand.Int64N(int64(s.o.Heartbeat)))
		for seq := 0; s.heartbeat(runCtx, wait, seq, &mu, sent, write); seq++ {
			wait = s.o.Heartbeat
		}
		mu.Lock()
		stopping = true
		if len(sent) == 0 {
			close(drained)
		}
		mu.Unlock()
	}()
	go func() {
		select {
		case <-drained:
		case <-connCtx.Done():
		case <-done:
		}
		ws.CloseNow()
	}()
	defer func() {
		mu.Lock()
		s.mu.Lock()
		for _, at := range sent {
			s.lostAt = append(s.lostAt, at)
		}
		s.mu.Unlock()
		mu.Unlock()
	}()
	for {
		_, data, err := ws.Read(connCtx)
		if err != nil {
			if runCtx.Err() != nil {
				return nil // closed at the end of the run
			}
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
			if ok && stopping && len(sent) == 0 {
				close(drained)
			}
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
				if err := s.post(connCtx, path, c.Token, res, nil); err != nil && runCtx.Err() == nil {
					s.progress("result: %v", err)
				}
			}()
		case agentproto.TypeStop:
			return nil
		}
	}
}

// heartbeat waits, then sends heartbeat seq and records it in sent (guarded by mu) until
// acknowledged; false when the run ended or the write failed.
func (s *sim) heartbeat(runCtx context.Context, wait time.Duration, seq int, mu *sync.Mutex, sent map[string]time.Time,
	write func(typ, id string, payload any) error) bool {
	sleep(runCtx, wait)
	if runCtx.Err() != nil {
		return false
	}
	id := fmt.Sprintf("hb-%d", seq)
	m := agentproto.Metrics{CPUPercent: rand.Float64() * 100, RAMPercent: 40 + rand.Float64()*20, RAMUsedMB: 4000,
		RAMTotalMB: 8000, DiskPercent: 55, DiskUsedGB: 110, DiskTotalGB: 200, ProcessCount: 180}
	mu.Lock()
	sent[id] = time.Now()
	mu.Unlock()
	if write(agentproto.TypeHeartbeat, id, agentproto.Heartbeat{AgentVersion: "sim", Metrics: &m, UptimeSeconds: 3600}) != nil {
		// It never went out: it cannot be acknowledged.
		mu.Lock()
		delete(sent, id)
		mu.Unlock()
		return false
	}
	return true
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
func (s *sim) fleet(ctx context.Context, creds []Creds, rep *Report) error {
	var dev struct {
		OrgID string `json:"orgId"`
	}
	if err := s.get(ctx, "/devices/"+creds[0].DeviceID, &dev); err != nil {
		return err
	}
	if s.o.Scan {
		return s.measure(ctx, rep, "patch scan", func() ([]string, func() (bool, error), error) { return s.startScan(ctx, creds) })
	}
	var sc struct {
		ID string `json:"id"`
	}
	if err := s.post(ctx, "/scripts", s.o.AdminToken, map[string]any{"name": fmt.Sprintf("Fleet %d", time.Now().UnixNano()),
		"orgId": dev.OrgID, "osTypes": []string{"linux"}, "language": "sh", "content": "uptime"}, &sc); err != nil {
		return err
	}
	var auto struct {
		ID string `json:"id"`
	}
	if err := s.post(ctx, "/automations", s.o.AdminToken, map[string]any{"name": fmt.Sprintf("Fleet %d", time.Now().UnixNano()),
		"orgId": dev.OrgID, "trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "organization"},
		"actions": []map[string]any{{"type": "run_script", "scriptId": sc.ID}}}, &auto); err != nil {
		return err
	}
	return s.measure(ctx, rep, "script", func() ([]string, func() (bool, error), error) {
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

// measure starts a fleet-wide piece of work and times it into rep: from the request to the
// last agent receiving its command (dispatch) and to every result stored, with a bare
// request's latency meanwhile, and the window whose heartbeats the run reports at its end.
func (s *sim) measure(ctx context.Context, rep *Report, what string, begin func() ([]string, func() (bool, error), error)) error {
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	bare := make(chan []time.Duration, 1)
	go func() { bare <- s.probe(probeCtx, 50*time.Millisecond) }()
	start := time.Now()
	commandIDs, stored, err := begin()
	if err != nil {
		return err
	}
	s.progress("%s: %d commands started in %s", what, len(commandIDs), time.Since(start))
	rep.FleetWork, rep.FleetDevices, rep.fleetFrom = what, len(commandIDs), start
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
			return err
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
	rep.fleetTo = time.Now()
	if rep.FleetStored > 0 {
		rep.fleetTo = start.Add(rep.FleetStored)
	}
	return nil
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
