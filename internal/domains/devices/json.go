package devices

import (
	"strconv"
	"strings"
	"time"

	"gale/internal/platform/jsonenc"
	"gale/internal/wire/agentproto"
)

// AppendJSON writes the list as encoding/json would, without reflection: a page of devices
// is the API's largest frequent response (see jsonenc).
func (l DeviceList) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, '{')
	if l.Devices != nil {
		if b, err = appendDevices(jsonenc.Key(b, "devices"), *l.Devices); err != nil {
			return b, err
		}
	}
	if l.NextCursor != nil {
		b = jsonenc.String(jsonenc.Key(b, "nextCursor"), *l.NextCursor)
	}
	if l.Limit != nil {
		b = jsonenc.IntPtr(jsonenc.Key(b, "limit"), l.Limit)
	}
	if l.Total != nil {
		b = jsonenc.IntPtr(jsonenc.Key(b, "total"), l.Total)
	}
	if l.Data != nil {
		if b, err = appendDevices(jsonenc.Key(b, "data"), *l.Data); err != nil {
			return b, err
		}
	}
	if l.Pagination != nil {
		if b, err = jsonenc.Value(jsonenc.Key(b, "pagination"), l.Pagination); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

func appendDevices(b []byte, list []*Device) ([]byte, error) {
	if list == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = list[i].AppendJSON(b); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// AppendJSON writes the device as encoding/json would.
func (d *Device) AppendJSON(b []byte) ([]byte, error) {
	if d.encoded != nil {
		return append(b, d.encoded...), nil
	}
	b = append(b, '{')
	b = jsonenc.String(jsonenc.Key(b, "id"), d.ID)
	b = jsonenc.String(jsonenc.Key(b, "partnerId"), d.PartnerID)
	b = jsonenc.String(jsonenc.Key(b, "orgId"), d.OrgID)
	b = jsonenc.String(jsonenc.Key(b, "siteId"), d.SiteID)
	b = jsonenc.String(jsonenc.Key(b, "hostname"), d.Hostname)
	b = jsonenc.StringPtr(jsonenc.Key(b, "displayName"), d.DisplayName)
	b = jsonenc.String(jsonenc.Key(b, "status"), d.Status)
	b = jsonenc.String(jsonenc.Key(b, "osType"), d.OSType)
	b = jsonenc.String(jsonenc.Key(b, "osName"), d.OSName)
	b = jsonenc.String(jsonenc.Key(b, "osVersion"), d.OSVersion)
	b = jsonenc.String(jsonenc.Key(b, "osBuild"), d.OSBuild)
	b = jsonenc.String(jsonenc.Key(b, "architecture"), d.Architecture)
	b = jsonenc.String(jsonenc.Key(b, "agentVersion"), d.AgentVersion)
	b = jsonenc.String(jsonenc.Key(b, "manufacturer"), d.Manufacturer)
	b = jsonenc.String(jsonenc.Key(b, "model"), d.Model)
	b = jsonenc.String(jsonenc.Key(b, "serialNumber"), d.SerialNumber)
	b = jsonenc.String(jsonenc.Key(b, "cpuModel"), d.CPUModel)
	b = jsonenc.Int(jsonenc.Key(b, "cpuCores"), int64(d.CPUCores))
	b = jsonenc.Int(jsonenc.Key(b, "memoryBytes"), d.MemoryBytes)
	b = jsonenc.String(jsonenc.Key(b, "ipAddress"), d.IPAddress)
	b = jsonenc.String(jsonenc.Key(b, "macAddress"), d.MACAddress)
	b = jsonenc.String(jsonenc.Key(b, "lastUser"), d.LastUser)
	b = jsonenc.Int(jsonenc.Key(b, "uptimeSeconds"), d.UptimeSeconds)
	b = jsonenc.Bool(jsonenc.Key(b, "pendingReboot"), d.PendingReboot)
	b, err := appendMetrics(jsonenc.Key(b, "metrics"), d.Metrics)
	if err != nil {
		return b, err
	}
	b = jsonenc.Strings(jsonenc.Key(b, "tags"), d.Tags)
	b = jsonenc.StringPtr(jsonenc.Key(b, "watchdogStatus"), d.WatchdogStatus)
	b = jsonenc.StringPtr(jsonenc.Key(b, "watchdogReason"), d.WatchdogReason)
	for _, t := range [...]struct {
		key string
		at  *time.Time
	}{{"mainAgentSilentSince", d.MainAgentSilentSince}, {"lastSeen", d.LastSeen}, {"enrolled", d.Enrolled},
		{"inventoryAt", d.InventoryAt}, {"decommissionedAt", d.DecommissionedAt}, {"createdAt", &d.CreatedAt},
		{"updatedAt", &d.UpdatedAt}} {
		if b, err = jsonenc.TimePtr(jsonenc.Key(b, t.key), t.at); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

func appendMetrics(b []byte, m *agentproto.Metrics) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '{')
	for _, f := range [...]struct {
		key string
		v   float64
	}{{"cpuPercent", m.CPUPercent}, {"ramPercent", m.RAMPercent}} {
		if b, err = jsonenc.Float(jsonenc.Key(b, f.key), f.v); err != nil {
			return b, err
		}
	}
	b = jsonenc.Int(jsonenc.Key(b, "ramUsedMb"), m.RAMUsedMB)
	b = jsonenc.Int(jsonenc.Key(b, "ramTotalMb"), m.RAMTotalMB)
	for _, f := range [...]struct {
		key string
		v   float64
	}{{"diskPercent", m.DiskPercent}, {"diskUsedGb", m.DiskUsedGB}, {"diskTotalGb", m.DiskTotalGB}} {
		if b, err = jsonenc.Float(jsonenc.Key(b, f.key), f.v); err != nil {
			return b, err
		}
	}
	b = jsonenc.Int(jsonenc.Key(b, "processCount"), int64(m.ProcessCount))
	if m.Load1 != 0 {
		if b, err = jsonenc.Float(jsonenc.Key(b, "load1"), m.Load1); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// parseMetrics reads a stored metrics sample without reflection, or reports false: a flat
// JSON object whose members are exactly agentproto.Metrics' numeric fields, in any order and
// spacing (PostgreSQL's jsonb reorders keys and adds spaces). Decoding it with encoding/json
// cost more than reading the rest of a device row; anything else is left to encoding/json.
func parseMetrics(s string) (agentproto.Metrics, bool) {
	var m agentproto.Metrics
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return m, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return m, skipSpace(s, i+1) == len(s)
	}
	for i < len(s) && s[i] == '"' {
		end := strings.IndexByte(s[i+1:], '"')
		if end < 0 {
			return m, false
		}
		key := s[i+1 : i+1+end]
		if i = skipSpace(s, i+2+end); i == len(s) || s[i] != ':' {
			return m, false
		}
		i = skipSpace(s, i+1)
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '-' || s[j] == '+' || s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
			j++
		}
		if !setMetric(&m, key, s[i:j]) {
			return m, false
		}
		switch i = skipSpace(s, j); {
		case i < len(s) && s[i] == ',':
			i = skipSpace(s, i+1)
		case i < len(s) && s[i] == '}':
			return m, skipSpace(s, i+1) == len(s)
		default:
			return m, false
		}
	}
	return m, false
}

// setMetric stores the number num under its JSON name; false for an unknown name or a number
// the field cannot hold, as encoding/json would refuse it.
func setMetric(m *agentproto.Metrics, key, num string) bool {
	if !jsonNumber(num) {
		return false
	}
	switch key {
	case "ramUsedMb", "ramTotalMb", "processCount":
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return false
		}
		switch key {
		case "ramUsedMb":
			m.RAMUsedMB = v
		case "ramTotalMb":
			m.RAMTotalMB = v
		default:
			m.ProcessCount = int(v)
		}
		return true
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return false
	}
	switch key {
	case "cpuPercent":
		m.CPUPercent = v
	case "ramPercent":
		m.RAMPercent = v
	case "diskPercent":
		m.DiskPercent = v
	case "diskUsedGb":
		m.DiskUsedGB = v
	case "diskTotalGb":
		m.DiskTotalGB = v
	case "load1":
		m.Load1 = v
	default:
		return false
	}
	return true
}

// jsonNumber reports whether s is a number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(s string) bool {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		if j := digits(i + 1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if j := digits(i); j > i {
			i = j
		} else {
			return false
		}
	}
	return i == len(s)
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
