package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/pion/webrtc/v4"

	"gale/internal/domains/remote"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// remoteSession creates a remote session of typ on the device as c and returns its ID.
func remoteSession(t testing.TB, node *apptest.Env, c apptest.Caller, deviceID, typ string) string {
	t.Helper()
	var s struct {
		ID string `json:"id"`
	}
	node.Must(201, c, "POST", "/api/v1/remote/sessions", map[string]any{"deviceId": deviceID, "type": typ}).JSON(t, &s)
	return s.ID
}

// terminalTicket asks for the session's terminal ticket and returns the WebSocket URL.
func terminalTicket(t testing.TB, node *apptest.Env, c apptest.Caller, sessionID string) string {
	t.Helper()
	var tk struct {
		URL string `json:"url"`
	}
	node.Must(200, c, "POST", "/api/v1/remote/sessions/"+sessionID+"/ws-ticket", nil).JSON(t, &tk)
	return tk.URL
}

// terminal is a browser's end of a remote terminal.
type terminal struct {
	t   testing.TB
	ws  *websocket.Conn
	ctx context.Context
	out bytes.Buffer
}

func openTerminal(t testing.TB, url string) *terminal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("open the terminal: %v", err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &terminal{t: t, ws: ws, ctx: ctx}
}

func (term *terminal) send(s string) {
	term.t.Helper()
	if err := term.ws.Write(term.ctx, websocket.MessageBinary, []byte(s)); err != nil {
		term.t.Fatalf("type %q: %v", s, err)
	}
}

func (term *terminal) resize(cols, rows int) {
	term.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
	if err := term.ws.Write(term.ctx, websocket.MessageText, b); err != nil {
		term.t.Fatalf("resize: %v", err)
	}
}

// escapes are the terminal's control sequences (the shell's bracketed-paste mode, colours).
var escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// awaitLine reads the terminal's output until it shows line as a line of its own (not the
// typed command's echo), and drops what it read.
func (term *terminal) awaitLine(line string) {
	term.t.Helper()
	re := regexp.MustCompile(`[\r\n]` + regexp.QuoteMeta(line) + `\r\n`)
	term.awaitMatch(line, func(out string) bool { return re.MatchString(out) })
}

// await reads the terminal's output until it holds want, and drops what it read.
func (term *terminal) await(want string) {
	term.t.Helper()
	term.awaitMatch(want, func(out string) bool { return strings.Contains(out, want) })
}

func (term *terminal) awaitMatch(want string, found func(string) bool) {
	term.t.Helper()
	for !found(escapes.ReplaceAllString(term.out.String(), "")) {
		typ, data, err := term.ws.Read(term.ctx)
		if err != nil {
			term.t.Fatalf("waiting for %q: %v; the terminal showed %q", want, err, term.out.String())
		}
		if typ == websocket.MessageBinary {
			term.out.Write(data)
		}
	}
	term.out.Reset()
}

// A real agent's terminal echoes, resizes and ends with its session, on the node holding the
// agent and through another node.
func TestRemoteTerminal(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		admin := opener.Admin()
		id := remoteSession(t, opener, admin, agent.deviceID, "terminal")
		url := terminalTicket(t, opener, admin, id)
		term := openTerminal(t, url+"&cols=80&rows=24")

		term.send("echo hi\n")
		term.awaitLine("hi")
		term.send("stty size\n")
		term.awaitLine("24 80")
		term.resize(120, 40)
		term.send("stty size\n")
		term.awaitLine("40 120")
		term.send("echo $TERM\n")
		term.awaitLine("xterm-256color")

		var s struct {
			Status    string  `json:"status"`
			StartedAt *string `json:"startedAt"`
			Duration  *int64  `json:"durationSeconds"`
		}
		opener.Must(200, admin, "GET", "/api/v1/remote/sessions/"+id, nil).JSON(t, &s)
		if s.Status != "active" || s.StartedAt == nil {
			t.Fatalf("session with its terminal open = %+v", s)
		}

		// The ticket opened the terminal once.
		resp, err := http.Get(strings.Replace(url, "ws", "http", 1))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("reused ticket = %d, want 401", resp.StatusCode)
		}

		// Ending the session closes the terminal, and the agent's shell with it.
		opener.Must(200, admin, "POST", "/api/v1/remote/sessions/"+id+"/end", nil)
		for {
			if _, _, err := term.ws.Read(term.ctx); err != nil {
				if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
					t.Fatalf("terminal closed with %v", err)
				}
				break
			}
		}
		opener.Must(200, admin, "GET", "/api/v1/remote/sessions/"+id, nil).JSON(t, &s)
		if s.Status != "disconnected" || s.Duration == nil {
			t.Fatalf("ended session = %+v", s)
		}
		waitIdle(t, opener, holder)
	})
}

// A viewer closing the terminal disconnects the session; the shell exiting does too.
func TestRemoteTerminalEndsWithItsViewerOrShell(t *testing.T) {
	node := apptest.New(t)
	agent := startStreamAgent(t, node)
	admin := node.Admin()
	status := func(id string) (string, string) {
		var s struct {
			Status    string `json:"status"`
			EndReason string `json:"endReason"`
		}
		node.Must(200, admin, "GET", "/api/v1/remote/sessions/"+id, nil).JSON(t, &s)
		return s.Status, s.EndReason
	}

	closed := remoteSession(t, node, admin, agent.deviceID, "terminal")
	term := openTerminal(t, terminalTicket(t, node, admin, closed))
	term.send("echo ready\n")
	term.awaitLine("ready")
	term.ws.Close(websocket.StatusNormalClosure, "")
	waitFor(t, 10*time.Second, "the session to end", func() bool { st, _ := status(closed); return st == "disconnected" })

	exited := remoteSession(t, node, admin, agent.deviceID, "terminal")
	term = openTerminal(t, terminalTicket(t, node, admin, exited))
	term.send("exit\n")
	for {
		if _, _, err := term.ws.Read(term.ctx); err != nil {
			break
		}
	}
	waitFor(t, 10*time.Second, "the session to end", func() bool { st, _ := status(exited); return st == "disconnected" })
	if _, reason := status(exited); reason != "the shell exited" {
		t.Fatalf("end reason = %q", reason)
	}
	waitIdle(t, node)
}

// An active terminal its node stopped marking as served (a node that died) is expired as lost,
// here by moving the clock past TerminalLostAfter with no mark in between; a terminal still
// open then closes.
func TestRemoteTerminalUnseenIsLost(t *testing.T) {
	clk := clock.NewFake(time.Now())
	node := apptest.New(t, apptest.WithClock(clk))
	agent := startStreamAgent(t, node)
	admin := node.Admin()
	id := remoteSession(t, node, admin, agent.deviceID, "terminal")
	term := openTerminal(t, terminalTicket(t, node, admin, id))
	term.send("echo ready\n")
	term.awaitLine("ready")

	var stale struct {
		Expired int `json:"expired"`
	}
	// The fake clock runs on from where it is set: a loaded machine's seconds must not matter.
	clk.Advance(remote.TerminalLostAfter - 30*time.Second)
	node.Must(200, admin, "DELETE", "/api/v1/remote/sessions/stale", nil).JSON(t, &stale)
	if stale.Expired != 0 {
		t.Fatalf("expired %d before the terminal was lost", stale.Expired)
	}
	clk.Advance(time.Minute)
	node.Must(200, admin, "DELETE", "/api/v1/remote/sessions/stale", nil).JSON(t, &stale)
	if stale.Expired != 1 {
		t.Fatalf("expired %d, want the lost terminal", stale.Expired)
	}
	var s struct {
		Status    string `json:"status"`
		EndReason string `json:"endReason"`
	}
	node.Must(200, admin, "GET", "/api/v1/remote/sessions/"+id, nil).JSON(t, &s)
	if s.Status != "failed" || !strings.HasPrefix(s.EndReason, "lost:") {
		t.Fatalf("lost terminal = %+v", s)
	}
	for {
		if _, _, err := term.ws.Read(term.ctx); err != nil {
			break
		}
	}
	waitIdle(t, node)
}

// A pion peer in the test opens a data channel to the real agent through the signalling
// routes, and the agent echoes on it.
func TestRemoteDesktopDataChannel(t *testing.T) {
	node := apptest.New(t)
	agent := startStreamAgent(t, node)
	admin := node.Admin()
	id := remoteSession(t, node, admin, agent.deviceID, "desktop")

	var ice struct {
		ICEServers []agentproto.ICEServer `json:"iceServers"`
	}
	node.Must(200, admin, "GET", "/api/v1/remote/ice-servers", nil).JSON(t, &ice)
	if len(ice.ICEServers) != 0 {
		t.Fatalf("ice servers without configuration = %+v", ice.ICEServers)
	}

	pc, dc, opened, echoed := newViewer(t)
	// The viewer trickles its candidates through /ice.
	pc.OnICECandidate(func(c *webrtc.ICECandidate) {
		if c == nil {
			return
		}
		init := c.ToJSON()
		node.Do(admin, "POST", "/api/v1/remote/sessions/"+id+"/ice", map[string]any{"candidate": init.Candidate,
			"sdpMid": init.SDPMid, "sdpMLineIndex": init.SDPMLineIndex})
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	var answer agentproto.DesktopDescription
	node.Must(200, admin, "POST", "/api/v1/remote/sessions/"+id+"/offer", map[string]any{"sdp": offer.SDP, "type": "offer"}).JSON(t, &answer)
	if answer.Type != "answer" || answer.ScreenCapture != "unavailable" || answer.CaptureNote == "" {
		t.Fatalf("answer = %+v", answer)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP}); err != nil {
		t.Fatal(err)
	}
	awaitEcho(t, pc, dc, opened, echoed)

	var s struct {
		Status        string `json:"status"`
		ScreenCapture string `json:"screenCapture"`
		CaptureNote   string `json:"captureNote"`
	}
	node.Must(200, admin, "GET", "/api/v1/remote/sessions/"+id, nil).JSON(t, &s)
	if s.Status != "active" || s.ScreenCapture != "unavailable" || s.CaptureNote == "" {
		t.Fatalf("desktop session = %+v", s)
	}

	// The agent offers an ICE restart; the viewer's answer goes back through /answer.
	var restart agentproto.DesktopDescription
	node.Must(200, admin, "POST", "/api/v1/remote/sessions/"+id+"/offer", map[string]any{"iceRestart": true}).JSON(t, &restart)
	if restart.Type != "offer" {
		t.Fatalf("restart = %+v", restart)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: restart.SDP}); err != nil {
		t.Fatal(err)
	}
	reply, err := pc.CreateAnswer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.SetLocalDescription(reply); err != nil {
		t.Fatal(err)
	}
	node.Must(200, admin, "POST", "/api/v1/remote/sessions/"+id+"/answer", map[string]any{"sdp": reply.SDP, "type": "answer"})
	if err := dc.SendText("again"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-echoed:
		if got != "again" {
			t.Fatalf("echo after the restart = %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no echo after the ICE restart")
	}

	// Ending the session closes the agent's peer.
	closedByAgent := make(chan struct{})
	var once sync.Once
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		if st == webrtc.PeerConnectionStateDisconnected || st == webrtc.PeerConnectionStateFailed || st == webrtc.PeerConnectionStateClosed {
			once.Do(func() { close(closedByAgent) })
		}
	})
	dc.OnClose(func() { once.Do(func() { close(closedByAgent) }) })
	node.Must(200, admin, "POST", "/api/v1/remote/sessions/"+id+"/end", nil)
	select {
	case <-closedByAgent:
	case <-time.After(60 * time.Second):
		t.Fatal("the agent kept the connection of an ended session")
	}
}

// A desktop viewer without the user's token connects with a connect code: its offer carries
// every candidate (no trickling), and the data channel opens to the real agent.
func TestRemoteDesktopConnectCode(t *testing.T) {
	node := apptest.New(t)
	agent := startStreamAgent(t, node)
	admin := node.Admin()
	id := remoteSession(t, node, admin, agent.deviceID, "desktop")
	var code struct {
		Code string `json:"code"`
	}
	node.Must(200, admin, "POST", "/api/v1/remote/sessions/"+id+"/desktop-connect-code", nil).JSON(t, &code)

	pc, dc, opened, echoed := newViewer(t)
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-gathered
	var answer agentproto.DesktopDescription
	node.Must(200, apptest.Anonymous, "POST", "/api/v1/remote/sessions/"+id+"/desktop-connect",
		map[string]any{"code": code.Code, "sdp": pc.LocalDescription().SDP, "type": "offer"}).JSON(t, &answer)
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP}); err != nil {
		t.Fatal(err)
	}
	awaitEcho(t, pc, dc, opened, echoed)
	if r := node.Do(apptest.Anonymous, "POST", "/api/v1/remote/sessions/"+id+"/desktop-connect",
		map[string]any{"code": code.Code, "sdp": pc.LocalDescription().SDP}); r.Status != 401 {
		t.Fatalf("a second use of the code = %d %s", r.Status, r.Body)
	}

	// The viewer goes away: the agent reports its peer closed and the session ends.
	start := time.Now()
	pc.Close()
	var s struct {
		Status    string `json:"status"`
		EndReason string `json:"endReason"`
	}
	apptest.Eventually(t, 60*time.Second, func() bool {
		node.Must(200, admin, "GET", "/api/v1/remote/sessions/"+id, nil).JSON(t, &s)
		return s.Status != "active"
	})
	if s.Status != "disconnected" || !strings.HasPrefix(s.EndReason, "the device closed the desktop: ") {
		t.Fatalf("session after the viewer left = %+v", s)
	}
	t.Logf("the session ended %v after the viewer closed: %s", time.Since(start).Round(time.Millisecond), s.EndReason)
}

// newViewer is a desktop viewer's peer with a "control" data channel: a channel closed when
// it opens, and one receiving what arrives on it.
func newViewer(t *testing.T) (*webrtc.PeerConnection, *webrtc.DataChannel, chan struct{}, chan string) {
	t.Helper()
	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	dc, err := pc.CreateDataChannel("control", nil)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	echoed := make(chan string, 1)
	dc.OnOpen(func() { close(opened) })
	dc.OnMessage(func(m webrtc.DataChannelMessage) { echoed <- string(m.Data) })
	return pc, dc, opened, echoed
}

// awaitEcho waits for the data channel to open and checks that the agent echoes on it.
func awaitEcho(t *testing.T, pc *webrtc.PeerConnection, dc *webrtc.DataChannel, opened chan struct{}, echoed chan string) {
	t.Helper()
	select {
	case <-opened:
	case <-time.After(30 * time.Second):
		t.Fatalf("the data channel did not open (connection %s)", pc.ConnectionState())
	}
	if err := dc.SendText("ping"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-echoed:
		if got != "ping" {
			t.Fatalf("echo = %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not echo on the control channel")
	}
}

// TestRemoteFileTransferRoundTrip uploads 8 MiB through a file_transfer session to a real
// agent, downloads them back intact, and checks that the size cap refuses larger files
// either way without leaving a file on the device.
func TestRemoteFileTransferRoundTrip(t *testing.T) {
	const limit = 16 << 20
	node := apptest.New(t, func(c *config.Config) { c.RemoteFileTransferMaxBytes = limit })
	agent := startStreamAgent(t, node)
	admin := node.Admin()
	files := node.Server.URL + "/api/v1/remote/sessions/" + remoteSession(t, node, admin, agent.deviceID, "file_transfer") + "/files?path="
	dir := t.TempDir()
	src := filepath.Join(dir, "source.bin")
	want := writeRandomFile(t, src, 8<<20)
	transfer := func(method, path string, body io.Reader, size int64) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, files+url.QueryEscape(path), body)
		req.Header.Set("Authorization", "Bearer "+admin.Token)
		if body != nil {
			req.Header.Set("Content-Type", "application/octet-stream")
			req.ContentLength = size
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}

	copyPath := filepath.Join(dir, "copy.bin")
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res := transfer(http.MethodPut, copyPath, f, 8<<20)
	answer, _ := io.ReadAll(res.Body)
	var entry struct {
		SizeBytes int64 `json:"sizeBytes"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(answer, &entry) != nil || entry.SizeBytes != 8<<20 {
		t.Fatalf("upload = %d %s", res.StatusCode, answer)
	}
	res = transfer(http.MethodGet, copyPath, nil, 0)
	sum := sha256.New()
	n, err := io.Copy(sum, res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("download: status %d, %d bytes, %v", res.StatusCode, n, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want || n != 8<<20 || res.Header.Get("X-Checksum-Sha256") != want {
		t.Fatalf("downloaded %d bytes with SHA-256 %s (header %s), want %d with %s", n, got, res.Header.Get("X-Checksum-Sha256"), 8<<20, want)
	}

	errorCode := func(res *http.Response) string {
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&env)
		return env.Error.Code
	}
	big := filepath.Join(dir, "big.bin")
	writeRandomFile(t, big, limit+1)
	for _, size := range []int64{limit + 1, -1} { // declared, then chunked
		tooBig := filepath.Join(dir, fmt.Sprintf("too-big%d.bin", size))
		f, err := os.Open(big)
		if err != nil {
			t.Fatal(err)
		}
		res := transfer(http.MethodPut, tooBig, io.MultiReader(f), size)
		f.Close()
		if code := errorCode(res); res.StatusCode != http.StatusRequestEntityTooLarge || code != "PAYLOAD_TOO_LARGE" {
			t.Fatalf("upload of %d bytes (size %d) over a cap of %d = %d %s", limit+1, size, limit, res.StatusCode, code)
		}
		if _, err := os.Stat(tooBig); !os.IsNotExist(err) {
			t.Fatalf("a refused upload left %s (%v)", tooBig, err)
		}
	}
	if res := transfer(http.MethodGet, big, nil, 0); res.StatusCode != http.StatusRequestEntityTooLarge || errorCode(res) != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("download over the cap = %d", res.StatusCode)
	}
	apptest.Eventually(t, 10*time.Second, func() bool {
		leftovers, _ := filepath.Glob(filepath.Join(dir, ".*gale-*"))
		return len(leftovers) == 0
	})
}

// BenchmarkRemoteTerminalKeystrokeEcho types one key at a time into 20 open terminals on two
// real agents (cat in raw mode sends each key back) and reports the p99 of the round trip
// browser → server → agent → PTY → agent → server → browser.
func BenchmarkRemoteTerminalKeystrokeEcho(b *testing.B) {
	node := apptest.New(b)
	agents := []*streamAgent{startStreamAgent(b, node), startStreamAgent(b, node)}
	var terms []*terminal
	for u := range 4 {
		_, user := node.CreateUser(fmt.Sprintf("bench%d@gale.test", u), access.LevelSystem, "", "", "")
		for range 5 {
			id := remoteSession(b, node, user, agents[u/2].deviceID, "terminal")
			term := openTerminal(b, terminalTicket(b, node, user, id))
			term.send("stty raw -echo; printf 'RE''ADY'; exec cat\n")
			term.await("READY")
			terms = append(terms, term)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		term := terms[i%len(terms)]
		start := time.Now()
		term.send("k")
		term.await("k")
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
