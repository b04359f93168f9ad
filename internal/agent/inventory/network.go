package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"

	"gale/internal/agentproto"
)

func collectNetwork(_ context.Context, inv *agentproto.Inventory) error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, iface := range ifaces {
		nic := agentproto.NetworkInterface{
			Name:       iface.Name,
			MACAddress: iface.HardwareAddr.String(),
			Addresses:  []string{},
			MTU:        iface.MTU,
			Up:         iface.Flags&net.FlagUp != 0,
			Loopback:   iface.Flags&net.FlagLoopback != 0,
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
