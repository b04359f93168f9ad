package remote

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// TerminalPath is the browser's terminal WebSocket, below httpapi.Prefix.
const TerminalPath = "/remote/sessions/{id}/terminal"

// maxViewerMessage bounds a message from the browser (a paste); the agent gets it in frames.
const maxViewerMessage = 1 << 20

// statusPoll is how often an open terminal looks whether its session was ended elsewhere (on
// any node).
const statusPoll = 2 * time.Second

// TerminalTicket is the answer of ws-ticket.
type TerminalTicket struct {
	Ticket    string    `json:"ticket" doc:"Single use; valid 60 seconds; bound to the caller."`
	ExpiresAt time.Time `json:"expiresAt"`
	URL       string    `json:"url" doc:"The WebSocket URL to open, ticket included; add &cols=N&rows=N for the first window size."`
}

// IssueTerminalTicket issues the single-use ticket with which the caller's browser opens the
// terminal of a pending terminal session.
func (s *Service) IssueTerminalTicket(ctx context.Context, id string) (TerminalTicket, error) {
	user, err := userOf(ctx)
	if err != nil {
		return TerminalTicket{}, err
	}
	x, err := s.activeSession(ctx, id, TypeTerminal)
	if err != nil {
		return TerminalTicket{}, err
	}
	if x.Status != StatusPending {
		return TerminalTicket{}, stateConflict(x, []string{StatusPending})
	}
	raw, expires, err := s.tickets.Issue(ctx, terminalTicketKind, x.ID, user, terminalTicketTTL)
	if err != nil {
		return TerminalTicket{}, fmt.Errorf("issue a terminal ticket for remote session %s: %w", x.ID, err)
	}
	base := strings.Replace(strings.Replace(s.opts.PublicURL, "https://", "wss://", 1), "http://", "ws://", 1)
	u := base + httpapi.Prefix + strings.Replace(TerminalPath, "{id}", x.ID, 1) + "?ticket=" + url.QueryEscape(raw)
	return TerminalTicket{Ticket: raw, ExpiresAt: expires, URL: u}, nil
}

// resizeMessage is the browser's control message.
type resizeMessage struct {
	Type string `json:"type"`
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

// ServeTerminal serves TerminalPath: it redeems the ticket (the credential: no bearer token),
// checks that its user still holds remote:access and reaches the session, opens the agent's
// terminal stream and bridges it to the WebSocket. Refusals come before the upgrade, as
// HTTP errors in the envelope; after it, the close reason says why the terminal ended.
func (s *Service) ServeTerminal(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	raw := r.URL.Query().Get("ticket")
	if raw == "" {
		httpapi.WriteError(w, apperr.Unauthorized("open the terminal with the ticket of POST /remote/sessions/{id}/ws-ticket"))
		return
	}
	cols, rows, bad := windowSize(r.URL.Query())
	if bad != nil {
		httpapi.WriteError(w, bad)
		return
	}
	st, x, p, err := s.openTerminal(ctx, id, raw, cols, rows)
	if err != nil {
		ae, ok := apperr.As(err)
		if !ok {
			s.logger.ErrorContext(ctx, "open a remote terminal", "sessionId", id, "error", err)
			ae = &apperr.Error{Kind: apperr.KindInternal, Code: apperr.CodeInternal,
				Message: "internal error; the request ID in X-Request-Id identifies it in the server log"}
		}
		httpapi.WriteError(w, ae)
		return
	}
	defer st.Close()
	ctx = access.WithPrincipal(ctx, p)
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.finish(ctx, x, StatusFailed, "the browser's WebSocket upgrade failed")
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(maxViewerMessage)
	active, err := s.markActive(ctx, x)
	if err != nil {
		ws.Close(websocket.StatusPolicyViolation, "the session ended")
		return
	}
	reason := s.bridge(ctx, ws, st, active.ID)
	s.finish(ctx, active, StatusDisconnected, reason)
}

func windowSize(q url.Values) (cols, rows uint16, err *apperr.Error) {
	cols, rows = 80, 24
	for _, v := range []struct {
		name string
		dst  *uint16
	}{{"cols", &cols}, {"rows", &rows}} {
		if s := q.Get(v.name); s != "" {
			n, perr := strconv.ParseUint(s, 10, 16)
			if perr != nil || n == 0 || n > 1000 {
				return 0, 0, apperr.Invalid(v.name, v.name+" must be from 1 to 1000")
			}
			*v.dst = uint16(n)
		}
	}
	return cols, rows, nil
}

// openTerminal redeems the ticket, checks its user, moves the session to connecting and
// opens the agent's terminal stream; it returns the stream, the session and the ticket's
// user. A failure to open ends the session (failed, or denied when the agent refuses
// terminals).
func (s *Service) openTerminal(ctx context.Context, id, raw string, cols, rows uint16) (*streams.Stream, RemoteSession, *access.Principal, error) {
	p, err := s.redeem(ctx, terminalTicketKind, id, raw)
	if err != nil {
		return nil, RemoteSession{}, nil, err
	}
	ctx = access.WithPrincipal(ctx, p)
	x, err := s.activeSession(ctx, id, TypeTerminal)
	if err != nil {
		return nil, x, nil, err
	}
	if x, err = s.change(ctx, p.Scope, id, []string{StatusPending}, StatusConnecting, nil); err != nil {
		return nil, x, nil, err
	}
	openCtx, cancel := context.WithTimeout(ctx, terminalOpenTimeout)
	defer cancel()
	st, err := s.agents.OpenStream(openCtx, x.DeviceID, agentproto.StreamTerminal, agentproto.TerminalArgs{Cols: cols, Rows: rows})
	if err != nil {
		s.finish(ctx, x, StatusFailed, "the agent's terminal could not be opened: "+err.Error())
		return nil, x, nil, err
	}
	if err := awaitShell(st); err != nil {
		st.Close()
		status := StatusFailed
		if apperr.IsCode(err, agentproto.ErrNotSupported) {
			status = StatusDenied
		}
		s.finish(ctx, x, status, err.Error())
		return nil, x, nil, err
	}
	return st, x, p, nil
}

// redeem redeems a ticket of the session and returns the principal of the user it was issued
// to, who must still be active and hold remote:access; reaching the session is checked by the
// caller, with that principal.
func (s *Service) redeem(ctx context.Context, kind, id, raw string) (*access.Principal, error) {
	t, err := s.tickets.Redeem(ctx, kind, id, raw)
	if err != nil {
		return nil, err
	}
	p, err := s.auth.PrincipalForUser(ctx, t.UserID)
	if err != nil {
		return nil, fmt.Errorf("load the principal of user %s: %w", t.UserID, err)
	}
	if p == nil {
		return nil, apperr.Unauthorized("the ticket's user is no longer active")
	}
	if !p.Can(access.RemoteAccess) {
		return nil, apperr.Forbidden("missing permission " + string(access.RemoteAccess))
	}
	return p, nil
}

// awaitShell reads the agent's first frame: the shell started, or why not.
func awaitShell(st *streams.Stream) error {
	_ = st.SetReadDeadline(time.Now().Add(terminalOpenTimeout))
	defer st.SetReadDeadline(time.Time{})
	typ, p, err := agentproto.ReadTermFrame(st, nil)
	switch {
	case err != nil:
		return &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent's terminal broke off: " + err.Error()}
	case typ == agentproto.TermStarted:
		return nil
	case typ == agentproto.TermError:
		var ce agentproto.CallError
		if json.Unmarshal(p, &ce) != nil {
			ce.Message = string(p)
		}
		kind := apperr.KindUpstream
		if ce.Code == agentproto.ErrNotSupported || ce.Code == agentproto.ErrInvalid {
			kind = apperr.KindInvalid
		}
		code := ce.Code
		if code == "" {
			code = agentproto.ErrFailed
		}
		return &apperr.Error{Kind: kind, Code: code, Message: "the device has no terminal: " + ce.Message}
	}
	return &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent's terminal answered out of turn"}
}

func (s *Service) markActive(ctx context.Context, x RemoteSession) (RemoteSession, error) {
	return s.change(ctx, access.ScopeFrom(ctx), x.ID, []string{StatusConnecting}, StatusActive, func(ch *store.Changes, now time.Time) {
		ch.Set("started_at", now)
	})
}

// markSeen records that an active terminal is still served, so it is not taken for lost.
func (s *Service) markSeen(ctx context.Context, id string) {
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE remote_sessions SET updated_at = $1 WHERE id = $2 AND status = $3`,
			s.clock.Now(), id, StatusActive)
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.logger.WarnContext(ctx, "mark a remote terminal seen", "sessionId", id, "error", err)
	}
}

// finish ends the session unless it ended already (by a user, or as stale).
func (s *Service) finish(ctx context.Context, x RemoteSession, status, reason string) {
	_, err := s.end(context.WithoutCancel(ctx), access.ScopeFrom(ctx), x.ID, status, reason)
	if err != nil && !apperr.IsCode(err, CodeSessionEnded) {
		s.logger.ErrorContext(ctx, "end a remote session", "sessionId", x.ID, "error", err)
	}
}

// bridge copies between the browser and the agent's terminal until either side ends or the
// session is ended elsewhere, and says why it ended.
func (s *Service) bridge(ctx context.Context, ws *websocket.Conn, st *streams.Stream, id string) string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	reason := ""
	stop := func(why string, code websocket.StatusCode) {
		once.Do(func() {
			reason = why
			st.Close()
			ws.Close(code, why)
			cancel()
		})
	}
	var wg sync.WaitGroup
	wg.Go(func() { // agent → browser
		buf := make([]byte, agentproto.MaxTermPayload)
		for {
			typ, p, err := agentproto.ReadTermFrame(st, buf)
			if errors.Is(err, io.EOF) {
				stop("the shell exited", websocket.StatusNormalClosure)
				return
			}
			if err != nil {
				stop("the connection to the device broke off", websocket.StatusGoingAway)
				return
			}
			if typ != agentproto.TermData {
				continue
			}
			if ws.Write(ctx, websocket.MessageBinary, p) != nil {
				stop("closed by the viewer", websocket.StatusNormalClosure)
				return
			}
		}
	})
	wg.Go(func() { // browser → agent
		for {
			typ, data, err := ws.Read(ctx)
			if err != nil {
				stop("closed by the viewer", websocket.StatusNormalClosure)
				return
			}
			if typ == websocket.MessageBinary {
				err = agentproto.WriteTermData(st, data)
			} else {
				var m resizeMessage
				if json.Unmarshal(data, &m) != nil || m.Type != "resize" || m.Cols < 1 || m.Cols > 1000 || m.Rows < 1 || m.Rows > 1000 {
					stop(`unknown control message: send {"type":"resize","cols":N,"rows":N} (1 to 1000)`, websocket.StatusUnsupportedData)
					return
				}
				err = agentproto.WriteTermFrame(st, agentproto.TermResize, agentproto.ResizePayload(uint16(m.Cols), uint16(m.Rows)))
			}
			if err != nil {
				stop("the connection to the device broke off", websocket.StatusGoingAway)
				return
			}
		}
	})
	wg.Go(func() { // the session ended elsewhere; and it is seen served
		tick := time.NewTicker(statusPoll)
		defer tick.Stop()
		seen := s.clock.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			x, err := s.get(ctx, s.db, access.ScopeFrom(ctx), id)
			if err == nil && x.EndedAt != nil {
				stop("the session was ended", websocket.StatusNormalClosure)
				return
			}
			if now := s.clock.Now(); now.Sub(seen) >= terminalSeenEvery {
				seen = now
				s.markSeen(ctx, id)
			}
		}
	})
	wg.Wait()
	return reason
}
