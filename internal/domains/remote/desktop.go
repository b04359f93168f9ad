package remote

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/systemtools"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// ICEServers are the STUN and TURN servers of the configuration, TURN with credentials of
// the TURN REST scheme for user: username "<expiry>:<user>", credential
// base64(HMAC-SHA1(secret, username)), valid until the expiry (a Unix time). Without
// configuration the list is empty and peers connect directly.
func (s *Service) ICEServers(user string) []agentproto.ICEServer {
	out := []agentproto.ICEServer{}
	if len(s.opts.STUNURLs) > 0 {
		out = append(out, agentproto.ICEServer{URLs: s.opts.STUNURLs})
	}
	if len(s.opts.TURNURLs) > 0 {
		username := strconv.FormatInt(s.clock.Now().Add(s.opts.TURNCredentialTTL).Unix(), 10) + ":" + user
		mac := hmac.New(sha1.New, []byte(s.opts.TURNSecret))
		mac.Write([]byte(username))
		out = append(out, agentproto.ICEServer{URLs: s.opts.TURNURLs, Username: username,
			Credential: base64.StdEncoding.EncodeToString(mac.Sum(nil))})
	}
	return out
}

// CallerICEServers are ICEServers for the calling user.
func (s *Service) CallerICEServers(ctx context.Context) ([]agentproto.ICEServer, error) {
	user, err := userOf(ctx)
	if err != nil {
		return nil, err
	}
	return s.ICEServers(user), nil
}

// signal relays one signalling call of a desktop session to its agent; the session must be a
// desktop that has not ended, and its agent connected (503 AGENT_OFFLINE).
func (s *Service) signal(ctx context.Context, x RemoteSession, method string, args, out any) error {
	live, err := s.agents.LiveChannel(ctx, x.DeviceID)
	if err != nil {
		return fmt.Errorf("check the live channel of device %s: %w", x.DeviceID, err)
	}
	if !live {
		return &apperr.Error{Kind: apperr.KindUnavailable, Code: systemtools.CodeAgentOffline,
			Message: "the device's agent is not connected now; retry once it reconnects"}
	}
	raw, err := s.agents.Call(ctx, x.DeviceID, method, args, signallingTimeout)
	if err != nil {
		return fmt.Errorf("relay %s to device %s: %w", method, x.DeviceID, err)
	}
	if out != nil && json.Unmarshal(raw, out) != nil {
		return &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent's answer was unreadable"}
	}
	return nil
}

// Offer relays the viewer's SDP offer to the agent and returns the agent's answer; with
// iceRestart and no SDP it asks the agent for an ICE-restart offer of the session's
// connection instead, which the viewer answers with Answer. A pending session becomes
// connecting while the agent answers, and active once it did.
func (s *Service) Offer(ctx context.Context, id, sdp string, iceRestart bool) (agentproto.DesktopDescription, error) {
	var desc agentproto.DesktopDescription
	x, err := s.activeSession(ctx, id, TypeDesktop)
	if err != nil {
		return desc, err
	}
	if sdp == "" && !iceRestart {
		return desc, apperr.Invalid("sdp", "send the SDP offer, or iceRestart to have the agent offer")
	}
	if x.Status == StatusPending {
		if x, err = s.change(ctx, access.ScopeFrom(ctx), id, []string{StatusPending}, StatusConnecting, nil); err != nil {
			return desc, err
		}
	}
	args := agentproto.DesktopOfferArgs{SessionID: x.ID, SDP: sdp, ICERestart: iceRestart, ICEServers: s.ICEServers("device-" + x.DeviceID)}
	if err := s.signal(ctx, x, agentproto.MethodDesktopOffer, args, &desc); err != nil {
		return desc, err
	}
	_, err = s.change(ctx, access.ScopeFrom(ctx), id, []string{StatusConnecting, StatusActive}, StatusActive, func(ch *store.Changes, now time.Time) {
		if x.StartedAt == nil {
			ch.Set("started_at", now)
		}
		ch.Set("screen_capture", store.NullIfEmpty(desc.ScreenCapture))
		ch.Set("capture_note", store.NullIfEmpty(desc.CaptureNote))
	})
	if apperr.IsCode(err, CodeSessionEnded) {
		// Ended while the agent answered: its connection has no session any more.
		s.closeDesktop(context.WithoutCancel(ctx), x)
	}
	return desc, err
}

// Answer relays the viewer's SDP answer to an offer the agent made (an ICE restart).
func (s *Service) Answer(ctx context.Context, id, sdp string) error {
	x, err := s.activeSession(ctx, id, TypeDesktop)
	if err != nil {
		return err
	}
	return s.signal(ctx, x, agentproto.MethodDesktopAnswer, agentproto.DesktopAnswerArgs{SessionID: x.ID, SDP: sdp}, nil)
}

// ICE relays one of the viewer's ICE candidates to the agent.
func (s *Service) ICE(ctx context.Context, id string, c agentproto.DesktopICEArgs) error {
	x, err := s.activeSession(ctx, id, TypeDesktop)
	if err != nil {
		return err
	}
	c.SessionID = x.ID
	return s.signal(ctx, x, agentproto.MethodDesktopICE, c, nil)
}

// closeDesktop tells the agent to close the session's peer; an agent that cannot be told
// closes it itself when the viewer goes away, so failures are only logged.
func (s *Service) closeDesktop(ctx context.Context, x RemoteSession) {
	go func() {
		ctx, cancel := context.WithTimeout(ctx, signallingTimeout)
		defer cancel()
		if err := s.signal(ctx, x, agentproto.MethodDesktopClose, agentproto.DesktopSessionArgs{SessionID: x.ID}, nil); err != nil {
			s.logger.InfoContext(ctx, "could not close a remote desktop on its agent", "sessionId", x.ID, "error", err)
		}
	}()
}

// ConnectCode issues a desktop session's connect code: single use, valid two minutes, bound to
// the caller.
func (s *Service) ConnectCode(ctx context.Context, id string) (string, time.Time, error) {
	user, err := userOf(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	x, err := s.activeSession(ctx, id, TypeDesktop)
	if err != nil {
		return "", time.Time{}, err
	}
	code, expires, err := s.tickets.Issue(ctx, desktopCodeKind, x.ID, user, desktopCodeTTL)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issue a connect code for remote session %s: %w", x.ID, err)
	}
	return code, expires, nil
}

// OfferWithCode is Offer for a desktop viewer that holds a connect code instead of a bearer
// token: the code, redeemed once, stands for the user it was issued to, who must still be
// active, hold remote:access and reach the session.
func (s *Service) OfferWithCode(ctx context.Context, id, code, sdp string) (agentproto.DesktopDescription, error) {
	if sdp == "" {
		return agentproto.DesktopDescription{}, apperr.Invalid("sdp", "send the viewer's SDP offer with the code")
	}
	p, err := s.redeem(ctx, desktopCodeKind, id, code)
	if err != nil {
		return agentproto.DesktopDescription{}, err
	}
	return s.Offer(access.WithPrincipal(ctx, p), id, sdp, false)
}

// maxDesktopReport bounds the sessions one desktop report names (an agent keeps at most 4
// peers; more is a broken or hostile agent).
const maxDesktopReport = 16

// DesktopState takes an agent's report on its desktop peers (agentproto.TypeDesktopState):
// sessions still connected are marked seen, so they are not taken for lost; sessions whose
// peer closed end as disconnected, with the agent's reason. Only the agent's own device's
// desktop sessions are touched.
func (s *Service) DesktopState(ctx context.Context, a devices.Agent, payload json.RawMessage) error {
	var st agentproto.DesktopState
	if err := json.Unmarshal(payload, &st); err != nil {
		return fmt.Errorf("desktop state of device %s: %w", a.DeviceID, err)
	}
	if ids := validIDs(st.Connected); len(ids) > 0 {
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			var args store.Args
			_, err := tx.ExecContext(ctx, `UPDATE remote_sessions SET updated_at = `+args.Add(s.clock.Now())+` WHERE device_id = `+
				args.Add(a.DeviceID)+` AND type = `+args.Add(TypeDesktop)+` AND status = `+args.Add(StatusActive)+` AND id IN `+
				args.In(ids), args.Values()...)
			return err
		})
		if err != nil {
			return fmt.Errorf("mark desktop sessions of device %s seen: %w", a.DeviceID, err)
		}
	}
	for i, c := range st.Closed {
		if i == maxDesktopReport {
			break
		}
		x, err := s.get(ctx, s.db, access.SystemScope(), c.SessionID)
		if apperr.IsCode(err, apperr.CodeNotFound) || (err == nil && (x.DeviceID != a.DeviceID || x.Type != TypeDesktop || x.EndedAt != nil)) {
			continue
		}
		if err != nil {
			return err
		}
		reason := "the device closed the desktop: " + devices.CleanLine(c.Reason, 200)
		if _, err := s.end(ctx, access.SystemScope(), x.ID, StatusDisconnected, reason); err != nil && !apperr.IsCode(err, CodeSessionEnded) {
			return err
		}
	}
	return nil
}

// validIDs keeps the well-formed session IDs among the first maxDesktopReport.
func validIDs(ids []string) []string {
	var out []string
	for i, id := range ids {
		if i == maxDesktopReport {
			break
		}
		if store.ValidID(id) {
			out = append(out, id)
		}
	}
	return out
}
