package devices

import (
	"time"

	"gale/internal/agentproto"
	"gale/internal/jsonenc"
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

func appendDevices(b []byte, list []Device) ([]byte, error) {
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
