package notifications

import (
	"bytes"
	"context"
	"crypto/rsa"
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

// FCMConfig configures the Firebase Cloud Messaging HTTP v1 sender.
type FCMConfig struct {
	// ProjectID is the Firebase project (FCM_PROJECT_ID).
	ProjectID string
	// Credentials is the service-account JSON (the file FCM_CREDENTIALS_FILE names).
	Credentials []byte
	// Endpoint is the FCM API root; empty means https://fcm.googleapis.com (FCM_ENDPOINT).
	Endpoint string
	// Client sends the requests; nil means a client with a 30 s timeout.
	Client *http.Client
	// Clock dates the token requests and tells when the access token expires; nil: the system
	// clock.
	Clock clock.Clock
}

// fcmScope is the OAuth2 scope of FCM sends.
const fcmScope = "https://www.googleapis.com/auth/firebase.messaging"

// FCM sends pushes to Android phones through FCM HTTP v1, authenticating with an OAuth2
// access token obtained by the JWT-bearer grant of the service account.
type FCM struct {
	cfg      FCMConfig
	email    string
	keyID    string
	tokenURI string
	key      *rsa.PrivateKey

	mu      sync.Mutex // guards the cached access token
	access  string
	expires time.Time
}

// NewFCM parses the service account and returns the sender.
func NewFCM(cfg FCMConfig) (*FCM, error) {
	var sa struct {
		ClientEmail  string `json:"client_email"`
		PrivateKey   string `json:"private_key"`
		PrivateKeyID string `json:"private_key_id"`
		TokenURI     string `json:"token_uri"`
	}
	if err := json.Unmarshal(cfg.Credentials, &sa); err != nil {
		return nil, fmt.Errorf("FCM credentials: not a service-account JSON: %w", err)
	}
	if sa.ClientEmail == "" || sa.PrivateKey == "" {
		return nil, errors.New("FCM credentials: client_email and private_key are required")
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(sa.PrivateKey))
	if err != nil {
		return nil, fmt.Errorf("FCM credentials: private_key: %w", err)
	}
	if cfg.ProjectID == "" {
		return nil, errors.New("FCM_PROJECT_ID is required")
	}
	if sa.TokenURI == "" {
		sa.TokenURI = "https://oauth2.googleapis.com/token"
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "https://fcm.googleapis.com"
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	cfg.Clock = clock.Or(cfg.Clock)
	return &FCM{cfg: cfg, email: sa.ClientEmail, keyID: sa.PrivateKeyID, tokenURI: sa.TokenURI, key: key}, nil
}

// token returns a cached access token, fetching a new one a minute before it expires.
func (f *FCM) token(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Clock.Now()
	if f.access != "" && now.Add(time.Minute).Before(f.expires) {
		return f.access, nil
	}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": f.email, "scope": fcmScope, "aud": f.tokenURI,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	if f.keyID != "" {
		t.Header["kid"] = f.keyID
	}
	assertion, err := t.SignedString(f.key)
	if err != nil {
		return "", fmt.Errorf("sign FCM token request: %w", err)
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.tokenURI, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := f.cfg.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("FCM token request: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("FCM token request: status %d: %s", res.StatusCode, truncate(string(raw), 300))
	}
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.AccessToken == "" {
		return "", fmt.Errorf("FCM token request: no access_token in the answer")
	}
	if out.ExpiresIn <= 0 {
		out.ExpiresIn = 3600
	}
	f.access, f.expires = out.AccessToken, now.Add(time.Duration(out.ExpiresIn)*time.Second)
	return f.access, nil
}

// Push sends one message. FCM's UNREGISTERED error (the app was uninstalled or the token
// expired) is ErrInvalidToken.
func (f *FCM) Push(ctx context.Context, m Message) error {
	access, err := f.token(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"message": map[string]any{
		"token":        m.Token,
		"notification": map[string]string{"title": m.Title, "body": m.Body},
		"data":         m.Data,
		"android":      map[string]any{"priority": "high"},
	}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		f.cfg.Endpoint+"/v1/projects/"+url.PathEscape(f.cfg.ProjectID)+"/messages:send", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", "application/json")
	res, err := f.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("FCM send: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode == http.StatusOK {
		return nil
	}
	var e struct {
		Error struct {
			Status  string `json:"status"`
			Message string `json:"message"`
			Details []struct {
				ErrorCode string `json:"errorCode"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	for _, d := range e.Error.Details {
		if d.ErrorCode == "UNREGISTERED" {
			return fmt.Errorf("FCM: %w (UNREGISTERED)", ErrInvalidToken)
		}
	}
	if res.StatusCode == http.StatusUnauthorized {
		f.mu.Lock()
		f.access = ""
		f.mu.Unlock()
	}
	return fmt.Errorf("FCM send: status %d %s: %s", res.StatusCode, e.Error.Status, truncate(e.Error.Message, 300))
}
