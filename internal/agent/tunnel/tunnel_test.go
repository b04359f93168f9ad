package tunnel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// fakeResolver answers names from a map.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := r[host]; ok {
		return addrs, nil
	}
	return nil, errors.New("no such host")
}

var resolver = fakeResolver{
	"localhost":     {netip.MustParseAddr("127.0.0.1")},
	"rebound.test":  {netip.MustParseAddr("127.0.0.1")},
	"mixed.test":    {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("::1")},
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
}

func TestDeviceLocalAddressesAreRefusedWhateverTheName(t *testing.T) {
	d := &Dialer{Resolver: resolver}
	for _, host := range []string{"127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1", "169.254.1.1", "fe80::1", "0.0.0.0", "::",
		"localhost", "rebound.test", "mixed.test", "metadata.test"} {
		_, err := d.Dial(context.Background(), agentproto.TunnelDialArgs{Host: host, Port: 80})
		var ce *agentproto.CallError
		if !errors.As(err, &ce) || ce.Code != agentproto.ErrTargetForbidden {
			t.Errorf("Dial(%s) = %v, want %s", host, err, agentproto.ErrTargetForbidden)
		}
	}
}

func TestUnresolvableTargetsAreUnreachable(t *testing.T) {
	d := &Dialer{Resolver: resolver}
	_, err := d.Dial(context.Background(), agentproto.TunnelDialArgs{Host: "nowhere.test", Port: 80})
	var ce *agentproto.CallError
	if !errors.As(err, &ce) || ce.Code != agentproto.ErrTargetUnreachable {
		t.Fatalf("Dial(nowhere.test) = %v, want %s", err, agentproto.ErrTargetUnreachable)
	}
}

// pair connects a server session to an agent session serving the tunnel stream kind.
func pair(t *testing.T, d *Dialer) *streams.Session {
	t.Helper()
	reg := capability.New()
	d.Register(reg)
	toAgent, toServer := make(chan []byte, 1024), make(chan []byte, 1024)
	send := func(ch chan []byte) func(context.Context, []byte) error {
		return func(ctx context.Context, frame []byte) error {
			select {
			case ch <- append([]byte(nil), frame...):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	server := streams.NewSession(send(toAgent), streams.Options{Initiator: true})
	agent := streams.NewSession(send(toServer), streams.Options{Accept: reg.AcceptStream})
	pump := func(ch chan []byte, to *streams.Session) {
		for frame := range ch {
			if to.Receive(frame) != nil {
				return
			}
		}
	}
	go pump(toAgent, agent)
	go pump(toServer, server)
	t.Cleanup(func() {
		server.Close(nil)
		agent.Close(nil)
	})
	return server
}

// header reads the agent's header line.
func header(t *testing.T, r *bufio.Reader) agentproto.TunnelDialHeader {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read header: %v", err)
	}
	var h agentproto.TunnelDialHeader
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatalf("header %q: %v", line, err)
	}
	return h
}

func TestAStreamCarriesAConnectionWithHalfCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The target reads until the client's FIN, then answers what it read and closes.
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c)
		_, _ = c.Write(append([]byte("got:"), got...))
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	server := pair(t, &Dialer{Resolver: resolver})

	st, err := server.Open(context.Background(), agentproto.StreamTunnelDial, agentproto.TunnelDialArgs{Host: "127.0.0.1", Port: port, AllowDeviceLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := bufio.NewReader(st)
	if h := header(t, r); h.Error != nil || h.Address != ln.Addr().String() {
		t.Fatalf("header = %+v, want the target's address", h)
	}
	if _, err := st.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(r)
	if err != nil || string(answer) != "got:hello" {
		t.Fatalf("answer = %q %v, want got:hello and EOF", answer, err)
	}
}

func TestARefusalComesInTheHeader(t *testing.T) {
	server := pair(t, &Dialer{Resolver: resolver})
	for _, tc := range []struct {
		args agentproto.TunnelDialArgs
		code string
	}{
		{agentproto.TunnelDialArgs{Host: "rebound.test", Port: 80}, agentproto.ErrTargetForbidden},
		{agentproto.TunnelDialArgs{Host: "nowhere.test", Port: 80}, agentproto.ErrTargetUnreachable},
		{agentproto.TunnelDialArgs{Host: "10.0.0.1", Port: 0}, agentproto.ErrInvalid},
	} {
		st, err := server.Open(context.Background(), agentproto.StreamTunnelDial, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(st)
		if h := header(t, r); h.Error == nil || h.Error.Code != tc.code {
			t.Fatalf("header for %+v = %+v, want %s", tc.args, h, tc.code)
		}
		if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
			t.Fatalf("after a refusal: %q %v, want EOF", rest, err)
		}
		st.Close()
	}
}
