package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Agent call statuses. A call is a system-tool request answered synchronously; its row only
// carries it between the node that took the request and the node holding the agent's socket.
const (
	callQueued   = "queued"
	callSent     = "sent"
	callAnswered = "answered"
	callExpired  = "expired"
)

// QueueCall stores a call for a device until its agent's connection picks it up.
func (s *Service) QueueCall(ctx context.Context, deviceID, method string, args json.RawMessage, timeout time.Duration) (string, error) {
	id, now := store.NewID(), s.clock.Now()
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO agent_calls (id, device_id, method, args, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, deviceID, method, string(args), callQueued, now, now.Add(timeout))
	if err != nil {
		return "", fmt.Errorf("queue %s call for device %s: %w", method, deviceID, err)
	}
	return id, nil
}

// TakeCalls marks a device's queued calls as sent and returns them, oldest first.
func (s *Service) TakeCalls(ctx context.Context, deviceID string) ([]agentproto.Call, error) {
	queued, err := store.QueryAll(ctx, s.db, `SELECT id, method, args FROM agent_calls WHERE device_id = $1 AND status = $2
		AND expires_at > $3 ORDER BY id LIMIT 50`, []any{deviceID, callQueued, s.clock.Now()},
		func(row store.Scanner) (agentproto.Call, error) {
			var c agentproto.Call
			var args string
			err := row.Scan(&c.ID, &c.Method, &args)
			c.Args = json.RawMessage(args)
			return c, err
		})
	if err != nil {
		return nil, fmt.Errorf("read the queued calls of device %s: %w", deviceID, err)
	}
	var out []agentproto.Call
	for _, c := range queued {
		res, err := s.db.ExecContext(ctx, `UPDATE agent_calls SET status = $1 WHERE id = $2 AND status = $3`, callSent, c.ID, callQueued)
		if err != nil {
			return nil, fmt.Errorf("mark call %s sent: %w", c.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			out = append(out, c)
		}
	}
	return out, nil
}

// AnswerCall stores the agent's answer to a call it was sent.
func (s *Service) AnswerCall(ctx context.Context, a Agent, r agentproto.CallResult) (bool, error) {
	cleanCallResult(&r)
	var code, msg any
	if r.Error != nil {
		code, msg = r.Error.Code, r.Error.Message
	}
	res, err := s.db.ExecContext(ctx, `UPDATE agent_calls SET status = $1, result = $2, error_code = $3, error = $4, answered_at = $5
		WHERE id = $6 AND device_id = $7 AND status = $8`, callAnswered, store.NullIfEmpty(string(r.Result)), code, msg,
		s.clock.Now(), r.CallID, a.DeviceID, callSent)
	if err != nil {
		return false, fmt.Errorf("record the answer to call %s: %w", r.CallID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// CallOutcome returns a call's answer once it has one (answered false until then).
func (s *Service) CallOutcome(ctx context.Context, id string) (result json.RawMessage, callErr *agentproto.CallError, answered bool, err error) {
	var status string
	var res, code, msg sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT status, result, error_code, error FROM agent_calls WHERE id = $1`, id).Scan(&status, &res, &code, &msg)
	if errors.Is(err, sql.ErrNoRows) || status != callAnswered {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("read the outcome of call %s: %w", id, err)
	}
	if code.Valid {
		callErr = &agentproto.CallError{Code: code.String, Message: msg.String}
	}
	if res.Valid {
		result = json.RawMessage(res.String)
	}
	return result, callErr, true, nil
}

// ExpireCall gives up on a call nobody answered in time.
func (s *Service) ExpireCall(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE agent_calls SET status = $1 WHERE id = $2 AND status IN ($3, $4)`, callExpired, id, callQueued, callSent)
	if err != nil {
		return fmt.Errorf("expire call %s: %w", id, err)
	}
	return nil
}
