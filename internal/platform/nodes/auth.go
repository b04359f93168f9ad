package nodes

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Headers of a request from one node to another.
const (
	HeaderNode      = "X-Gale-Node"
	HeaderTime      = "X-Gale-Node-Time"
	HeaderSignature = "X-Gale-Node-Signature"
)

// MaxClockSkew is how far a request's timestamp may be from the receiver's clock: a signed
// request can be replayed for at most this long, so node clocks must agree within it.
const MaxClockSkew = 30 * time.Second

// ErrUnauthenticated is wrapped by Verify's errors: the request does not come from a node.
var ErrUnauthenticated = errors.New("not a request of a node")

// Key derives the key that authenticates requests between nodes from NODE_SECRET, or from the
// JWT secret when it is unset, so that nodes sharing their configuration share the key. It is
// never the JWT secret itself.
func Key(nodeSecret string, jwtSecret []byte) []byte {
	secret := []byte(nodeSecret)
	if nodeSecret == "" {
		secret = jwtSecret
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("gale node authentication v1"))
	return m.Sum(nil)
}

// Sign sets the headers that prove h comes from this node, covering the given fields (what
// the request asks for), the node ID and the time.
func (r *Registry) Sign(h http.Header, fields ...string) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	h.Set(HeaderNode, r.self.ID)
	h.Set(HeaderTime, ts)
	h.Set(HeaderSignature, hex.EncodeToString(r.mac(r.self.ID, ts, fields)))
}

// Verify checks that h was signed by a live node over the same fields, within MaxClockSkew
// of now, and returns the node's ID. Its errors wrap ErrUnauthenticated and say why.
func (r *Registry) Verify(ctx context.Context, h http.Header, fields ...string) (string, error) {
	node, ts := h.Get(HeaderNode), h.Get(HeaderTime)
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: no timestamp", ErrUnauthenticated)
	}
	if skew := time.Since(time.Unix(sent, 0)); skew > MaxClockSkew || skew < -MaxClockSkew {
		return "", fmt.Errorf("%w: timestamp %s is %s off", ErrUnauthenticated, ts, skew.Round(time.Second))
	}
	got, err := hex.DecodeString(h.Get(HeaderSignature))
	if err != nil || !hmac.Equal(got, r.mac(node, ts, fields)) {
		return "", fmt.Errorf("%w: bad signature", ErrUnauthenticated)
	}
	live, err := r.live(ctx, node)
	if err != nil {
		return "", fmt.Errorf("look up node %s: %w", node, err)
	}
	if !live {
		return "", fmt.Errorf("%w: unknown node %s", ErrUnauthenticated, node)
	}
	return node, nil
}

// mac is the HMAC of the node ID, the timestamp and the fields, each prefixed by its length
// so that no two lists of fields sign alike.
func (r *Registry) mac(node, ts string, fields []string) []byte {
	m := hmac.New(sha256.New, r.key)
	for _, f := range append([]string{node, ts}, fields...) {
		m.Write(binary.AppendUvarint(nil, uint64(len(f))))
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}
