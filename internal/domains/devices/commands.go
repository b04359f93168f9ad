package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Command statuses: queued until delivered, sent while the agent works on it, then one of
// the final states.
const (
	CommandQueued    = "queued"
	CommandSent      = "sent"
	CommandCompleted = "completed"
	CommandFailed    = "failed"
	CommandTimedOut  = "timed_out"
	CommandCancelled = "cancelled"
)

// Command limits.
const (
	// QueueTTL is how long a command waits for its device to connect before it times out.
	QueueTTL = time.Hour
	// ResultGrace is added to a sent command's timeout before the sweep marks it lost
	// (timed_out). It outlasts the agent's retry horizon: an agent that lost the server while
	// the command ran reconnects within 30 s and delivers the result it kept, retrying every
	// 30 s at worst (5 minutes at worst while its token is refused), so a late result still
	// lands on a command that is not final yet. A result for a final command is ignored.
	ResultGrace        = 10 * time.Minute
	DefaultOutputBytes = 1 << 20
	maxBulkDevices     = 500
	maxDeliverBatch    = 10
)

// CommandInput is a command a technician sends.
type CommandInput struct {
	Type           string          `json:"type" doc:"One of the registered command kinds (the enum lists them)."`
	Payload        json.RawMessage `json:"payload,omitempty"`
	TimeoutSeconds int             `json:"timeoutSeconds,omitempty" minimum:"1" maximum:"3600" doc:"How long the agent may take once it has the command; each kind has its default (300 for scripts and inventory, 600 for reboot and shutdown) and its maximum. A reboot's or shutdown's delaySeconds is added to it: its timeout counts from when it is due."`
}

// DeviceCommand is a durable command record.
type DeviceCommand struct {
	ID             string          `json:"id" format:"uuid"`
	DeviceID       string          `json:"deviceId" format:"uuid"`
	OrgID          string          `json:"orgId" format:"uuid"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status" enum:"queued,sent,completed,failed,timed_out,cancelled"`
	TimeoutSeconds int             `json:"timeoutSeconds"`
	CreatedBy      *string         `json:"createdBy"`
	CreatedAt      time.Time       `json:"createdAt"`
	SentAt         *time.Time      `json:"sentAt"`
	StartedAt      *time.Time      `json:"startedAt" doc:"When the command's process started on the agent (scripts; absent for older agents)."`
	CompletedAt    *time.Time      `json:"completedAt"`
	ExitCode       *int            `json:"exitCode"`
	Stdout         *string         `json:"stdout" doc:"While the command runs, what it printed so far (text only; the result replaces it)."`
	Stderr         *string         `json:"stderr"`
	// StdoutEncoding and StderrEncoding are "base64" when the stream held bytes that are not
	// text (a NUL, invalid UTF-8) and stdout or stderr carries them in standard base64; absent
	// for text.
	StdoutEncoding string          `json:"stdoutEncoding,omitempty" enum:"base64"`
	StderrEncoding string          `json:"stderrEncoding,omitempty" enum:"base64"`
	Truncated      bool            `json:"truncated" doc:"Output beyond maxOutputBytes was dropped."`
	DurationMs     *int64          `json:"durationMs"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *string         `json:"error"`
}

const commandColumns = `c.id, c.device_id, c.org_id, c.type, c.payload, c.status, c.timeout_seconds, c.created_by_email, c.created_at,
	c.sent_at, c.started_at, c.completed_at, c.exit_code, c.stdout, c.stderr, c.truncated, c.duration_ms, c.result, c.error,
	COALESCE(c.stdout_encoding, ''), COALESCE(c.stderr_encoding, '')`

func scanCommand(row store.Scanner) (DeviceCommand, error) {
	var c DeviceCommand
	var payload string
	var by, stdout, stderr, result, errMsg sql.NullString
	var sent, started, done sql.NullTime
	var exit sql.NullInt64
	var dur sql.NullInt64
	err := row.Scan(&c.ID, &c.DeviceID, &c.OrgID, &c.Type, &payload, &c.Status, &c.TimeoutSeconds, &by, &c.CreatedAt,
		&sent, &started, &done, &exit, &stdout, &stderr, &c.Truncated, &dur, &result, &errMsg, &c.StdoutEncoding, &c.StderrEncoding)
	if err != nil {
		return c, err
	}
	c.Payload = json.RawMessage(payload)
	c.CreatedBy, c.Stdout, c.Stderr, c.Error = store.StringPtr(by), store.StringPtr(stdout), store.StringPtr(stderr), store.StringPtr(errMsg)
	c.SentAt, c.StartedAt, c.CompletedAt = store.TimePtr(sent), store.TimePtr(started), store.TimePtr(done)
	if exit.Valid {
		n := int(exit.Int64)
		c.ExitCode = &n
	}
	if dur.Valid {
		c.DurationMs = &dur.Int64
	}
	if result.Valid && result.String != "" {
		c.Result = json.RawMessage(result.String)
	}
	return c, nil
}

// insertCommand queues a command in tx, or, when sent, records it as sent: it goes out at once
// on this node's connection to the agent (dispatch). It returns false when the database refused
// it as a duplicate pending refresh_inventory. The record is made here rather than read back.
func insertCommand(ctx context.Context, tx *sql.Tx, d Device, in CommandInput, payload string, timeout int, sent bool,
	now time.Time) (DeviceCommand, bool, error) {
	c := DeviceCommand{ID: store.NewID(), DeviceID: d.ID, OrgID: d.OrgID, Type: in.Type, Payload: json.RawMessage(payload),
		Status: CommandQueued, TimeoutSeconds: timeout, CreatedAt: now}
	expires := c.CreatedAt.Add(QueueTTL)
	if sent {
		sentAt := c.CreatedAt
		c.Status, c.SentAt, expires = CommandSent, &sentAt, sentExpiry(sentAt, timeout)
	}
	var by any
	if p := access.PrincipalFrom(ctx); p != nil {
		email := p.Email
		by, c.CreatedBy = p.ID, &email
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO device_commands (id, partner_id, org_id, device_id, type, payload, status,
		timeout_seconds, created_by, created_by_email, created_at, sent_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (device_id) WHERE type = 'refresh_inventory' AND status IN ('queued', 'sent') DO NOTHING`,
		c.ID, d.PartnerID, d.OrgID, d.ID, in.Type, payload, c.Status, timeout, by, c.CreatedBy, c.CreatedAt, c.SentAt, expires)
	if err != nil {
		return c, false, err
	}
	n, err := res.RowsAffected()
	return c, n == 1, err
}

// sentExpiry is when a command sent at the given time times out: its own timeout plus the
// grace that lets the agent's own report, even a late one, win.
func sentExpiry(sentAt time.Time, timeoutSeconds int) time.Time {
	return sentAt.Add(time.Duration(timeoutSeconds)*time.Second + ResultGrace)
}

var errAlreadyPending = apperr.ConflictCode("ALREADY_PENDING", "a refresh_inventory command is already pending for this device")

// SendCommand queues a command for a device and wakes its agent. When this node holds the
// agent's connection and nothing is queued before it, the command is recorded as sent and goes
// out on the connection without being read back from the queue.
func (s *Service) SendCommand(ctx context.Context, deviceID string, in CommandInput) (DeviceCommand, error) {
	scope := access.ScopeFrom(ctx)
	live := s.notifier.Connected(deviceID)
	var c DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		d, queued, err := s.getActiveToCommand(ctx, tx, scope, deviceID)
		if err != nil {
			return err
		}
		payload, timeout, err := s.validateCommand(in, d.OSType)
		if err != nil {
			return err
		}
		var ok bool
		if c, ok, err = insertCommand(ctx, tx, d, in, payload, timeout, live && !queued, s.clock.Now()); err != nil {
			return err
		}
		if !ok {
			return errAlreadyPending
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device.command", ResourceType: "device", ResourceID: d.ID,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: map[string]any{"commandId": c.ID, "type": in.Type}})
	})
	if err != nil {
		return DeviceCommand{}, fmt.Errorf("send a %s command to device %s: %w", in.Type, deviceID, err)
	}
	s.dispatch(ctx, &c)
	return c, nil
}

// dispatch gets a committed command on its way: a sent one onto this node's connection, a
// queued one by waking whichever node holds the agent's. A sent command whose connection
// closed in the meantime goes back to the queue, for the agent's next connection.
func (s *Service) dispatch(ctx context.Context, c *DeviceCommand) {
	if c.Status == CommandSent {
		if s.notifier.Deliver(c.DeviceID, agentproto.Command{ID: c.ID, Type: c.Type, Payload: c.Payload, TimeoutSeconds: c.TimeoutSeconds}) {
			return
		}
		if err := s.Requeue(context.WithoutCancel(ctx), c.DeviceID, []string{c.ID}); err != nil {
			s.logger.ErrorContext(ctx, "a command whose connection closed was not queued again; it times out", "commandId", c.ID, "error", err)
			return
		}
		c.Status, c.SentAt = CommandQueued, nil
		return
	}
	s.notifier.Work(ctx, c.DeviceID)
}

// Requeue puts commands recorded as sent that never reached the device's connection back in
// its queue (with the whole queue lifetime again), and wakes whichever node holds the agent's
// connection now.
func (s *Service) Requeue(ctx context.Context, deviceID string, ids []string) error {
	var a store.Args
	expires := s.clock.Now().Add(QueueTTL)
	_, err := s.db.ExecContext(ctx, `UPDATE device_commands SET status = `+a.Add(CommandQueued)+`, sent_at = NULL, expires_at = `+
		a.Add(expires)+` WHERE device_id = `+a.Add(deviceID)+` AND id IN `+a.In(ids)+` AND status = `+a.Add(CommandSent),
		a.Values()...)
	if err != nil {
		return fmt.Errorf("requeue commands of device %s: %w", deviceID, err)
	}
	s.notifier.Work(ctx, deviceID)
	return nil
}

// BulkInput sends one command to many devices.
type BulkInput struct {
	DeviceIDs []string `json:"deviceIds" minItems:"1" maxItems:"500"`
	CommandInput
	// OnlyOS, when set, skips devices whose OS is known and not listed (a script written for
	// other systems), with the code NOT_SUPPORTED_ON_OS.
	OnlyOS []string `json:"-"`
	// Audited says the caller records the whole request in the audit log itself (a script
	// execution names its batch), so no entry is written per device.
	Audited bool `json:"-"`
}

// BulkItem reports a device that got no command.
type BulkItem struct {
	DeviceID string `json:"deviceId"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
}

// BulkResult is the outcome per device: queued commands, devices skipped on purpose (a
// pending inventory refresh, a language the OS lacks) and devices that failed (not found).
type BulkResult struct {
	Commands []DeviceCommand `json:"commands"`
	Skipped  []BulkItem      `json:"skipped"`
	Failed   []BulkItem      `json:"failed"`
}

// SendBulk queues the same command for many devices in one transaction, reporting per device.
func (s *Service) SendBulk(ctx context.Context, in BulkInput) (BulkResult, error) {
	var out BulkResult
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		out, err = s.SendBulkIn(ctx, tx, in)
		return err
	})
	if err != nil {
		return BulkResult{}, fmt.Errorf("send commands to %d devices: %w", len(in.DeviceIDs), err)
	}
	s.Dispatch(ctx, out.Commands)
	return out, nil
}

// SendBulkIn records the commands of SendBulk in the caller's transaction, so that a domain
// starting work on devices (script executions) records its own rows with them. Once the
// transaction has committed, the caller hands the commands to Dispatch.
func (s *Service) SendBulkIn(ctx context.Context, tx *sql.Tx, in BulkInput) (BulkResult, error) {
	scope := access.ScopeFrom(ctx)
	out := BulkResult{Commands: []DeviceCommand{}, Skipped: []BulkItem{}, Failed: []BulkItem{}}
	if len(in.DeviceIDs) > maxBulkDevices {
		return out, apperr.Invalid("deviceIds", "at most 500 devices per request")
	}
	if _, ok := s.kinds[in.Type]; !ok {
		return out, apperr.Invalid("type", "type must be one of "+strings.Join(s.CommandKindNames(), ", "))
	}
	found, err := s.activeToCommand(ctx, tx, scope, in.DeviceIDs)
	if err != nil {
		return out, err
	}
	seen := map[string]bool{}
	for _, id := range in.DeviceIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		dq, ok := found[id]
		if !ok {
			out.Failed = append(out.Failed, BulkItem{DeviceID: id, Code: apperr.CodeNotFound, Reason: "no such device"})
			continue
		}
		d, queued := dq.Device, dq.queued
		if len(in.OnlyOS) > 0 && d.OSType != "" && !slices.Contains(in.OnlyOS, d.OSType) {
			out.Skipped = append(out.Skipped, BulkItem{DeviceID: id, Code: agentproto.ErrNotSupported,
				Reason: "written for " + strings.Join(in.OnlyOS, ", ") + ", not for " + d.OSType})
			continue
		}
		payload, timeout, err := s.validateCommand(in.CommandInput, d.OSType)
		if ae, ok := apperr.As(err); ok {
			out.Skipped = append(out.Skipped, BulkItem{DeviceID: id, Code: ae.Code, Reason: ae.Message})
			continue
		}
		if err != nil {
			return out, err
		}
		c, ok, err := insertCommand(ctx, tx, d, in.CommandInput, payload, timeout, s.notifier.Connected(id) && !queued,
			s.clock.Now())
		if err != nil {
			return out, err
		}
		if !ok {
			out.Skipped = append(out.Skipped, BulkItem{DeviceID: id, Code: errAlreadyPending.Code, Reason: errAlreadyPending.Message})
			continue
		}
		out.Commands = append(out.Commands, c)
		if in.Audited {
			continue
		}
		if err := audit.Record(ctx, tx, audit.Entry{Action: "device.command", ResourceType: "device", ResourceID: d.ID,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID,
			Details: map[string]any{"commandId": c.ID, "type": in.Type, "bulk": true}}); err != nil {
			return out, err
		}
	}
	if q, ok := ctx.Value(resultQueueKey{}).(*resultQueue); ok {
		q.cmds = append(q.cmds, out.Commands...)
	}
	return out, nil
}

// resultQueue collects the commands that a command result's handlers queue in its
// transaction (a reboot after patches), so that they go out as soon as it commits rather
// than at the agent's next contact, and the work they leave for after the commit (see
// AfterResult).
type resultQueue struct {
	cmds  []DeviceCommand
	after []func(context.Context)
}

type resultQueueKey struct{}

// AfterResult runs fn once the transaction recording a command's result has committed, when
// called from that transaction's OnResult or result hook; elsewhere it reports false and
// does nothing. It is for work that must see the result committed, such as deciding whether
// it was the last of many recorded at the same time.
func AfterResult(ctx context.Context, fn func(context.Context)) bool {
	q, ok := ctx.Value(resultQueueKey{}).(*resultQueue)
	if ok {
		q.after = append(q.after, fn)
	}
	return ok
}

// Dispatch gets committed commands on their way (see SendBulkIn).
func (s *Service) Dispatch(ctx context.Context, cmds []DeviceCommand) {
	for i := range cmds {
		s.dispatch(ctx, &cmds[i])
	}
}

// ResultHook is declared by a domain that starts commands of a kind another domain owns and
// keeps records of its own about them (script executions, deployments, remediations): Run runs
// in the transaction that records the agent's result of a command of Kind, after the kind's own
// OnResult and the hooks declared before it.
type ResultHook struct {
	Kind string
	Run  func(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error
}

func (s *Service) addResultHook(h ResultHook) error {
	k, ok := s.kinds[h.Kind]
	if !ok {
		return fmt.Errorf("result hook for unknown command kind %s", h.Kind)
	}
	fn := h.Run
	if prev := k.OnResult; prev != nil {
		k.OnResult = func(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
			if err := prev(ctx, tx, deviceID, r); err != nil {
				return err
			}
			return fn(ctx, tx, deviceID, r)
		}
	} else {
		k.OnResult = fn
	}
	s.kinds[h.Kind] = k
	s.anyOnResult = true
	return nil
}

// CommandColumns are the columns of a device command (alias c), for a domain listing work it
// started on devices with their commands: it joins CommandJoin and reads rows with
// ScanWithCommand.
const CommandColumns = commandColumns

// CommandJoin joins the device command (alias c) whose ID is in column.
func CommandJoin(column string) string { return " JOIN device_commands c ON c.id = " + column }

// CommandLeftJoin is CommandJoin for a column that may hold no command: c's columns are NULL
// then.
func CommandLeftJoin(column string) string { return " LEFT JOIN device_commands c ON c.id = " + column }

// ScanWithCommand scans a row of the caller's own columns (into own) followed by
// CommandColumns.
func ScanWithCommand(row store.Scanner, own ...any) (DeviceCommand, error) {
	return scanCommand(prefixScanner{row, own})
}

type prefixScanner struct {
	row store.Scanner
	own []any
}

func (p prefixScanner) Scan(dest ...any) error { return p.row.Scan(append(p.own, dest...)...) }

func getCommand(ctx context.Context, q store.Querier, deviceID, id string) (DeviceCommand, error) {
	var a store.Args
	return store.ByID(ctx, q, "command", `SELECT `+commandColumns+` FROM device_commands c`, "c.id", id, &a,
		[]string{"c.device_id = " + a.Add(deviceID)}, scanCommand)
}

// GetCommand returns one command of a device in scope.
func (s *Service) GetCommand(ctx context.Context, deviceID, id string) (DeviceCommand, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), deviceID); err != nil {
		return DeviceCommand{}, err
	}
	return getCommand(ctx, s.db, deviceID, id)
}

// ListCommands lists a device's commands, newest first.
func (s *Service) ListCommands(ctx context.Context, deviceID, status string, page store.Page) ([]DeviceCommand, string, *int, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), deviceID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"c.device_id = " + a.Add(deviceID)}
	if status != "" {
		conds = append(conds, "c.status = "+a.Add(status))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: commandColumns, From: " FROM device_commands c", Conds: conds, Args: &a,
		SortKey: "c.id", SortID: "c.id", Desc: true}, page, scanCommand, func(c DeviceCommand) (string, string) { return c.ID, c.ID })
}

// TakeQueued marks up to ten queued commands of a device as sent and returns them in the
// order they were queued. The conditional update makes each command go out once even when
// several nodes try at the same time. It is two statements and no transaction (the read, then
// one update that claims what is still queued), since it runs on the way of every command to
// its agent.
func (s *Service) TakeQueued(ctx context.Context, deviceID string) ([]agentproto.Command, error) {
	queued, err := store.QueryAll(ctx, s.db, `SELECT id, type, payload, timeout_seconds FROM device_commands
		WHERE device_id = $1 AND status = $2 ORDER BY created_at, id LIMIT `+strconv.Itoa(maxDeliverBatch), []any{deviceID, CommandQueued},
		func(row store.Scanner) (agentproto.Command, error) {
			var c agentproto.Command
			var payload string
			err := row.Scan(&c.ID, &c.Type, &payload, &c.TimeoutSeconds)
			c.Payload = json.RawMessage(payload)
			return c, err
		})
	if err != nil {
		return nil, fmt.Errorf("read the queued commands of device %s: %w", deviceID, err)
	}
	if len(queued) == 0 {
		return nil, nil
	}
	// Each command expires its own timeout (plus the grace) after now. (The ELSE, never taken,
	// gives PostgreSQL the CASE's type.)
	now := s.clock.Now()
	var a store.Args
	ids := make([]string, len(queued))
	expires := "CASE id"
	for i, c := range queued {
		ids[i] = c.ID
		expires += " WHEN " + a.Add(c.ID) + " THEN " + a.Add(sentExpiry(now, c.TimeoutSeconds))
	}
	claimed := make(map[string]bool, len(queued))
	err = s.db.WriteRows(ctx, `UPDATE device_commands SET status = `+a.Add(CommandSent)+`, sent_at = `+a.Add(now)+
		`, expires_at = `+expires+` ELSE expires_at END WHERE id IN `+a.In(ids)+` AND status = `+a.Add(CommandQueued)+` RETURNING id`, a.Values(),
		func(row store.Scanner) error {
			var id string
			err := row.Scan(&id)
			claimed[id] = true
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("mark the queued commands of device %s sent: %w", deviceID, err)
	}
	return slices.DeleteFunc(queued, func(c agentproto.Command) bool { return !claimed[c.ID] }), nil
}
