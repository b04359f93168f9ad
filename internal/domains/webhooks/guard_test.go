package webhooks_test

import (
	"net/url"
	"testing"

	"gale/internal/domains/webhooks"
)

// TestNumericHostFormsOfPrivateAddressesAreRefused: every way inet_aton spells an IPv4
// address is read as that address before the private-address check.
func TestNumericHostFormsOfPrivateAddressesAreRefused(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "127.1", "127.0.1", "0x7f000001", "0X7F000001", "2130706433", "017700000001",
		"0177.0.0.1", "0x7f.1", "10.0x10203", "167772161", "0xa9.0xfe.0xa9.0xfe", "0", "127.0.0.1."} {
		u := &url.URL{Scheme: "http", Host: host, Path: "/in"}
		if err := webhooks.CheckTarget(t.Context(), "url", u, false); err == nil {
			t.Errorf("target %s was accepted, want refused", host)
		}
		if err := webhooks.CheckTarget(t.Context(), "url", u, true); err != nil {
			t.Errorf("target %s with private targets allowed: %v", host, err)
		}
	}
	for _, host := range []string{"93.184.215.14", "0x5db8d70e", "1572394766", "93.12113678"} {
		u := &url.URL{Scheme: "https", Host: host, Path: "/in"}
		if err := webhooks.CheckTarget(t.Context(), "url", u, false); err != nil {
			t.Errorf("public target %s: %v", host, err)
		}
	}
}
