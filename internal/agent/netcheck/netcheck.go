// Package netcheck is the agent's network and service checks, run on the server's behalf for
// monitors: ping (ICMP, or TCP when ICMP is not allowed), TCP port with banner, HTTP(S), DNS
// and a service on this machine. The server sends due checks in batches (command
// monitor_checks) and asks for one check at once (call monitor_check). Ping is exported for
// other capabilities that sweep networks.
package netcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// maxParallel bounds the checks of a batch that run at once.
const maxParallel = 32

// Register registers the monitor_checks command and the monitor_check call with reg.
func Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandMonitorChecks, runBatch)
	reg.Call(agentproto.CallMonitorCheck, func(ctx context.Context, args json.RawMessage) (any, error) {
		var c agentproto.MonitorCheck
		if err := json.Unmarshal(args, &c); err != nil {
			return nil, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "unreadable check: " + err.Error()}
		}
		return Run(ctx, c), nil
	})
}

func runBatch(ctx context.Context, cmd agentproto.Command) agentproto.CommandResult {
	var in agentproto.MonitorChecks
	if err := json.Unmarshal(cmd.Payload, &in); err != nil {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "unreadable checks: " + err.Error()}
	}
	out := agentproto.MonitorChecksResult{Results: RunAll(ctx, in.Checks)}
	b, err := json.Marshal(out)
	if err != nil {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "encode results: " + err.Error()}
	}
	return agentproto.CommandResult{Status: agentproto.ResultCompleted, Result: b}
}

// RunAll runs checks, at most maxParallel at a time, and returns their results in order.
func RunAll(ctx context.Context, checks []agentproto.MonitorCheck) []agentproto.MonitorCheckResult {
	out := make([]agentproto.MonitorCheckResult, len(checks))
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i, c := range checks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = Run(ctx, c)
		}()
	}
	wg.Wait()
	return out
}

// Run runs one check within its timeout (1 to 300 seconds; 5 when not given).
func Run(ctx context.Context, c agentproto.MonitorCheck) agentproto.MonitorCheckResult {
	timeout := time.Duration(c.TimeoutSeconds) * time.Second
	if c.TimeoutSeconds <= 0 || c.TimeoutSeconds > 300 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r agentproto.MonitorCheckResult
	switch c.Type {
	case agentproto.MonitorICMPPing:
		r = pingCheck(ctx, c, timeout)
	case agentproto.MonitorTCPPort:
		r = tcpCheck(ctx, c)
	case agentproto.MonitorHTTPCheck:
		r = httpCheck(ctx, c)
	case agentproto.MonitorDNSCheck:
		r = dnsCheck(ctx, c)
	case agentproto.MonitorServiceCheck:
		r = serviceCheck(ctx, c)
	default:
		r = failed("this agent does not know the check type %q", c.Type)
	}
	r.MonitorID, r.CheckedAt = c.MonitorID, time.Now().UTC()
	if r.Status == agentproto.MonitorOnline && c.Config.DegradedResponseMs > 0 && r.ResponseMs != nil &&
		*r.ResponseMs > float64(c.Config.DegradedResponseMs) {
		r.Status = agentproto.MonitorDegraded
		r.Error = fmt.Sprintf("answered in %.1f ms, slower than %d ms", *r.ResponseMs, c.Config.DegradedResponseMs)
	}
	return r
}

func failed(format string, args ...any) agentproto.MonitorCheckResult {
	return agentproto.MonitorCheckResult{Status: agentproto.MonitorOffline, Error: truncate(fmt.Sprintf(format, args...), 1000)}
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) *float64 {
	v := math.Round(float64(d)/float64(time.Microsecond)) / 1000
	return &v
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func pingCheck(ctx context.Context, c agentproto.MonitorCheck, timeout time.Duration) agentproto.MonitorCheckResult {
	count, size := c.Config.Count, c.Config.Size
	if count <= 0 {
		count = 3
	}
	if size <= 0 {
		size = 56
	}
	res, err := Ping(ctx, c.Target, count, size, timeout)
	if err != nil {
		return failed("%v", err)
	}
	details := map[string]any{"sent": res.Sent, "received": res.Received, "method": res.Method}
	if res.Note != "" {
		details["note"] = res.Note
	}
	if res.Sent > 0 {
		details["lossPercent"] = math.Round(float64(res.Sent-res.Received)*1000/float64(res.Sent)) / 10
	}
	if res.Received == 0 {
		r := failed("no answer to %d %s probes", res.Sent, res.Method)
		r.Details = details
		return r
	}
	var sum, lo, hi time.Duration
	for i, d := range res.RTTs {
		sum += d
		if i == 0 || d < lo {
			lo = d
		}
		hi = max(hi, d)
	}
	details["minMs"], details["maxMs"] = *ms(lo), *ms(hi)
	r := agentproto.MonitorCheckResult{Status: agentproto.MonitorOnline, ResponseMs: ms(sum / time.Duration(len(res.RTTs))), Details: details}
	if res.Received < res.Sent {
		r.Status = agentproto.MonitorDegraded
		r.Error = fmt.Sprintf("%d of %d probes unanswered", res.Sent-res.Received, res.Sent)
	}
	return r
}
