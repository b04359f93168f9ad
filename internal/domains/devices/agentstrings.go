package devices

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"gale/internal/wire/agentproto"
)

// What agents report is what the machine says: a user name with an escape sequence, a
// version string padded with NULs (which PostgreSQL cannot store), a runaway field. The API
// refuses such strings from people, but an agent's report is cleaned instead, so that a
// heartbeat or an inventory is never lost over one field. These caps bound each string.
const (
	// maxAgentName caps names, versions, users and other one-word facts.
	maxAgentName = 256
	// maxAgentEntry caps a field of an inventory list entry (a package, a disk, an address).
	maxAgentEntry = 1024
	// maxAgentMessage caps an error message or a collector's failure.
	maxAgentMessage = 4096
)

// CleanLine removes control characters (C0, DEL, C1) and invalid UTF-8 from s, and cuts it
// to at most max bytes on a character boundary.
func CleanLine(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) && strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if isControl(r) || r == utf8.RuneError && size == 1 {
			continue
		}
		if b.Len()+size > max {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isControl reports whether r is a C0 control, DEL or a C1 control.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }

// cleanText removes NUL from text that may span lines (command output, error messages),
// keeping everything else.
func cleanText(s string) string { return strings.ReplaceAll(s, "\x00", "") }

// cleanJSON removes NUL from the strings and keys of a JSON document an agent sent, which
// PostgreSQL refuses in JSONB. Documents without an escaped NUL are returned as they are.
func cleanJSON(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, err := json.Marshal(withoutNUL(v))
	if err != nil {
		return raw
	}
	return out
}

func withoutNUL(v any) any {
	switch x := v.(type) {
	case string:
		return cleanText(x)
	case []any:
		for i := range x {
			x[i] = withoutNUL(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[cleanText(k)] = withoutNUL(e)
		}
		return out
	}
	return v
}

func cleanHeartbeat(hb *agentproto.Heartbeat) {
	hb.AgentVersion = CleanLine(hb.AgentVersion, maxAgentName)
	hb.LastUser = CleanLine(hb.LastUser, maxAgentName)
	hb.WatchdogState = CleanLine(hb.WatchdogState, maxAgentName)
	hb.WatchdogReason = CleanLine(hb.WatchdogReason, maxAgentMessage)
	switch hb.LiveChannel {
	case agentproto.LiveChannelUp, agentproto.LiveChannelConnecting, agentproto.LiveChannelDown:
	default:
		hb.LiveChannel = ""
	}
}

func cleanEnroll(req *agentproto.EnrollRequest) {
	req.EnrollmentKey = CleanLine(req.EnrollmentKey, maxAgentName)
	req.EnrollmentSecret = CleanLine(req.EnrollmentSecret, maxAgentName)
	req.SiteID = CleanLine(req.SiteID, maxAgentName)
	// A host name too long to be one stays too long, so that enrollment refuses it.
	req.Hostname = CleanLine(req.Hostname, len(req.Hostname))
	req.OSType = CleanLine(req.OSType, maxAgentName)
	req.OSVersion = CleanLine(req.OSVersion, maxAgentName)
	req.Architecture = CleanLine(req.Architecture, maxAgentName)
	req.AgentVersion = CleanLine(req.AgentVersion, maxAgentName)
	if req.Hardware != nil {
		cleanHardware(req.Hardware)
	}
}

func cleanHardware(h *agentproto.Hardware) {
	for _, f := range []*string{&h.Manufacturer, &h.Model, &h.SerialNumber, &h.BIOSVersion, &h.CPUModel, &h.Virtualization,
		&h.VirtualizationType, &h.CPUVendor, &h.BoardVendor, &h.BoardName, &h.BoardSerial, &h.ChassisType, &h.SystemUUID} {
		*f = CleanLine(*f, maxAgentName)
	}
	for i := range h.PhysicalDisks {
		d := &h.PhysicalDisks[i]
		for _, f := range []*string{&d.Name, &d.Model, &d.Serial} {
			*f = CleanLine(*f, maxAgentEntry)
		}
	}
}

func cleanInventory(inv *agentproto.Inventory) {
	inv.Hostname = CleanLine(inv.Hostname, maxAgentName)
	o := &inv.OS
	for _, f := range []*string{&o.Type, &o.Name, &o.Version, &o.Build, &o.KernelVersion, &o.Architecture, &o.Timezone,
		&o.PrettyName, &o.Codename, &o.PointRelease} {
		*f = CleanLine(*f, maxAgentName)
	}
	for i := range o.DNSServers {
		o.DNSServers[i] = CleanLine(o.DNSServers[i], maxAgentEntry)
	}
	cleanHardware(&inv.Hardware)
	for i := range inv.Disks {
		d := &inv.Disks[i]
		for _, f := range []*string{&d.Device, &d.Mountpoint, &d.FSType} {
			*f = CleanLine(*f, maxAgentEntry)
		}
	}
	for i := range inv.Network {
		n := &inv.Network[i]
		n.Name, n.MACAddress, n.OperState = CleanLine(n.Name, maxAgentEntry), CleanLine(n.MACAddress, maxAgentEntry), CleanLine(n.OperState, maxAgentEntry)
		for j := range n.Addresses {
			n.Addresses[j] = CleanLine(n.Addresses[j], maxAgentEntry)
		}
		for j := range n.Gateways {
			n.Gateways[j] = CleanLine(n.Gateways[j], maxAgentEntry)
		}
	}
	for i := range inv.Software {
		p := &inv.Software[i]
		for _, f := range []*string{&p.Name, &p.Version, &p.Publisher, &p.Architecture, &p.InstallDate, &p.Source} {
			*f = CleanLine(*f, maxAgentEntry)
		}
	}
	for _, users := range [][]agentproto.LoggedInUser{inv.Users, inv.LastLogons} {
		for i := range users {
			u := &users[i]
			u.Username, u.Terminal, u.Host = CleanLine(u.Username, maxAgentName), CleanLine(u.Terminal, maxAgentName), CleanLine(u.Host, maxAgentEntry)
		}
	}
	for i := range inv.Errors {
		inv.Errors[i] = CleanLine(inv.Errors[i], maxAgentMessage)
	}
}

func cleanResult(r *agentproto.CommandResult) {
	r.Status = CleanLine(r.Status, maxAgentName)
	r.Error = cleanText(truncate(r.Error, maxAgentMessage))
	r.Result = cleanJSON(r.Result)
}

func cleanCallResult(r *agentproto.CallResult) {
	if r.Error != nil {
		r.Error.Code = CleanLine(r.Error.Code, maxAgentName)
		r.Error.Message = cleanText(truncate(r.Error.Message, maxAgentMessage))
	}
}

// truncate cuts s to at most max bytes on a character boundary.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
