package netcheck

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestPingLoopback(t *testing.T) {
	res, err := Ping(context.Background(), "127.0.0.1", 3, 56, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3 || res.Received != 3 || len(res.RTTs) != 3 {
		t.Fatalf("loopback ping: %+v", res)
	}
	if res.Method != PingICMP && res.Method != PingTCP {
		t.Fatalf("method %q", res.Method)
	}
}

func TestPingConcurrentPingsKeepTheirOwnReplies(t *testing.T) {
	errs := make(chan error, 8)
	results := make(chan PingResult, 8)
	for range 8 {
		go func() {
			res, err := Ping(context.Background(), "127.0.0.1", 2, 16, 2*time.Second)
			errs <- err
			results <- res
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if res := <-results; res.Received != 2 || res.Sent != 2 {
			t.Fatalf("concurrent ping: %+v", res)
		}
	}
}

func TestPingUnansweredIsNoError(t *testing.T) {
	// 203.0.113.0/24 is reserved for documentation: nothing answers.
	res, err := Ping(context.Background(), "203.0.113.7", 1, 8, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1 || res.Received != 0 {
		t.Fatalf("unanswered ping: %+v", res)
	}
}

func TestPingUnresolvableHost(t *testing.T) {
	if _, err := Ping(context.Background(), "no-such-host.invalid", 1, 8, time.Second); err == nil {
		t.Fatal("an unresolvable host pinged")
	}
}

func TestTCPPingCountsRefusedAsAnswer(t *testing.T) {
	// Loopback: 443/80/22 are refused or accepted; either is an answer.
	res := tcpPing(context.Background(), net.ParseIP("127.0.0.1"), 2, time.Second)
	if res.Method != PingTCP || res.Sent != 2 || res.Received != 2 {
		t.Fatalf("tcp probe: %+v", res)
	}
}
