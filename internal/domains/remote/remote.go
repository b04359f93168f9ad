// Package remote is remote access to devices: sessions a user opens on a device (a terminal, a
// desktop, a file transfer), capped per organization and per user, with their history. A
// terminal is a browser WebSocket bridged to a PTY on the agent over a stream; a desktop is
// WebRTC between the viewer and the agent, whose signalling the server relays to the agent.
// The caps are decided in the database, in the transaction that creates the session, so
// concurrent creates on any number of nodes never exceed them.
package remote

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/domains/authtickets"
	"gale/internal/domains/devices"
	"gale/internal/domains/systemtools"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Session types.
const (
	TypeTerminal     = "terminal"
	TypeDesktop      = "desktop"
	TypeFileTransfer = "file_transfer"
)

// Session statuses: pending, connecting and active are active (they count against the caps);
// disconnected, failed and denied are ended.
const (
	StatusPending      = "pending"
	StatusConnecting   = "connecting"
	StatusActive       = "active"
	StatusDisconnected = "disconnected"
	StatusFailed       = "failed"
	StatusDenied       = "denied"
)

var activeStatuses = []string{StatusPending, StatusConnecting, StatusActive}

// Caps of active sessions, and how long a session may wait in pending or connecting before it
// is stale. An open terminal marks its session seen every terminalSeenEvery; an active
// terminal unseen for TerminalLostAfter lost the node that served it; so did an active desktop
// its agent stopped reporting (agents report connected desktops every 30 seconds). An active file transfer
// session without a transfer for FileTransferIdleAfter is disconnected, so that it stops
// counting against the caps.
const (
	MaxPerOrg             = 10
	MaxPerUser            = 5
	PendingStaleAfter     = 5 * time.Minute
	ConnectStaleAfter     = 2 * time.Minute
	TerminalLostAfter     = 2 * time.Minute
	FileTransferIdleAfter = 30 * time.Minute
	terminalSeenEvery     = 30 * time.Second
)

// Error codes of the remote sessions.
const (
	CodeDeviceOffline = "DEVICE_OFFLINE"
	CodeSessionLimit  = "SESSION_LIMIT_REACHED"
	CodeSessionEnded  = "SESSION_ENDED"
	CodeSessionState  = "SESSION_STATE_CONFLICT"
	CodeWrongType     = "SESSION_TYPE_MISMATCH"
)

// Tickets: their kinds and lifetimes; and how long the server waits for an agent.
const (
	terminalTicketKind  = "remote-terminal"
	desktopCodeKind     = "remote-desktop-connect"
	terminalTicketTTL   = 60 * time.Second
	desktopCodeTTL      = 2 * time.Minute
	signallingTimeout   = 20 * time.Second
	terminalOpenTimeout = 15 * time.Second
)

// Options are the remote settings of the server configuration.
type Options struct {
	// PublicURL is where browsers reach the server: the terminal URL starts with it.
	PublicURL string
	// STUNURLs and TURNURLs are the ICE servers handed to viewers and agents; TURNSecret is the
	// TURN server's shared secret, TURNCredentialTTL how long credentials made from it last.
	STUNURLs          []string
	TURNURLs          []string
	TURNSecret        string
	TURNCredentialTTL time.Duration
	// FileTransferMaxBytes caps one file moved through a file_transfer session, either way.
	FileTransferMaxBytes int64
}

// Service runs remote sessions.
type Service struct {
	db      *store.DB
	clock   clock.Clock
	logger  *slog.Logger
	devices *devices.Service
	auth    *auth.Service
	agents  systemtools.Caller
	tickets *authtickets.Service
	files   *systemtools.Service
	opts    Options
}

// Deps is what the remote-session service is built from.
type Deps struct {
	DB *store.DB
	// Clock is the time sessions go stale on; nil: the system clock.
	Clock   clock.Clock
	Logger  *slog.Logger
	Devices *devices.Service
	// Agents opens the agents' streams and calls them.
	Agents systemtools.Caller
	// Tickets issues and redeems the tickets of terminals and desktop connections.
	Tickets *authtickets.Service
	// Files carries the transfers of file_transfer sessions.
	Files *systemtools.Service
	// Auth turns a ticket's user into the principal the session runs as.
	Auth *auth.Service
}

// New returns the remote-session service.
func New(d Deps, opts Options) *Service {
	return &Service{db: d.DB, auth: d.Auth, clock: clock.Or(d.Clock), logger: d.Logger, devices: d.Devices, agents: d.Agents, tickets: d.Tickets,
		files: d.Files, opts: opts}
}

// RemoteSession is the API view of a remote session (named so in the API document, beside
// the sign-in sessions).
type RemoteSession struct {
	ID              string     `json:"id" format:"uuid"`
	PartnerID       string     `json:"partnerId" format:"uuid"`
	OrgID           string     `json:"orgId" format:"uuid"`
	DeviceID        string     `json:"deviceId" format:"uuid"`
	UserID          string     `json:"userId" format:"uuid" doc:"The user who opened it (for an API key, the key's creator)."`
	Type            string     `json:"type" enum:"terminal,desktop,file_transfer"`
	Status          string     `json:"status" enum:"pending,connecting,active,disconnected,failed,denied" doc:"pending, connecting and active are active; the others are ended."`
	StatusChangedAt time.Time  `json:"statusChangedAt"`
	CreatedAt       time.Time  `json:"createdAt"`
	StartedAt       *time.Time `json:"startedAt" doc:"When it became active; null if it never did."`
	EndedAt         *time.Time `json:"endedAt"`
	DurationSeconds *int64     `json:"durationSeconds" doc:"Ended sessions: seconds from startedAt to endedAt (0 if it never became active); null while active."`
	EndReason       *string    `json:"endReason"`
	ScreenCapture   *string    `json:"screenCapture" enum:"available,unavailable" doc:"Desktop sessions, once the agent answered an offer: whether a video track carries the screen."`
	CaptureNote     *string    `json:"captureNote" doc:"Why the screen is not available, as the agent says."`
}

const columns = `id, partner_id, org_id, device_id, user_id, type, status, status_at, created_at, started_at, ended_at,
	end_reason, screen_capture, capture_note`

func scanSession(row store.Scanner) (RemoteSession, error) {
	var x RemoteSession
	var started, ended sql.NullTime
	var reason, capture, note sql.NullString
	if err := row.Scan(&x.ID, &x.PartnerID, &x.OrgID, &x.DeviceID, &x.UserID, &x.Type, &x.Status, &x.StatusChangedAt,
		&x.CreatedAt, &started, &ended, &reason, &capture, &note); err != nil {
		return x, err
	}
	x.StatusChangedAt, x.CreatedAt = x.StatusChangedAt.UTC(), x.CreatedAt.UTC()
	x.StartedAt, x.EndedAt = store.TimePtr(started), store.TimePtr(ended)
	x.EndReason, x.ScreenCapture, x.CaptureNote = store.StringPtr(reason), store.StringPtr(capture), store.StringPtr(note)
	if x.EndedAt != nil {
		var d int64
		if x.StartedAt != nil {
			d = int64(x.EndedAt.Sub(*x.StartedAt) / time.Second)
		}
		x.DurationSeconds = &d
	}
	return x, nil
}

func scopeFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "org_id", "partner_id")
}

// Get returns a session in the caller's scope.
func (s *Service) Get(ctx context.Context, id string) (RemoteSession, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (RemoteSession, error) {
	var a store.Args
	return store.ByID(ctx, q, "remote session", `SELECT `+columns+` FROM remote_sessions`, "id", id, &a,
		[]string{scopeFilter(scope, &a)}, scanSession)
}

// List lists the sessions in scope, newest first: the active ones, or the ended ones
// (history).
func (s *Service) List(ctx context.Context, ended bool, deviceID string, page store.Page) ([]RemoteSession, string, *int, error) {
	var a store.Args
	status := "status IN "
	if ended {
		status = "status NOT IN "
	}
	status += a.In(activeStatuses)
	conds := []string{scopeFilter(access.ScopeFrom(ctx), &a), status}
	if deviceID != "" {
		conds = append(conds, "device_id = "+a.Add(deviceID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: columns, From: " FROM remote_sessions", Conds: conds, Args: &a,
		SortKey: "id", SortID: "id", Desc: true}, page, scanSession, func(x RemoteSession) (string, string) { return x.ID, x.ID })
}

// userOf is the user a session or ticket belongs to: the signed-in user, or an API key's
// creator.
func userOf(ctx context.Context) (string, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil || p.UserID == "" {
		return "", apperr.Forbidden("remote sessions belong to a user: sign in, or use an API key a user created")
	}
	return p.UserID, nil
}

// reachableDevice returns the device if it is in scope and its agent holds its live channel;
// a device that cannot be reached now is 400 DEVICE_OFFLINE.
func (s *Service) reachableDevice(ctx context.Context, id string) (devices.Device, error) {
	d, err := s.devices.Get(ctx, id)
	if err != nil {
		return d, err
	}
	if d.DecommissionedAt != nil {
		return d, apperr.NotFound("device")
	}
	if d.Status != devices.StatusOnline {
		return d, apperr.BadRequest(CodeDeviceOffline, "the device is "+d.Status+"; a remote session needs its agent connected")
	}
	reach, err := s.agents.AwaitLiveChannel(ctx, id)
	if err != nil {
		return d, fmt.Errorf("check the live channel of device %s: %w", id, err)
	}
	switch reach {
	case agenthub.Connecting:
		return d, apperr.BadRequest(CodeDeviceOffline,
			"the device's agent is connecting its live channel, which a remote session needs: retry in a few seconds")
	case agenthub.HTTPOnly:
		return d, apperr.BadRequest(CodeDeviceOffline,
			"the device reports over HTTP heartbeats only; a remote session needs its agent's live connection, which is down: retry once it reconnects")
	}
	return d, nil
}

// Create opens a session of typ on the device, pending until a viewer connects. The device
// must be reachable (400 DEVICE_OFFLINE); the organization may hold MaxPerOrg active sessions
// and the user MaxPerUser (429 SESSION_LIMIT_REACHED).
func (s *Service) Create(ctx context.Context, deviceID, typ string) (RemoteSession, error) {
	userID, err := userOf(ctx)
	if err != nil {
		return RemoteSession{}, err
	}
	if typ != TypeTerminal && typ != TypeDesktop && typ != TypeFileTransfer {
		return RemoteSession{}, apperr.Invalid("type", "use terminal, desktop or file_transfer")
	}
	d, err := s.reachableDevice(ctx, deviceID)
	if err != nil {
		return RemoteSession{}, err
	}
	var out RemoteSession
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		place, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), d.OrgID, tenancy.PlaceOptions{Noun: "remote session"})
		if err != nil {
			return err
		}
		if err := s.lockCaps(ctx, tx, place.OrgID, userID); err != nil {
			return err
		}
		now := s.clock.Now()
		mine := func(a *store.Args) string {
			return "(org_id = " + a.Add(place.OrgID) + " OR user_id = " + a.Add(userID) + ")"
		}
		if _, err := s.expireStale(ctx, tx, now, mine); err != nil {
			return err
		}
		var inOrg, ofUser int
		if err := tx.QueryRowContext(ctx, `SELECT
				COALESCE(SUM(CASE WHEN org_id = $1 THEN 1 ELSE 0 END), 0),
				COALESCE(SUM(CASE WHEN user_id = $2 THEN 1 ELSE 0 END), 0)
			FROM remote_sessions WHERE (org_id = $1 OR user_id = $2) AND status IN ($3, $4, $5)`,
			place.OrgID, userID, StatusPending, StatusConnecting, StatusActive).Scan(&inOrg, &ofUser); err != nil {
			return fmt.Errorf("count active remote sessions: %w", err)
		}
		switch {
		case inOrg >= MaxPerOrg:
			return limitReached(fmt.Sprintf("the organization has %d active remote sessions, the most it may have; end one first", MaxPerOrg))
		case ofUser >= MaxPerUser:
			return limitReached(fmt.Sprintf("you have %d active remote sessions, the most a user may have; end one first", MaxPerUser))
		}
		x, err := scanSession(tx.QueryRowContext(ctx, `INSERT INTO remote_sessions (id, partner_id, org_id, device_id, user_id, type,
			status, status_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $8) RETURNING `+columns,
			store.NewID(), place.PartnerID, place.OrgID, d.ID, userID, typ, StatusPending, now))
		if err != nil {
			return fmt.Errorf("insert remote session: %w", err)
		}
		out = x
		return audit.Record(ctx, tx, audit.Entry{Action: "remote_session.start", ResourceType: "remote_session", ResourceID: x.ID,
			ResourceName: d.Hostname, PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"type": typ, "deviceId": d.ID}})
	})
	if err != nil {
		return out, fmt.Errorf("create remote session: %w", err)
	}
	return out, nil
}

func limitReached(msg string) error {
	return &apperr.Error{Kind: apperr.KindRateLimited, Code: CodeSessionLimit, Message: msg, RetryAfter: time.Minute}
}

// lockCaps serialises the creates that count against the same caps. SQLite runs one writer at
// a time already; PostgreSQL takes transaction-scoped advisory locks on the organization and
// then the user, always in that order, so two creates never wait on each other in a cycle.
func (s *Service) lockCaps(ctx context.Context, tx *sql.Tx, orgID, userID string) error {
	for _, key := range []string{"remote_sessions:org:" + orgID, "remote_sessions:user:" + userID} {
		if err := s.db.AdvisoryLock(ctx, tx, key); err != nil {
			return fmt.Errorf("lock the remote-session caps: %w", err)
		}
	}
	return nil
}

// expireStale fails the sessions that waited too long, pending or connecting, and the active
// terminals whose node stopped serving them, and disconnects the idle file transfer sessions,
// among those matching the condition where renders, and audits their end.
func (s *Service) expireStale(ctx context.Context, tx *sql.Tx, now time.Time, where func(a *store.Args) string) (int64, error) {
	var a store.Args
	active, terminal, transfer := a.Add(StatusActive), a.Add(TypeTerminal), a.Add(TypeFileTransfer)
	lost := "status = " + active + " AND type IN (" + terminal + ", " + a.Add(TypeDesktop) + ") AND updated_at < " + a.Add(now.Add(-TerminalLostAfter))
	idle := "status = " + active + " AND type = " + transfer + " AND updated_at < " + a.Add(now.Add(-FileTransferIdleAfter))
	stale := "((status = " + a.Add(StatusPending) + " AND status_at < " + a.Add(now.Add(-PendingStaleAfter)) + ") OR (status = " +
		a.Add(StatusConnecting) + " AND status_at < " + a.Add(now.Add(-ConnectStaleAfter)) + ") OR (" + lost + ") OR (" + idle + "))"
	at := a.Add(now)
	set := "status = CASE WHEN status = " + active + " AND type = " + transfer + " THEN " + a.Add(StatusDisconnected) + " ELSE " +
		a.Add(StatusFailed) + " END, status_at = " + at + ", ended_at = " + at + ", updated_at = " + at +
		", end_reason = CASE WHEN status = " + active + " AND type = " + transfer + " THEN " +
		a.Add("idle: no transfer for 30 minutes") + " WHEN status = " + active + " AND type = " + terminal + " THEN " +
		a.Add("lost: the server that held the terminal stopped") + " WHEN status = " + active + " THEN " +
		a.Add("lost: the device stopped reporting the desktop connection") + " ELSE " + a.Add("stale: no viewer connected in time") + " END"
	ended, err := store.QueryAll(ctx, tx, `UPDATE remote_sessions SET `+set+` WHERE `+stale+` AND `+where(&a)+
		` RETURNING `+columns, a.Values(), scanSession)
	if err != nil {
		return 0, fmt.Errorf("expire stale remote sessions: %w", err)
	}
	for _, x := range ended {
		if err := recordEnd(ctx, tx, x, systemActor); err != nil {
			return 0, fmt.Errorf("record the end of remote session %s: %w", x.ID, err)
		}
	}
	return int64(len(ended)), nil
}

var systemActor = &audit.Actor{Type: access.ActorSystem}

func recordEnd(ctx context.Context, tx *sql.Tx, x RemoteSession, actor *audit.Actor) error {
	return audit.Record(ctx, tx, audit.Entry{Action: "remote_session.end", ResourceType: "remote_session", ResourceID: x.ID,
		PartnerID: x.PartnerID, OrgID: x.OrgID, Actor: actor, Details: map[string]any{"type": x.Type, "deviceId": x.DeviceID,
			"status": x.Status, "reason": store.Deref(x.EndReason), "durationSeconds": x.DurationSeconds}})
}

// ExpireStale fails the stale sessions in the caller's scope and returns how many.
func (s *Service) ExpireStale(ctx context.Context) (int64, error) {
	scope := access.ScopeFrom(ctx)
	var n int64
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = s.expireStale(ctx, tx, s.clock.Now(), func(a *store.Args) string { return scopeFilter(scope, a) })
		return err
	})
	if err != nil {
		return n, fmt.Errorf("end stale remote sessions in scope: %w", err)
	}
	return n, nil
}

// expireAll is the periodic job: stale sessions of every tenant.
func (s *Service) expireAll(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		n, err := s.expireStale(ctx, tx, s.clock.Now(), func(*store.Args) string { return "TRUE" })
		if n > 0 {
			s.logger.InfoContext(ctx, "expired stale remote sessions", "count", n)
		}
		return err
	})
}

// change moves a session in scope from one of the statuses from to status, with the columns
// set adds, in one conditional UPDATE: of concurrent callers one wins, the others get 409.
func (s *Service) change(ctx context.Context, scope access.Scope, id string, from []string, status string,
	set func(ch *store.Changes, now time.Time)) (RemoteSession, error) {
	var out RemoteSession
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		cur, err := s.get(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		ch := store.NewChanges(now)
		ch.Set("status", status)
		ch.Set("status_at", now)
		if set != nil {
			set(ch, now)
		}
		x, err := scanSession(tx.QueryRowContext(ctx, `UPDATE remote_sessions SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id)+
			` AND status IN `+ch.Args.In(from)+` RETURNING `+columns, ch.Args.Values()...))
		if errors.Is(err, sql.ErrNoRows) {
			return stateConflict(cur, from)
		}
		if err != nil {
			return fmt.Errorf("update remote session %s: %w", id, err)
		}
		out = x
		if x.EndedAt != nil {
			return recordEnd(ctx, tx, x, nil)
		}
		return nil
	})
	return out, err
}

func stateConflict(cur RemoteSession, from []string) error {
	if cur.EndedAt != nil {
		return apperr.ConflictCode(CodeSessionEnded, "the session ended ("+cur.Status+")")
	}
	return apperr.ConflictCode(CodeSessionState, fmt.Sprintf("the session is %s; this needs it %v", cur.Status, from))
}

// End ends an active session as the caller (disconnected), and closes the desktop peer on
// the agent.
func (s *Service) End(ctx context.Context, id string) (RemoteSession, error) {
	x, err := s.end(ctx, access.ScopeFrom(ctx), id, StatusDisconnected, "ended by a user")
	if err == nil && x.Type == TypeDesktop {
		s.closeDesktop(context.WithoutCancel(ctx), x)
	}
	return x, err
}

func (s *Service) end(ctx context.Context, scope access.Scope, id, status, reason string) (RemoteSession, error) {
	return s.change(ctx, scope, id, activeStatuses, status, func(ch *store.Changes, now time.Time) {
		ch.Set("ended_at", now)
		ch.Set("end_reason", reason)
	})
}

// checkType refuses an operation meant for another type of session.
func checkType(x RemoteSession, typ string) error {
	if x.Type != typ {
		return apperr.BadRequest(CodeWrongType, "this is a "+x.Type+" session; the operation is for "+typ+" sessions")
	}
	return nil
}

// activeSession returns a session in scope of typ that has not ended.
func (s *Service) activeSession(ctx context.Context, id, typ string) (RemoteSession, error) {
	x, err := s.Get(ctx, id)
	if err != nil {
		return x, err
	}
	if err := checkType(x, typ); err != nil {
		return x, err
	}
	if x.EndedAt != nil {
		return x, stateConflict(x, activeStatuses)
	}
	return x, nil
}
