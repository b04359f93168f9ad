// Package tunnel is the agent's side of tunnels: the stream kind agentproto.StreamTunnelDial,
// which connects to a machine of the device's network (a printer's web page, a switch's
// console) and carries the connection's bytes over the stream. The agent enforces the
// device-local rule itself, on the addresses it resolved, whatever the server asked.
package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// Timeouts of opening a connection: the name's lookup, and each address's TCP dial.
const (
	lookupTimeout = 10 * time.Second
	dialTimeout   = 10 * time.Second
)

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens tunnels' connections.
type Dialer struct {
	// Resolver resolves target names; nil is net.DefaultResolver.
	Resolver Resolver
}

// Register registers the tunnel stream kind with the system's resolver.
func Register(reg *capability.Registry) { (&Dialer{}).Register(reg) }

// Register registers d's stream kind.
func (d *Dialer) Register(reg *capability.Registry) {
	reg.Stream(agentproto.StreamTunnelDial, d.serve)
}

func (d *Dialer) serve(ctx context.Context, s *streams.Stream) {
	var a agentproto.TunnelDialArgs
	if err := json.Unmarshal(s.Args(), &a); err != nil || a.Host == "" || a.Port < 1 || a.Port > 65535 {
		refuse(s, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "a tunnel needs a host and a port from 1 to 65535"})
		return
	}
	conn, err := d.Dial(ctx, a)
	if err != nil {
		refuse(s, err)
		return
	}
	defer conn.Close()
	if sendHeader(s, agentproto.TunnelDialHeader{Address: conn.RemoteAddr().String()}) != nil {
		return
	}
	pipe(s, conn)
}

// Dial resolves the target of a, refuses it when any of its addresses is device-local and a
// does not allow that, and connects to the first checked address that answers.
func (d *Dialer) Dial(ctx context.Context, a agentproto.TunnelDialArgs) (*net.TCPConn, error) {
	addrs, err := d.resolve(ctx, a.Host)
	if err != nil {
		return nil, err
	}
	if !a.AllowDeviceLocal {
		// One device-local answer refuses the name: a resolver that mixes them in is not
		// to be trusted with the others either.
		for _, ip := range addrs {
			if agentproto.IsDeviceLocal(ip) {
				return nil, &agentproto.CallError{Code: agentproto.ErrTargetForbidden, Message: fmt.Sprintf(
					"%s is an address of the device itself (loopback or link-local); this tunnel may not reach it", describe(a.Host, ip))}
			}
		}
	}
	var errs []error
	for _, ip := range addrs {
		dialer := net.Dialer{Timeout: dialTimeout}
		c, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, uint16(a.Port)).String())
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		errs = append(errs, err)
	}
	return nil, &agentproto.CallError{Code: agentproto.ErrTargetUnreachable, Message: errors.Join(errs...).Error()}
}

// resolve returns the addresses of host: itself when it is an address.
func (d *Dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.Trim(host, "[]")
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return nil, &agentproto.CallError{Code: agentproto.ErrTargetUnreachable, Message: "resolve " + host + ": " + err.Error()}
	}
	return addrs, nil
}

func describe(host string, ip netip.Addr) string {
	if host == ip.String() {
		return host
	}
	return host + " resolves to " + ip.String() + ", which"
}

// pipe carries bytes both ways until both directions ended. Each FIN half-closes the
// matching direction; an error either way ends the handler, whose return resets the stream,
// and the deferred Close of the connection ends the other direction.
func pipe(s *streams.Stream, conn *net.TCPConn) {
	toTarget := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, s)
		if err == nil {
			err = conn.CloseWrite()
		} else {
			conn.Close()
		}
		toTarget <- err
	}()
	if _, err := io.Copy(s, conn); err != nil {
		return
	}
	if s.CloseWrite() != nil {
		return
	}
	<-toTarget
}

// sendHeader writes the header line.
func sendHeader(w io.Writer, h agentproto.TunnelDialHeader) error {
	line, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}

// refuse answers err in the header and half-closes, then waits for the server to end the
// stream: returning earlier would reset it before the server read why.
func refuse(s *streams.Stream, err error) {
	var ce *agentproto.CallError
	if !errors.As(err, &ce) {
		ce = &agentproto.CallError{Code: agentproto.ErrFailed, Message: err.Error()}
	}
	if sendHeader(s, agentproto.TunnelDialHeader{Error: ce}) == nil && s.CloseWrite() == nil {
		_, _ = io.Copy(io.Discard, s)
	}
}
