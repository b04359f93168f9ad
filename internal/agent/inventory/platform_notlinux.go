//go:build !linux

package inventory

import (
	"context"

	"gale/internal/wire/agentproto"
)

// The resolver, the link details, the logon history and the management products are read on
// Linux only so far.

func managementPosture(context.Context, []agentproto.Software, string) []agentproto.ManagementProduct {
	return nil
}

func dnsServers() ([]string, error) {
	return nil, nil
}

func networkDetails() (map[string]link, map[string][]string, error) {
	return nil, nil, nil
}

func recentLogons(int) ([]agentproto.LoggedInUser, error) {
	return nil, nil
}
