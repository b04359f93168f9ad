package agentdist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoBuilds is returned by RegisterDir for a directory without a single build.
var ErrNoBuilds = errors.New("no gale-agent-<os>-<arch>[.exe] files")

// ParseBuildName reads the platform out of a build's file name, gale-agent-<os>-<arch> with
// .exe on Windows: what make agents writes.
func ParseBuildName(name string) (goos, arch string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSuffix(name, ".exe"), "gale-agent-")
	if !found {
		return "", "", false
	}
	goos, arch, found = strings.Cut(rest, "-")
	return goos, arch, found && ValidPlatform(goos, arch) == nil
}

// RegisteredBinary is a build RegisterDir registered, or found registered already.
type RegisteredBinary struct {
	Binary
	Created bool
}

// DirRegistration is what RegisterDir did with a directory.
type DirRegistration struct {
	Binaries []RegisteredBinary
	// Skipped are the gale-agent-* entries that name no supported platform.
	Skipped []string
}

// RegisterDir registers every build in dir (see ParseBuildName) as version, as Register does
// with each, and stops at the first failure; what it registered until then is returned too.
func (s *Service) RegisterDir(ctx context.Context, dir, version, notes string) (DirRegistration, error) {
	var out DirRegistration
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out, err
	}
	for _, entry := range entries {
		goos, arch, ok := ParseBuildName(entry.Name())
		if !ok || entry.IsDir() {
			if strings.HasPrefix(entry.Name(), "gale-agent-") {
				out.Skipped = append(out.Skipped, entry.Name())
			}
			continue
		}
		f, err := os.Open(filepath.Join(dir, entry.Name()))
		if err != nil {
			return out, err
		}
		b, created, err := s.Register(ctx, version, goos, arch, f, notes)
		f.Close()
		if err != nil {
			return out, fmt.Errorf("%s: %w", entry.Name(), err)
		}
		out.Binaries = append(out.Binaries, RegisteredBinary{Binary: b, Created: created})
	}
	if len(out.Binaries) == 0 {
		return out, fmt.Errorf("%w in %s", ErrNoBuilds, dir)
	}
	return out, nil
}

// RegisterBuilds registers the agent builds shipped in root, one directory per version
// (root/<version>/gale-agent-<os>-<arch>[.exe], as the server's package and container image
// lay them out), then promotes the highest of those versions when it is newer than the
// promoted one and was never promoted before: install.sh serves a new package's agent at
// once, and an operator's rollback to an older version stands across restarts. Several nodes
// may run it at once: the database keeps one copy of each build and one promoted version.
// A directory that is no version, or whose builds cannot all be registered (other bytes
// under a registered version and platform), is logged and left out.
func (s *Service) RegisterBuilds(ctx context.Context, root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("read the agent builds: %w", err)
	}
	var newest string
	for _, entry := range entries {
		if !entry.IsDir() {
			continue
		}
		dir := filepath.Join(root, entry.Name())
		version, err := NormalizeVersion(entry.Name())
		if err != nil {
			s.logger.WarnContext(ctx, "agent builds skipped: the directory is not named after a version like 1.2.3", "dir", dir)
			continue
		}
		reg, err := s.RegisterDir(ctx, dir, version, "")
		for _, name := range reg.Skipped {
			s.logger.WarnContext(ctx, "agent build skipped: not gale-agent-<os>-<arch>[.exe] for a supported platform", "file", filepath.Join(dir, name))
		}
		if err != nil {
			s.logger.WarnContext(ctx, "agent builds not registered", "dir", dir, "error", err)
			continue
		}
		created := 0
		for _, b := range reg.Binaries {
			if b.Created {
				created++
			}
		}
		s.logger.InfoContext(ctx, "agent builds registered", "version", version, "builds", len(reg.Binaries), "new", created)
		if newest == "" || CompareVersions(version, newest) > 0 {
			newest = version
		}
	}
	if newest == "" {
		s.logger.InfoContext(ctx, "no agent builds found", "dir", root)
		return nil
	}
	return s.promoteShipped(ctx, newest)
}

// promoteShipped promotes version when no newer version is promoted and version never was.
func (s *Service) promoteShipped(ctx context.Context, version string) error {
	versions, err := s.List(ctx)
	if err != nil {
		return err
	}
	promoted, released := "", false
	for _, v := range versions {
		if v.Promoted {
			promoted = v.Version
		}
		if v.Version == version {
			released = v.ReleasedAt != nil
		}
	}
	if released || (promoted != "" && CompareVersions(promoted, version) >= 0) {
		return nil
	}
	previous, err := s.Promote(ctx, version)
	if err != nil {
		return err
	}
	s.logger.InfoContext(ctx, "agent version promoted", "version", version, "previous", previous)
	return nil
}
