package capability_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

func TestRegistryDispatchesByNameAndRefusesTheRest(t *testing.T) {
	reg := capability.New()
	reg.Command("hello", func(context.Context, agentproto.Command) agentproto.CommandResult {
		return agentproto.CommandResult{Status: agentproto.ResultCompleted}
	})
	reg.Call("sum", func(_ context.Context, raw json.RawMessage) (any, error) {
		var xs []int
		if err := json.Unmarshal(raw, &xs); err != nil {
			return nil, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: err.Error()}
		}
		return xs[0] + xs[1], nil
	})
	reg.Call("boom", func(context.Context, json.RawMessage) (any, error) { panic("boom") })
	reg.Call("fail", func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("disk full") })
	reg.Stream("echo", func(context.Context, *streams.Stream) {})
	ctx := context.Background()

	if res := reg.RunCommand(ctx, agentproto.Command{Type: "hello"}); res.Status != agentproto.ResultCompleted {
		t.Errorf("registered command = %+v", res)
	}
	if res := reg.RunCommand(ctx, agentproto.Command{Type: "nope"}); res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "nope") {
		t.Errorf("unknown command = %+v", res)
	}
	for _, c := range []struct {
		method, args, result, code string
	}{
		{"sum", "[2,3]", "5", ""},
		{"sum", `"x"`, "", agentproto.ErrInvalid},
		{"boom", "", "", agentproto.ErrFailed},
		{"fail", "", "", agentproto.ErrFailed},
		{"nope", "", "", agentproto.ErrUnknownMethod},
	} {
		res := reg.Answer(ctx, agentproto.Call{ID: "c1", Method: c.method, Args: json.RawMessage(c.args)})
		code := ""
		if res.Error != nil {
			code = res.Error.Code
		}
		if res.CallID != "c1" || string(res.Result) != c.result || code != c.code {
			t.Errorf("call %s(%s) = %s, %+v; want %s, code %q", c.method, c.args, res.Result, res.Error, c.result, c.code)
		}
	}
	if h, err := reg.AcceptStream("echo", nil); h == nil || err != nil {
		t.Errorf("registered stream kind refused: %v", err)
	}
	if _, err := reg.AcceptStream("shell", nil); err == nil || !strings.Contains(err.Error(), "shell") {
		t.Errorf("unknown stream kind = %v, want a refusal naming it", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of a name did not panic")
		}
	}()
	reg.Stream("echo", func(context.Context, *streams.Stream) {})
}
