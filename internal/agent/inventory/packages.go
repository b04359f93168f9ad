package inventory

import (
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// maxSoftware caps the software list so one machine cannot flood the server.
const maxSoftware = 10_000

// dpkgFormat is the dpkg-query -f format parseDpkg reads: the status abbreviation first, so
// packages that are merely known (removed, config-files only) can be dropped.
const dpkgFormat = `${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\t${Maintainer}\t${Installed-Size}\n`

// parseDpkg turns dpkg-query output in dpkgFormat into software entries. A package counts as
// installed when the status letter (second of the abbreviation) is "i", which keeps held
// packages ("hi") along with ordinary ones ("ii"). Installed-Size is in KiB; the publisher is
// the maintainer's name.
func parseDpkg(output string) []agentproto.Software {
	software := []agentproto.Software{}
	for line := range strings.Lines(output) {
		fields := strings.Split(strings.TrimRight(line, "\r\n"), "\t")
		if len(fields) != 6 {
			continue
		}
		status, name := fields[0], fields[1]
		if len(status) < 2 || status[1] != 'i' || name == "" {
			continue
		}
		sw := agentproto.Software{
			Name:         name,
			Version:      fields[2],
			Architecture: fields[3],
			Publisher:    maintainerName(fields[4]),
			Source:       "dpkg",
		}
		if kib, err := strconv.ParseInt(fields[5], 10, 64); err == nil && kib > 0 {
			sw.SizeBytes = kib * 1024
		}
		software = append(software, sw)
	}
	return software
}

// maintainerName drops the address from a Debian maintainer ("Jane Doe <jane@debian.org>").
func maintainerName(maintainer string) string {
	if name, _, ok := strings.Cut(maintainer, " <"); ok {
		return name
	}
	return maintainer
}

// rpmFormat is the rpm --queryformat parseRPM reads. The epoch is printed only when set, the
// way rpm itself shows versions; SIZE is in bytes and INSTALLTIME in Unix seconds.
const rpmFormat = `%{NAME}\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\t%{ARCH}\t%{VENDOR}\t%{SIZE}\t%{INSTALLTIME}\n`

// rpmNone is how rpm prints a tag the package does not have.
const rpmNone = "(none)"

// parseRPM turns rpm -qa output in rpmFormat into software entries. The gpg-pubkey entries are
// imported signing keys, not software, and are skipped.
func parseRPM(output string) []agentproto.Software {
	software := []agentproto.Software{}
	for line := range strings.Lines(output) {
		fields := strings.Split(strings.TrimRight(line, "\r\n"), "\t")
		if len(fields) != 6 || fields[0] == "" || fields[0] == "gpg-pubkey" {
			continue
		}
		sw := agentproto.Software{
			Name:         fields[0],
			Version:      fields[1],
			Architecture: rpmValue(fields[2]),
			Publisher:    rpmValue(fields[3]),
			Source:       "rpm",
		}
		if size, err := strconv.ParseInt(fields[4], 10, 64); err == nil && size > 0 {
			sw.SizeBytes = size
		}
		if secs, err := strconv.ParseInt(fields[5], 10, 64); err == nil && secs > 0 {
			sw.InstallDate = time.Unix(secs, 0).UTC().Format(time.DateOnly)
		}
		software = append(software, sw)
	}
	return software
}

func rpmValue(field string) string {
	if field == rpmNone {
		return ""
	}
	return field
}
