package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gale/internal/app"
	"gale/internal/domains/agenthub"
	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/apptest"
	"gale/internal/testkit/proctest"
	"gale/internal/wire/agentproto"
)

// streamAgent is a real gale-agent process connected to an in-process node.
type streamAgent struct {
	deviceID string
	token    string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// startStreamAgent enrolls a gale-agent with the node and runs it (without its watchdog)
// until the test ends; it returns once the node holds the agent's connection and the device is online.
func startStreamAgent(t testing.TB, node *apptest.Env) *streamAgent {
	t.Helper()
	return startAgentWith(t, node, nil)
}

// startAgentWith is startStreamAgent with a change to the agent's configuration (its fields
// by JSON name) made between enrollment and start.
func startAgentWith(t testing.TB, node *apptest.Env, settings map[string]any) *streamAgent {
	t.Helper()
	ten := node.NewTenant(node.Admin(), fmt.Sprintf("Streams%d", time.Now().UnixNano()))
	var key struct {
		Key              string `json:"key"`
		EnrollmentSecret string `json:"enrollmentSecret"`
	}
	node.Must(201, ten.Org, "POST", "/api/v1/enrollment-keys", map[string]any{"name": "streams", "maxUsage": 1,
		"issueEnrollmentSecret": true}).JSON(t, &key)
	cfgPath := filepath.Join(t.TempDir(), "agent.json")
	if out, err := exec.Command(agentBinary(t), "enroll", key.Key, "--server", node.Server.URL, "--enrollment-secret",
		key.EnrollmentSecret, "--quiet", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("enroll: %v: %s", err, out)
	}
	raw, _ := os.ReadFile(cfgPath)
	if len(settings) > 0 {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		for k, v := range settings {
			doc[k] = v
		}
		raw, _ = json.Marshal(doc)
		if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := &streamAgent{exited: make(chan struct{})}
	var cfg struct {
		DeviceID  string `json:"deviceId"`
		AuthToken string `json:"authToken"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	a.deviceID, a.token = cfg.DeviceID, cfg.AuthToken
	logs := &proctest.Output{}
	a.cmd = exec.Command(agentBinary(t), "run", "--no-watchdog", "--config", cfgPath)
	a.cmd.Stdout, a.cmd.Stderr = logs, logs
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	// A device is pending until its agent's first heartbeat is recorded, which may come just
	// after the connection: the routes the tests call need it online.
	apptest.Eventually(t, 30*time.Second, func() bool {
		var dev struct{ Status string }
		node.Must(200, ten.Org, "GET", "/api/v1/devices/"+a.deviceID, nil).JSON(t, &dev)
		return hubOf(node).Connected(a.deviceID) && dev.Status == "online"
	})
	return a
}

func (a *streamAgent) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// streamNodes are the node that opens streams and the node the agent connects to: the same
// one, or two nodes of one installation on PostgreSQL.
func streamNodes(t testing.TB, across bool) (opener, holder *apptest.Env) {
	t.Helper()
	opener = apptest.New(t)
	if !across {
		return opener, opener
	}
	if storetest.Backend() != "postgres" {
		t.Skip("several nodes need PostgreSQL (set TEST_DATABASE_URL): SQLite serves one node")
	}
	return opener, opener.SecondNode()
}

func hubOf(e *apptest.Env) *agenthub.Hub { return app.Service[*agenthub.Hub](e.App) }

// waitIdle waits until the nodes hold no stream and no relay connection: everything a stream
// took was released.
func waitIdle(t *testing.T, envs ...*apptest.Env) {
	t.Helper()
	waitFor(t, 15*time.Second, "streams and relays released", func() bool {
		for _, e := range envs {
			if s := hubOf(e).Stats(); s.Streams != 0 || s.Relays != 0 || s.Buffer != 0 {
				return false
			}
		}
		return true
	})
}

func forBothLayouts(t *testing.T, test func(t *testing.T, opener, holder *apptest.Env)) {
	for _, layout := range []struct {
		name   string
		across bool
	}{{"one node", false}, {"across nodes", true}} {
		t.Run(layout.name, func(t *testing.T) {
			opener, holder := streamNodes(t, layout.across)
			test(t, opener, holder)
		})
	}
}

// TestEchoStreamCarries10MiBInOrder sends 10 MiB through the agent's echo stream and reads
// them back byte for byte, then checks that the stream's end released everything.
func TestEchoStreamCarries10MiBInOrder(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		st, err := hubOf(opener).OpenStream(ctx, agent.deviceID, "echo", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		want := make([]byte, 10<<20)
		_, _ = rand.Read(want)
		writeErr := make(chan error, 1)
		go func() {
			_, err := st.Write(want)
			if err == nil {
				err = st.CloseWrite()
			}
			writeErr <- err
		}()
		got, err := io.ReadAll(st)
		if err != nil {
			t.Fatalf("read back %d bytes, then %v", len(got), err)
		}
		if err := <-writeErr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read back %d bytes that differ from the 10 MiB sent", len(got))
		}
		st.Close()
		waitIdle(t, opener, holder)
	})
}

// TestAStreamNobodyReadsStopsItsWriter pushes 50 MiB at an echo stream whose reader never
// reads: the writer must stall after a few windows, and the server's heap stay bounded.
func TestAStreamNobodyReadsStopsItsWriter(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		st, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil)
		if err != nil {
			t.Fatal(err)
		}
		heapBefore := heapInUse()
		var written atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			chunk := make([]byte, 64<<10)
			for written.Load() < 50<<20 {
				n, err := st.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
		// The writer stalls once every window and socket buffer on the way is full.
		last := int64(-1)
		waitFor(t, 30*time.Second, "the writer to stall", func() bool {
			time.Sleep(500 * time.Millisecond)
			n := written.Load()
			stalled := n == last
			last = n
			return stalled
		})
		heapGrowth := heapInUse() - heapBefore
		t.Logf("writer stalled after %.1f MiB; server heap grew %.1f MiB", float64(last)/(1<<20), float64(heapGrowth)/(1<<20))
		if last >= 16<<20 {
			t.Errorf("the writer sent %d bytes to a stream nobody reads; want it stopped after a few windows", last)
		}
		if heapGrowth > 32<<20 {
			t.Errorf("the server's heap grew by %d bytes while 50 MiB were pushed at a stalled stream", heapGrowth)
		}
		st.Close()
		<-done
		waitIdle(t, opener, holder)
	})
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestHundredConcurrentStreamsToOneAgent runs 100 echo streams to one agent at once.
func TestHundredConcurrentStreamsToOneAgent(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := range 100 {
			wg.Go(func() {
				st, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil)
				if err != nil {
					errs <- err
					return
				}
				defer st.Close()
				want := bytes.Repeat([]byte{byte(i)}, 64<<10+i)
				go func() {
					_, _ = st.Write(want)
					_ = st.CloseWrite()
				}()
				got, err := io.ReadAll(st)
				if err != nil || !bytes.Equal(got, want) {
					errs <- fmt.Errorf("stream %d: read %d bytes, %v", i, len(got), err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		waitIdle(t, opener, holder)
	})
}

// TestClosingAStreamEarlyReleasesIt closes a stream in the middle of a transfer: both ends
// let go of it.
func TestClosingAStreamEarlyReleasesIt(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		st, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(make([]byte, 100<<10)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(st, make([]byte, 10<<10)); err != nil {
			t.Fatal(err)
		}
		st.Close()
		waitIdle(t, opener, holder)
		// The agent is still there for the next stream.
		again, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil)
		if err != nil {
			t.Fatal(err)
		}
		again.Close()
	})
}

// TestAgentDisconnectEndsItsStreamsWithAnError stops the agent while a stream is open: reading
// the stream fails instead of reporting a clean end.
func TestAgentDisconnectEndsItsStreamsWithAnError(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		st, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		agent.stop()
		_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(st)
		if !errors.Is(err, agenthub.ErrNotConnected) {
			t.Fatalf("reading a stream of a stopped agent = %v; want ErrNotConnected at once", err)
		}
		st.Close()
		waitIdle(t, opener, holder)
		if _, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil); !errors.Is(err, agenthub.ErrNotConnected) {
			t.Fatalf("open to a stopped agent = %v, want ErrNotConnected", err)
		}
	})
}

// TestStreamRefusals: an unknown kind is refused with the agent's reason, and an agent that
// does not speak streams is named as such, on one node and across nodes.
func TestStreamRefusals(t *testing.T) {
	forBothLayouts(t, func(t *testing.T, opener, holder *apptest.Env) {
		agent := startStreamAgent(t, holder)
		_, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "no-such-kind", map[string]int{"cols": 80})
		if !errors.Is(err, agenthub.ErrStreamRefused) || !bytes.Contains([]byte(err.Error()), []byte("no-such-kind")) {
			t.Fatalf("open of an unknown kind = %v, want ErrStreamRefused naming the kind", err)
		}
		// An older agent: a WebSocket without the streams header, with the agent's own token.
		agent.stop()
		// The stopped agent's connection goes first, or the check below could see it, not the old agent's.
		waitFor(t, 10*time.Second, "the agent's own connection gone", func() bool { return !hubOf(holder).Connected(agent.deviceID) })
		ws, _, err := websocket.Dial(t.Context(), holder.Server.URL+"/api/v1"+agentproto.PathWebSocket,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + agent.token}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		waitFor(t, 10*time.Second, "old agent connected", func() bool { return hubOf(holder).Connected(agent.deviceID) })
		if _, err := hubOf(opener).OpenStream(t.Context(), agent.deviceID, "echo", nil); !errors.Is(err, agenthub.ErrStreamsUnsupported) {
			t.Fatalf("open to an agent without streams = %v, want ErrStreamsUnsupported", err)
		}
		waitIdle(t, opener, holder)
	})
}

// TestRelayEndpointRefusesRequestsNotSignedByANode calls the internal relay endpoint as an
// outsider: without a signature, with a forged one, with a stale timestamp.
func TestRelayEndpointRefusesRequestsNotSignedByANode(t *testing.T) {
	e := apptest.New(t)
	stale := fmt.Sprint(time.Now().Add(-time.Hour).Unix())
	for name, header := range map[string]http.Header{
		"unsigned":        {},
		"forged":          {"X-Gale-Node": {"01900000-0000-7000-8000-000000000000"}, "X-Gale-Node-Time": {fmt.Sprint(time.Now().Unix())}, "X-Gale-Node-Signature": {"00ff"}},
		"stale timestamp": {"X-Gale-Node": {"01900000-0000-7000-8000-000000000000"}, "X-Gale-Node-Time": {stale}, "X-Gale-Node-Signature": {"00ff"}},
	} {
		header.Set("X-Gale-Stream-Device", "01900000-0000-7000-8000-000000000001")
		header.Set("X-Gale-Stream-Kind", "echo")
		if r := e.Do(apptest.Caller{Header: header}, "GET", agenthub.PathRelay, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, r.Status, r.Body)
		}
	}
}
