package tunnels

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CookieName is the proxy's cookie. Its value is "<tunnelId>.<userId>.<expiry, Unix
// seconds>.<HMAC-SHA256 of the first three, base64url>", under CookieKey.
const CookieName = "gale_tunnel"

// TicketParam is the query parameter that carries an http-ticket to the proxy.
const TicketParam = "galeTicket"

// CookieKey derives the key that signs the proxy's cookies from the JWT secret, so that every
// node sharing the configuration shares it, without a setting of its own. It is never the JWT
// secret itself.
func CookieKey(jwtSecret []byte) []byte {
	m := hmac.New(sha256.New, jwtSecret)
	m.Write([]byte("gale tunnel cookie v1"))
	return m.Sum(nil)
}

func (s *Service) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.opts.CookieKey)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// cookieValue is the signed value of a cookie for the tunnel and user, valid until expires.
func (s *Service) cookieValue(tunnelID, userID string, expires time.Time) string {
	payload := tunnelID + "." + userID + "." + strconv.FormatInt(expires.Unix(), 10)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

// cookieUser returns the user of the request's valid, unexpired cookie for the tunnel. A
// cookie of another tunnel, forged, or expired is no cookie.
func (s *Service) cookieUser(r *http.Request, tunnelID string) (string, bool) {
	now := s.clock.Now()
	for _, c := range r.CookiesNamed(CookieName) {
		parts := strings.Split(c.Value, ".")
		if len(parts) != 4 {
			continue
		}
		sum, err := base64.RawURLEncoding.DecodeString(parts[3])
		if err != nil || !hmac.Equal(sum, s.mac(strings.Join(parts[:3], "."))) {
			continue
		}
		exp, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || parts[0] != tunnelID || !now.Before(time.Unix(exp, 0)) {
			continue
		}
		return parts[1], true
	}
	return "", false
}

// dropCookie removes the proxy's cookie from a forwarded request's Cookie headers and keeps
// the target's own cookies as they were sent.
func dropCookie(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != CookieName && strings.TrimSpace(part) != "" {
				kept = append(kept, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}
