package notifications

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"gale/internal/platform/clock"

	"github.com/golang-jwt/jwt/v5"
)

// APNsConfig configures the Apple Push Notification service sender (token-based auth).
type APNsConfig struct {
	// Key is the .p8 signing key (the file APNS_KEY_FILE names).
	Key []byte
	// KeyID (APNS_KEY_ID) and TeamID (APNS_TEAM_ID) name the key and the developer team.
	KeyID, TeamID string
	// Topic is the app's bundle ID (APNS_TOPIC).
	Topic string
	// Endpoint is the APNs root; empty means https://api.push.apple.com (APNS_ENDPOINT; the
	// sandbox is https://api.sandbox.push.apple.com).
	Endpoint string
	// Client sends the requests over HTTP/2; nil means a client with a 30 s timeout.
	Client *http.Client
	// Clock dates the provider tokens and tells when to renew them; nil: the system clock.
	Clock clock.Clock
}

// apnsTokenTTL is how long a provider token is reused: Apple accepts one between 20 and 60
// minutes old.
const apnsTokenTTL = 50 * time.Minute

// APNs sends pushes to iPhones through APNs over HTTP/2, authenticating with an ES256
// provider token.
type APNs struct {
	cfg APNsConfig
	key *ecdsa.PrivateKey

	mu     sync.Mutex // guards the provider token
	token  string
	issued time.Time
}

// NewAPNs parses the key and returns the sender.
func NewAPNs(cfg APNsConfig) (*APNs, error) {
	key, err := jwt.ParseECPrivateKeyFromPEM(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("APNS_KEY_FILE: not an EC private key (.p8): %w", err)
	}
	if cfg.KeyID == "" || cfg.TeamID == "" || cfg.Topic == "" {
		return nil, errors.New("APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC are required with APNS_KEY_FILE")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "https://api.push.apple.com"
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
			TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second}}
	}
	cfg.Clock = clock.Or(cfg.Clock)
	return &APNs{cfg: cfg, key: key}, nil
}

func (a *APNs) providerToken() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Clock.Now()
	if a.token != "" && now.Sub(a.issued) < apnsTokenTTL {
		return a.token, nil
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": a.cfg.TeamID, "iat": now.Unix()})
	t.Header["kid"] = a.cfg.KeyID
	s, err := t.SignedString(a.key)
	if err != nil {
		return "", fmt.Errorf("sign APNs provider token: %w", err)
	}
	a.token, a.issued = s, now
	return s, nil
}

// Push sends one alert push. APNs 410 (Unregistered) and 400 BadDeviceToken are
// ErrInvalidToken.
func (a *APNs) Push(ctx context.Context, m Message) error {
	tok, err := a.providerToken()
	if err != nil {
		return err
	}
	payload := map[string]any{"aps": map[string]any{"alert": map[string]string{"title": m.Title, "body": m.Body}, "sound": "default"}}
	for k, v := range m.Data {
		if k != "aps" {
			payload[k] = v
		}
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.Endpoint+"/3/device/"+url.PathEscape(m.Token), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "bearer "+tok)
	req.Header.Set("apns-topic", a.cfg.Topic)
	req.Header.Set("apns-push-type", "alert")
	req.Header.Set("apns-priority", "10")
	req.Header.Set("Content-Type", "application/json")
	res, err := a.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("APNs send: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	if res.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(raw, &e)
	switch {
	case res.StatusCode == http.StatusGone, e.Reason == "BadDeviceToken", e.Reason == "Unregistered":
		return fmt.Errorf("APNs: %w (%d %s)", ErrInvalidToken, res.StatusCode, e.Reason)
	case e.Reason == "ExpiredProviderToken" || e.Reason == "InvalidProviderToken":
		a.mu.Lock()
		a.token = ""
		a.mu.Unlock()
	}
	return fmt.Errorf("APNs send: status %d %s", res.StatusCode, e.Reason)
}
