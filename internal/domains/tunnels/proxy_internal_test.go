package tunnels

import (
	"net/http"
	"testing"
)

func TestMapLocation(t *testing.T) {
	tn := Tunnel{ID: "t1", TargetHost: "printer.lan", TargetPort: 8080, Scheme: "http"}
	root := "/api/v1/tunnel-http/t1"
	for _, tc := range []struct{ in, want string }{
		{"/login?next=%2F", root + "/login?next=%2F"},
		{"http://printer.lan:8080/setup", root + "/setup"},
		{"http://PRINTER.lan:8080", root + "/"},
		{"https://printer.lan:8080/setup", "https://printer.lan:8080/setup"},
		{"http://printer.lan/setup", "http://printer.lan/setup"},
		{"https://example.com/help", "https://example.com/help"},
		{"//example.com/x", "//example.com/x"},
		{"next/page", "next/page"},
	} {
		if got := mapLocation(tc.in, tn, root); got != tc.want {
			t.Errorf("mapLocation(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDropCookieKeepsTheTargetsOwn(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{CookieName + "=a.b.c.d; sid=1; theme=dark"}, "sid=1; theme=dark"},
		{[]string{"sid=1", CookieName + "=x"}, "sid=1"},
		{[]string{CookieName + "=x"}, ""},
	} {
		h := http.Header{"Cookie": tc.in}
		dropCookie(h)
		if got := h.Get("Cookie"); got != tc.want || len(h.Values("Cookie")) > 1 {
			t.Errorf("dropCookie(%q) = %q, want %q", tc.in, h.Values("Cookie"), tc.want)
		}
	}
}

func TestHostHeader(t *testing.T) {
	for _, tc := range []struct {
		t    Tunnel
		want string
	}{
		{Tunnel{TargetHost: "printer.lan", TargetPort: 80, Scheme: "http"}, "printer.lan"},
		{Tunnel{TargetHost: "printer.lan", TargetPort: 443, Scheme: "https"}, "printer.lan"},
		{Tunnel{TargetHost: "printer.lan", TargetPort: 443, Scheme: "http"}, "printer.lan:443"},
		{Tunnel{TargetHost: "fd00::5", TargetPort: 80, Scheme: "http"}, "[fd00::5]"},
		{Tunnel{TargetHost: "fd00::5", TargetPort: 8080, Scheme: "http"}, "[fd00::5]:8080"},
	} {
		if got := hostHeader(tc.t); got != tc.want {
			t.Errorf("hostHeader(%+v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}
