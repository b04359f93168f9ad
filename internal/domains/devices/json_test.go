package devices_test

import (
	"testing"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/jsonenc/jsonenctest"
	"gale/internal/wire/agentproto"
)

// TestDeviceListJSONMatchesEncodingJSON holds the device list's own encoder to encoding/json
// byte for byte, with every field set and with the nullable ones empty.
func TestDeviceListJSONMatchesEncodingJSON(t *testing.T) {
	var full devices.Device
	jsonenctest.Fill(t, &full, 1)
	bare := devices.Device{ID: "d2", Tags: []string{}, CreatedAt: time.Unix(0, 0).UTC()}
	quiet := full
	quiet.Metrics = &agentproto.Metrics{CPUPercent: 3, RAMUsedMB: 10} // load1 omitted when zero
	rows := []*devices.Device{&full, &bare, &quiet}
	next, limit, total := "cursor<&>", 50, 12345
	for name, list := range map[string]devices.DeviceList{
		"cursor":       {Devices: &rows, NextCursor: &next, Limit: &limit},
		"cursor-total": {Devices: &rows, NextCursor: &next, Limit: &limit, Total: &total},
		"empty":        {Devices: &[]*devices.Device{}, NextCursor: new(string), Limit: &limit},
		"page":         {Data: &rows, Pagination: &httpapi.Pagination{HasMore: true, Page: 2, Limit: 50, Total: &total}},
	} {
		jsonenctest.Match(t, name, list)
	}
}
