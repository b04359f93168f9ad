package console

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/events"
)

// liveChannel is the bus channel on which the node that consumed an event tells every node's
// open pages what changed.
const liveChannel = "gale_console_live"

// change is what an open page hears: a device or an alert changed. The page fetches what it
// shows again; the change carries no data the user might not be allowed to see beyond the
// organization it belongs to.
type change struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	Event     string `json:"event"`
	OrgID     string `json:"orgId"`
	PartnerID string `json:"partnerId"`
}

// liveEvents are the events open pages follow.
var liveEvents = []string{"device.enrolled", "device.online", "device.offline", "device.decommissioned",
	"alert.triggered", "alert.acknowledged", "alert.resolved", "alert.suppressed", "alert.dismissed"}

// hub fans changes out to the open pages of this node.
type hub struct {
	logger *slog.Logger
	// changed runs on every change, before the pages hear of it.
	changed func()
	mu      sync.Mutex
	subs    map[chan change]access.Scope
}

func newHub(logger *slog.Logger, changed func()) *hub {
	return &hub{logger: logger, changed: changed, subs: map[chan change]access.Scope{}}
}

// consumer turns recorded events into notices on the bus, once for the whole installation.
func (c *Console) consumer() events.Consumer {
	return events.Consumer{Name: "console-live", Types: liveEvents, Handle: func(ctx context.Context, _ *sql.Tx, e events.Event) error {
		kind, _, _ := strings.Cut(e.Type, ".")
		b, err := json.Marshal(change{Kind: kind, ID: e.ResourceID, Event: e.Type, OrgID: e.OrgID, PartnerID: e.PartnerID})
		if err != nil {
			return fmt.Errorf("encode live change: %w", err)
		}
		c.Bus.Publish(ctx, liveChannel, string(b))
		return nil
	}}
}

// deliver hands a notice from the bus to the pages whose user may see its organization.
func (h *hub) deliver(payload string) {
	var ch change
	if err := json.Unmarshal([]byte(payload), &ch); err != nil {
		h.logger.Warn("console: unreadable live change", "error", err)
		return
	}
	h.changed()
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub, scope := range h.subs {
		if !scope.CanSeeOrg(ch.OrgID, ch.PartnerID) {
			continue
		}
		select {
		case sub <- ch:
		default:
			// A page that does not keep up misses a notice; the next one refetches anyway.
		}
	}
}

func (h *hub) subscribe(scope access.Scope) chan change {
	ch := make(chan change, 16)
	h.mu.Lock()
	h.subs[ch] = scope
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(ch chan change) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.mu.Unlock()
}

// keepAlive is how often a quiet stream gets a comment line, and the session is checked
// again: a stream of a session that ended (signed out in another tab) closes.
const keepAlive = 15 * time.Second

// liveStream is the server-sent event stream of the page's changes.
func (c *Console) liveStream(w http.ResponseWriter, r *http.Request) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("the response cannot stream")
	}
	p := access.PrincipalFrom(r.Context())
	sub := c.live.subscribe(p.Scope)
	defer c.live.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n\n")
	flusher.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case ch := <-sub:
			b, _ := json.Marshal(ch)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ch.Kind, b)
			flusher.Flush()
		case <-tick.C:
			if _, err := c.session(r, false); err != nil {
				fmt.Fprint(w, "event: signedout\ndata: {}\n\n")
				flusher.Flush()
				return nil
			}
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		}
	}
}
