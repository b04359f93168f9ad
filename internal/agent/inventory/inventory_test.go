package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"gale/internal/wire/agentproto"
)

func TestCollectKeepsGoingWhenCollectorsFail(t *testing.T) {
	collectors := []collector{
		{"network", func(context.Context, *agentproto.Inventory) error {
			return errors.Join(errors.New("eth0: gone"), errors.New("eth1: gone"))
		}},
		{"software", func(context.Context, *agentproto.Inventory) error { panic("bad parser") }},
		{"os", func(_ context.Context, inv *agentproto.Inventory) error {
			inv.OS.Name = "Test OS"
			return nil
		}},
	}

	inv := collect(t.Context(), Options{PackageRoot: "/"}, collectors)

	if inv.OS.Name != "Test OS" {
		t.Errorf("OS.Name = %q, want the healthy collector's result", inv.OS.Name)
	}
	want := []string{"network: eth0: gone", "network: eth1: gone", "software: panic: bad parser"}
	if !slices.Equal(inv.Errors, want) {
		t.Errorf("Errors = %q, want %q", inv.Errors, want)
	}
	assertJSONLists(t, inv)
}

func TestCollectJSONHasEmptyListsNotNull(t *testing.T) {
	assertJSONLists(t, Collect(t.Context(), Options{}))
}

// assertJSONLists checks every list of the document encodes as a JSON array, never null.
func assertJSONLists(t *testing.T, inv agentproto.Inventory) {
	t.Helper()
	body, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"disks", "network", "software", "users"} {
		if raw := doc[name]; len(raw) == 0 || raw[0] != '[' {
			t.Errorf("%s encodes as %s, want a JSON array", name, raw)
		}
	}
	var nics []struct {
		Name      string          `json:"name"`
		Addresses json.RawMessage `json:"addresses"`
	}
	if err := json.Unmarshal(doc["network"], &nics); err != nil {
		t.Fatal(err)
	}
	for _, nic := range nics {
		if len(nic.Addresses) == 0 || nic.Addresses[0] != '[' {
			t.Errorf("addresses of %s encode as %s, want a JSON array", nic.Name, nic.Addresses)
		}
	}
}
