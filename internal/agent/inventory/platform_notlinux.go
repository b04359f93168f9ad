//go:build !linux

package inventory

import "gale/internal/agentproto"

// The resolver, the link details and the logon history are read on Linux only so far.

func dnsServers() ([]string, error) {
	return nil, nil
}

func networkDetails() (map[string]link, map[string][]string, error) {
	return nil, nil, nil
}

func recentLogons(int) ([]agentproto.LoggedInUser, error) {
	return nil, nil
}
