package snmp

import (
	"context"
	"encoding/json"
	"sync"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// concurrency bounds the targets one snmp_poll asks at once.
const concurrency = 16

// systemOIDs is the MIB-2 system group snmp_test asks for: sysDescr, sysObjectID,
// sysUpTime, sysContact, sysName, sysLocation.
var systemOIDs = []string{"1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.1.2.0", "1.3.6.1.2.1.1.3.0",
	"1.3.6.1.2.1.1.4.0", "1.3.6.1.2.1.1.5.0", "1.3.6.1.2.1.1.6.0"}

// Register registers the calls snmp_poll, snmp_get and snmp_test with reg.
func Register(reg *capability.Registry) {
	reg.Call(agentproto.CallSNMPPoll, func(ctx context.Context, args json.RawMessage) (any, error) {
		var p agentproto.SNMPPoll
		if err := json.Unmarshal(args, &p); err != nil {
			return nil, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "unreadable snmp_poll arguments: " + err.Error()}
		}
		return Poll(ctx, p.Targets), nil
	})
	reg.Call(agentproto.CallSNMPGet, func(ctx context.Context, args json.RawMessage) (any, error) {
		var a agentproto.SNMPGet
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "unreadable snmp_get arguments: " + err.Error()}
		}
		return answer(ctx, a.Target, a.OIDs), nil
	})
	reg.Call(agentproto.CallSNMPTest, func(ctx context.Context, args json.RawMessage) (any, error) {
		var a agentproto.SNMPGet
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "unreadable snmp_test arguments: " + err.Error()}
		}
		return answer(ctx, a.Target, systemOIDs), nil
	})
}

func answer(ctx context.Context, t agentproto.SNMPTarget, oids []string) agentproto.SNMPGetResult {
	vals, err := Get(ctx, t, oids)
	if err != nil {
		return agentproto.SNMPGetResult{Error: &agentproto.SNMPError{Kind: Kind(err), Message: err.Error()}}
	}
	return agentproto.SNMPGetResult{Values: vals}
}

// Poll asks every target for its OIDs, a few at a time, and reports each target's values or
// error in the order of targets.
func Poll(ctx context.Context, targets []agentproto.SNMPPollTarget) agentproto.SNMPPollResult {
	out := make([]agentproto.SNMPTargetResult, len(targets))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := answer(ctx, t.Target, t.OIDs)
			out[i] = agentproto.SNMPTargetResult{ID: t.ID, Values: r.Values, Error: r.Error}
		}()
	}
	wg.Wait()
	return agentproto.SNMPPollResult{Results: out}
}
