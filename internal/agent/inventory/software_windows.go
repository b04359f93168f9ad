package inventory

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/windows/registry"

	"gale/internal/wire/agentproto"
)

// uninstallKey lists what Programs and Features shows. It is read in both registry views:
// 32-bit programs on 64-bit Windows register under WOW6432Node.
const uninstallKey = `SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall`

// installedSoftware lists the programs registered for uninstall, as Programs and Features
// does: system components and updates of other entries are left out.
func installedSoftware(ctx context.Context, _ string) ([]agentproto.Software, error) {
	software := []agentproto.Software{}
	seen := map[[2]string]bool{}
	var errs []error
	for _, view := range []uint32{registry.WOW64_64KEY, registry.WOW64_32KEY} {
		entries, err := uninstallEntries(ctx, view)
		if err != nil {
			errs = append(errs, err)
		}
		for _, sw := range entries {
			id := [2]string{sw.Name, sw.Version}
			if !seen[id] {
				seen[id] = true
				software = append(software, sw)
			}
		}
	}
	if len(software) > 0 {
		return software, nil
	}
	return software, errors.Join(errs...)
}

func uninstallEntries(ctx context.Context, view uint32) ([]agentproto.Software, error) {
	root, err := registry.OpenKey(registry.LOCAL_MACHINE, uninstallKey, registry.ENUMERATE_SUB_KEYS|view)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	names, err := root.ReadSubKeyNames(-1)
	if err != nil {
		return nil, err
	}
	var software []agentproto.Software
	for _, name := range names {
		if ctx.Err() != nil {
			return software, ctx.Err()
		}
		if sw, ok := uninstallEntry(root, name, view); ok {
			software = append(software, sw)
		}
	}
	return software, nil
}

func uninstallEntry(root registry.Key, name string, view uint32) (agentproto.Software, bool) {
	key, err := registry.OpenKey(root, name, registry.QUERY_VALUE|view)
	if err != nil {
		return agentproto.Software{}, false
	}
	defer key.Close()
	text := func(value string) string {
		s, _, _ := key.GetStringValue(value)
		return strings.TrimSpace(s)
	}
	number := func(value string) uint64 {
		n, _, _ := key.GetIntegerValue(value)
		return n
	}
	displayName := text("DisplayName")
	if displayName == "" || number("SystemComponent") == 1 || text("ParentKeyName") != "" {
		return agentproto.Software{}, false
	}
	sw := agentproto.Software{
		Name:      displayName,
		Version:   text("DisplayVersion"),
		Publisher: text("Publisher"),
		// EstimatedSize is in KiB.
		SizeBytes: int64(number("EstimatedSize")) * 1024,
		Source:    "registry",
	}
	if number("WindowsInstaller") == 1 {
		sw.Source = "msi"
	}
	// InstallDate is YYYYMMDD.
	if date := text("InstallDate"); len(date) == 8 && isDigits(date) {
		sw.InstallDate = date[:4] + "-" + date[4:6] + "-" + date[6:]
	}
	return sw, true
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
