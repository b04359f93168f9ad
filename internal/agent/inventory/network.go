package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"

	"gale/internal/wire/agentproto"
)

// link is what the platform tells of an interface's link beyond the standard library.
type link struct {
	operState string
	speedMbps int
}

func collectNetwork(_ context.Context, inv *agentproto.Inventory) error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	links, gateways, err := networkDetails()
	errs := []error{err}
	for _, iface := range ifaces {
		nic := agentproto.NetworkInterface{
			Name:       iface.Name,
			MACAddress: iface.HardwareAddr.String(),
			Addresses:  []string{},
			MTU:        iface.MTU,
			Up:         iface.Flags&net.FlagUp != 0,
			Loopback:   iface.Flags&net.FlagLoopback != 0,
			OperState:  links[iface.Name].operState,
			SpeedMbps:  links[iface.Name].speedMbps,
			Gateways:   gateways[iface.Name],
		}
		addrs, err := iface.Addrs()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", iface.Name, err))
		}
		for _, addr := range addrs {
			// *net.IPNet prints in CIDR notation, which is what the server stores.
			nic.Addresses = append(nic.Addresses, addr.String())
		}
		inv.Network = append(inv.Network, nic)
	}
	return errors.Join(errs...)
}
