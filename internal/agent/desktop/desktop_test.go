package desktop

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

func call(t *testing.T, reg *capability.Registry, method string, args any) agentproto.CallResult {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return reg.Answer(ctx, agentproto.Call{ID: "c", Method: method, Args: raw})
}

func TestDesktopAnswersAnOfferAndEchoesOnControl(t *testing.T) {
	d := New()
	reg := capability.New()
	d.Register(reg)
	reports := make(chan agentproto.DesktopState, 16)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	reg.Start(ctx, capability.Host{Send: func(typ string, payload any) {
		if typ == agentproto.TypeDesktopState {
			reports <- payload.(agentproto.DesktopState)
		}
	}})

	if r := call(t, reg, agentproto.MethodDesktopICE, agentproto.DesktopICEArgs{SessionID: "s1", Candidate: ""}); r.Error == nil || r.Error.Code != agentproto.ErrNotFound {
		t.Fatalf("ice before an offer = %+v", r)
	}
	if r := call(t, reg, agentproto.MethodDesktopOffer, agentproto.DesktopOfferArgs{SessionID: "s1"}); r.Error == nil || r.Error.Code != agentproto.ErrInvalid {
		t.Fatalf("offer without sdp = %+v", r)
	}
	if r := call(t, reg, agentproto.MethodDesktopOffer, agentproto.DesktopOfferArgs{SessionID: "s1", SDP: "not sdp"}); r.Error == nil || r.Error.Code != agentproto.ErrInvalid {
		t.Fatalf("malformed offer = %+v", r)
	}
	if d.peer("s1") != nil {
		t.Fatal("a refused offer left a peer behind")
	}

	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	dc, err := pc.CreateDataChannel(ControlChannel, nil)
	if err != nil {
		t.Fatal(err)
	}
	echoed := make(chan string, 1)
	dc.OnOpen(func() { _ = dc.SendText("hello") })
	dc.OnMessage(func(m webrtc.DataChannelMessage) { echoed <- string(m.Data) })
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-gathered
	r := call(t, reg, agentproto.MethodDesktopOffer, agentproto.DesktopOfferArgs{SessionID: "s2", SDP: pc.LocalDescription().SDP})
	if r.Error != nil {
		t.Fatalf("offer: %+v", r.Error)
	}
	var answer agentproto.DesktopDescription
	if err := json.Unmarshal(r.Result, &answer); err != nil || answer.Type != "answer" || answer.ScreenCapture != agentproto.CaptureUnavailable || answer.CaptureNote == "" {
		t.Fatalf("answer = %+v (%v)", answer, err)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-echoed:
		if got != "hello" {
			t.Fatalf("echo = %q", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no echo on the control channel (connection %s)", pc.ConnectionState())
	}

	if len(reports) != 0 {
		t.Fatalf("a refused offer was reported: %+v", <-reports)
	}
	// While connected, the session is reported alive.
	go d.reportConnected(ctx, 20*time.Millisecond)
	if got := awaitReport(t, reports); len(got.Connected) != 1 || got.Connected[0] != "s2" || len(got.Closed) != 0 {
		t.Fatalf("report while connected = %+v", got)
	}

	if r := call(t, reg, agentproto.MethodDesktopClose, agentproto.DesktopSessionArgs{SessionID: "s2"}); r.Error != nil {
		t.Fatalf("close: %+v", r.Error)
	}
	if d.peer("s2") != nil {
		t.Fatal("the closed session keeps its peer")
	}
	for {
		got := awaitReport(t, reports)
		if len(got.Closed) == 1 {
			if got.Closed[0].SessionID != "s2" || got.Closed[0].Reason != "the session was ended" {
				t.Fatalf("closed report = %+v", got)
			}
			break
		}
	}
}

func awaitReport(t *testing.T, reports chan agentproto.DesktopState) agentproto.DesktopState {
	t.Helper()
	select {
	case got := <-reports:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("no desktop report")
	}
	return agentproto.DesktopState{}
}
