package netcheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// PingResult is the outcome of a ping: packets sent and answered, round-trip times, and how
// it was done ("icmp", or "tcp" when ICMP sockets are not allowed here).
type PingResult struct {
	Sent, Received int
	RTTs           []time.Duration
	Method         string
	Note           string
}

// Ping methods.
const (
	PingICMP = "icmp"
	PingTCP  = "tcp"
)

// pingGap is the pause between two echo requests of one ping.
const pingGap = 100 * time.Millisecond

// tcpProbePorts are the ports a TCP probe knocks on, in order, when ICMP is not allowed: an
// answer of any kind (accepted or refused) means the host is up.
var tcpProbePorts = []string{"443", "80", "22"}

// maxPingSize bounds an echo request's payload.
const maxPingSize = 65000

// Ping sends count echo requests of size payload bytes to host and waits up to timeout for
// each answer (the whole ping is further bounded by ctx). It uses an unprivileged ICMP socket
// where the system allows one, else a raw ICMP socket when the agent runs as root, else TCP
// connects (Method "tcp", with a Note saying so). A host that does not answer is a result
// with Received 0, not an error; errors are a host that does not resolve or a ping that
// cannot be sent at all.
func Ping(ctx context.Context, host string, count, size int, timeout time.Duration) (PingResult, error) {
	if count < 1 {
		count = 1
	}
	size = min(max(size, 0), maxPingSize)
	if timeout <= 0 {
		timeout = time.Second
	}
	ip, err := resolveHost(ctx, host)
	if err != nil {
		return PingResult{}, err
	}
	conn, raw, err := listenICMP(ip)
	if err != nil {
		note := fmt.Sprintf("ICMP sockets are not allowed here (%v): the host was probed with TCP connects to ports 443, 80 and 22", err)
		res := tcpPing(ctx, ip, count, timeout)
		res.Note = note
		return res, nil
	}
	defer conn.Close()
	return icmpPing(ctx, conn, raw, ip, count, size, timeout)
}

// resolveHost returns host's address, IPv4 first.
func resolveHost(ctx context.Context, host string) (net.IP, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip, nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if a.IP.To4() != nil {
			return a.IP, nil
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	return addrs[0].IP, nil
}

// listenICMP opens an unprivileged ping socket, else a raw one (raw reports true).
func listenICMP(ip net.IP) (*icmp.PacketConn, bool, error) {
	udp, rawNet, addr := "udp4", "ip4:icmp", "0.0.0.0"
	if ip.To4() == nil {
		udp, rawNet, addr = "udp6", "ip6:ipv6-icmp", "::"
	}
	c, err := icmp.ListenPacket(udp, addr)
	if err == nil {
		return c, false, nil
	}
	c, rawErr := icmp.ListenPacket(rawNet, addr)
	if rawErr == nil {
		return c, true, nil
	}
	return nil, false, fmt.Errorf("unprivileged: %v; raw: %v", err, rawErr)
}

func icmpPing(ctx context.Context, conn *icmp.PacketConn, raw bool, ip net.IP, count, size int, timeout time.Duration) (PingResult, error) {
	v4 := ip.To4() != nil
	var reqType, replyType icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	proto := 1
	if !v4 {
		reqType, replyType, proto = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, 58
	}
	var dst net.Addr = &net.UDPAddr{IP: ip}
	if raw {
		dst = &net.IPAddr{IP: ip}
	}
	id := rand.IntN(0xffff) + 1
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}

	res := PingResult{Method: PingICMP}
	var mu sync.Mutex
	sentAt := map[int]time.Time{}
	answered := map[int]bool{}
	lastSend := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = conn.SetReadDeadline(time.Now())
		case <-done:
		}
	}()

	var sendErr error
	go func() {
		for seq := 1; seq <= count; seq++ {
			if seq > 1 {
				select {
				case <-time.After(pingGap):
				case <-done:
					return
				case <-ctx.Done():
					return
				}
			}
			msg := icmp.Message{Type: reqType, Body: &icmp.Echo{ID: id, Seq: seq, Data: payload}}
			b, err := msg.Marshal(nil)
			if err == nil {
				mu.Lock()
				sentAt[seq] = time.Now()
				_, err = conn.WriteTo(b, dst)
				if err == nil {
					res.Sent++
					lastSend = sentAt[seq]
					_ = conn.SetReadDeadline(lastSend.Add(timeout))
				} else {
					delete(sentAt, seq)
				}
				mu.Unlock()
			}
			if err != nil {
				mu.Lock()
				sendErr = err
				mu.Unlock()
				_ = conn.SetReadDeadline(time.Now())
				return
			}
		}
	}()

	mu.Lock()
	_ = conn.SetReadDeadline(time.Now().Add(timeout + time.Duration(count)*pingGap))
	mu.Unlock()
	buf := make([]byte, size+1500)
	for {
		mu.Lock()
		finished := res.Received == count || sendErr != nil
		mu.Unlock()
		if finished || ctx.Err() != nil {
			break
		}
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				mu.Lock()
				more := res.Sent < count && sendErr == nil && ctx.Err() == nil
				if more {
					_ = conn.SetReadDeadline(lastSend.Add(timeout + 2*pingGap))
				}
				mu.Unlock()
				if more {
					continue
				}
				break
			}
			return res, fmt.Errorf("ping %s: %w", ip, err)
		}
		at := time.Now()
		if !samePeer(peer, ip) {
			continue
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != replyType {
			continue
		}
		echo, ok := m.Body.(*icmp.Echo)
		if !ok || (raw && echo.ID != id) {
			continue
		}
		mu.Lock()
		if t, ok := sentAt[echo.Seq]; ok && !answered[echo.Seq] {
			answered[echo.Seq] = true
			res.Received++
			res.RTTs = append(res.RTTs, at.Sub(t))
		}
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	if sendErr != nil && res.Sent == 0 {
		return res, fmt.Errorf("ping %s: %w", ip, sendErr)
	}
	return res, nil
}

func samePeer(peer net.Addr, ip net.IP) bool {
	switch a := peer.(type) {
	case *net.UDPAddr:
		return a.IP.Equal(ip)
	case *net.IPAddr:
		return a.IP.Equal(ip)
	}
	return false
}

// tcpPing probes ip count times with TCP connects: a connection accepted or refused on one of
// tcpProbePorts is an answer.
func tcpPing(ctx context.Context, ip net.IP, count int, timeout time.Duration) PingResult {
	res := PingResult{Method: PingTCP}
	var d net.Dialer
	for i := 0; i < count && ctx.Err() == nil; i++ {
		res.Sent++
		for _, port := range tcpProbePorts {
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			c, err := d.DialContext(cctx, "tcp", net.JoinHostPort(ip.String(), port))
			cancel()
			if err == nil {
				_ = c.Close()
			}
			if err == nil || errors.Is(err, syscall.ECONNREFUSED) {
				res.Received++
				res.RTTs = append(res.RTTs, time.Since(start))
				break
			}
		}
	}
	return res
}
