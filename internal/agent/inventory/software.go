package inventory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"gale/internal/wire/agentproto"
)

// collectSoftware lists the installed software; root is the system tree whose packages the
// agent manages ("/" for its own), where the platform's package database honours one.
func collectSoftware(ctx context.Context, inv *agentproto.Inventory, root string) error {
	software, err := installedSoftware(ctx, root)
	software, capErr := capSoftware(software)
	if software != nil {
		inv.Software = software
	}
	return errors.Join(err, capErr)
}

// capSoftware keeps the first maxSoftware entries and says when it dropped the rest.
func capSoftware(software []agentproto.Software) ([]agentproto.Software, error) {
	if len(software) <= maxSoftware {
		return software, nil
	}
	return software[:maxSoftware], fmt.Errorf("list cut at %d of %d packages", maxSoftware, len(software))
}

// runCommand runs a program and returns its standard output. A failure names the program and
// carries the first line of its standard error, which is where the reason usually is.
func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if reason, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n"); reason != "" {
			return nil, fmt.Errorf("%s: %w: %s", name, err, reason)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
