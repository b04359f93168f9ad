//go:build !linux

package discovery

import (
	"context"
	"errors"
	"net/netip"

	"gale/internal/wire/agentproto"
)

var errLinuxOnly = errors.New("read on Linux only")

// Neighbours returns the neighbour table; Linux only.
func Neighbours(context.Context) (map[netip.Addr]string, error) { return nil, errLinuxOnly }

// Routes returns the agent's routes; Linux only.
func Routes() ([]agentproto.ScanRoute, error) { return nil, errLinuxOnly }
