package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"

	"gale/internal/wire/agentproto"
)

// lsblkArgs ask lsblk for the whole disks' identity in bytes, as JSON.
var lsblkArgs = []string{"-J", "-b", "-d", "-o", "NAME,MODEL,SIZE,ROTA,SERIAL,TYPE"}

// lsblkOutput is the part of `lsblk -J` parseLsblk reads. util-linux before 2.33 printed every
// value as a string ("size": "512110190592", "rota": "0"), later ones as numbers and booleans.
type lsblkOutput struct {
	BlockDevices []struct {
		Name   string          `json:"name"`
		Model  *string         `json:"model"`
		Size   json.RawMessage `json:"size"`
		Rota   json.RawMessage `json:"rota"`
		Serial *string         `json:"serial"`
		Type   string          `json:"type"`
	} `json:"blockdevices"`
}

// parseLsblk turns lsblk's JSON into disks, keeping whole disks only.
func parseLsblk(output []byte) ([]agentproto.PhysicalDisk, error) {
	var doc lsblkOutput
	if err := json.Unmarshal(output, &doc); err != nil {
		return nil, err
	}
	var disks []agentproto.PhysicalDisk
	for _, d := range doc.BlockDevices {
		if d.Type != "disk" {
			continue
		}
		size, _ := strconv.ParseUint(string(bytes.Trim(d.Size, `"`)), 10, 64)
		rota := string(bytes.Trim(d.Rota, `"`))
		disks = append(disks, agentproto.PhysicalDisk{
			Name:       d.Name,
			Model:      trimmedOrEmpty(d.Model),
			Serial:     trimmedOrEmpty(d.Serial),
			SizeBytes:  size,
			Rotational: rota == "true" || rota == "1",
		})
	}
	return disks, nil
}

func trimmedOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return strings.TrimSpace(*s)
}

func disksMissDetails(disks []agentproto.PhysicalDisk) bool {
	for _, d := range disks {
		if d.Model == "" || d.Serial == "" {
			return true
		}
	}
	return false
}

// withLsblkDetails fills the models and serials sysfs lacks from lsblk, which also reads the
// udev database (where a SATA disk's serial is). Without lsblk the disks stay as they are: the
// details are a nicety, not worth an error.
func withLsblkDetails(ctx context.Context, disks []agentproto.PhysicalDisk) []agentproto.PhysicalDisk {
	if _, err := exec.LookPath("lsblk"); err != nil {
		return disks
	}
	out, err := runCommand(ctx, "lsblk", lsblkArgs...)
	if err != nil {
		return disks
	}
	listed, err := parseLsblk(out)
	if err != nil {
		return disks
	}
	return mergeLsblk(disks, listed)
}

// mergeLsblk fills each disk's empty model and serial from lsblk's entry of the same name.
func mergeLsblk(disks, listed []agentproto.PhysicalDisk) []agentproto.PhysicalDisk {
	byName := map[string]agentproto.PhysicalDisk{}
	for _, d := range listed {
		byName[d.Name] = d
	}
	for i := range disks {
		other, ok := byName[disks[i].Name]
		if !ok {
			continue
		}
		disks[i].Model = firstNonEmpty(disks[i].Model, other.Model)
		disks[i].Serial = firstNonEmpty(disks[i].Serial, other.Serial)
	}
	return disks
}
