package agenthub

import (
	"context"
	"encoding/json"
	"net/http"

	"gale/internal/domains/devices"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/module"
	"gale/internal/platform/nodes"
	"gale/internal/wire/agentproto"
)

// Module holds this node's live channels to agents: the WebSocket endpoint, delivery of
// work, calls and streams to agents held by any node, and this node's entry among the nodes.
var Module = module.Module{Name: "agenthub", Build: func(k *module.Kernel) error {
	dev := module.Get[*devices.Service](k)
	address := k.Config.NodeAddress
	if address == "" {
		address = nodes.DefaultAddress(k.Config.ListenAddr)
	}
	reg := nodes.New(k.DB, nodes.Options{Address: address, Key: nodes.Key(k.Config.NodeSecret, k.Config.JWTSecret), Logger: k.Logger})
	h := New(Deps{Devices: dev, Bus: k.Bus, Logger: k.Logger, Metrics: k.HTTP.Registry()},
		Options{PingInterval: k.Config.AgentPingInterval, Workers: k.DB.AgentConns, Nodes: reg,
			ChannelWait: k.Config.AgentChannelWait})
	k.Declare(devices.Notifier(h))
	k.Declare(Message{Type: agentproto.TypeCommandOutput, Handle: func(ctx context.Context, a devices.Agent, payload json.RawMessage) error {
		var o agentproto.CommandOutput
		if err := json.Unmarshal(payload, &o); err != nil {
			return err
		}
		return dev.RecordOutput(ctx, a, o)
	}})
	// Agents' traffic (their HTTP routes and live channels, and streams relayed between nodes)
	// never waits behind the API's, and runs on the agents' own database connections.
	k.HTTP.AgentRoutes(httpapi.Prefix+agentproto.PathPrefix, PathRelay)
	k.HTTP.Handle("GET "+httpapi.Prefix+agentproto.PathWebSocket, h)
	k.HTTP.Handle("GET "+PathRelay, http.HandlerFunc(h.ServeRelay))
	k.OnReady(func(ctx context.Context) error {
		if err := h.plug(module.Declared[Message](k)); err != nil {
			return err
		}
		return reg.Start(ctx)
	})
	k.OnClose(reg.Stop) // after the hub's connections closed: closers run in reverse
	k.OnClose(h.Close)
	k.Provide(h)
	return nil
}}
