package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiContentSecurityPolicy forbids an API answer from loading anything or being framed; the
// docs page sets its own, which lets its inline script and styles run.
const apiContentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'"

// securityHeaders sets the headers every answer carries, errors and 404s included, before
// anything else writes: browsers must not sniff types, frame the pages or leak the URL as a
// referrer, and no cache may keep an API answer (tokens, secrets, tenant data). A handler
// that may be cached (agent downloads) sets its own Cache-Control over this one.
func (s *Server) securityHeaders(next http.Handler) http.Handler {
	var hsts string
	if s.opts.HSTSMaxAge > 0 {
		hsts = "max-age=" + strconv.Itoa(int(s.opts.HSTSMaxAge/time.Second))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", apiContentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		if hsts != "" {
			h.Set("Strict-Transport-Security", hsts)
		}
		if r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}
