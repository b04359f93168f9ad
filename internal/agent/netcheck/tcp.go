package netcheck

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// maxBanner bounds what a TCP check reads of a banner.
const maxBanner = 4096

func tcpCheck(ctx context.Context, c agentproto.MonitorCheck) agentproto.MonitorCheckResult {
	addr := net.JoinHostPort(c.Target, strconv.Itoa(c.Config.Port))
	var d net.Dialer
	start := time.Now()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return failed("connect to %s: %v", addr, err)
	}
	defer conn.Close()
	took := time.Since(start)
	details := map[string]any{"address": conn.RemoteAddr().String()}
	r := agentproto.MonitorCheckResult{Status: agentproto.MonitorOnline, ResponseMs: ms(took), Details: details}
	if c.Config.ExpectedBanner == "" {
		return r
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	banner := readBanner(conn, c.Config.ExpectedBanner)
	details["banner"] = strings.ToValidUTF8(truncate(banner, 200), "?")
	if !strings.Contains(banner, c.Config.ExpectedBanner) {
		r.Status, r.Error = agentproto.MonitorOffline, "the banner does not contain the expected text"
	}
	return r
}

// readBanner reads from conn until want shows up, maxBanner bytes were read, the peer closes
// or the deadline passes.
func readBanner(conn net.Conn, want string) string {
	buf := make([]byte, 0, maxBanner)
	chunk := make([]byte, 1024)
	for len(buf) < maxBanner {
		n, err := conn.Read(chunk)
		buf = append(buf, chunk[:min(n, maxBanner-len(buf))]...)
		if err != nil || strings.Contains(string(buf), want) {
			break
		}
	}
	return string(buf)
}
