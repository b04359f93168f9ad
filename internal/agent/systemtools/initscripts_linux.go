package systemtools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"gale/internal/wire/agentproto"
)

// Without systemd as PID 1, services are the SysV init scripts of /etc/init.d: a script's
// `status` exit code says whether it runs (0 running, 3 stopped as the LSB specifies, anything
// else unknown), start, stop and restart run the script with that verb, and a service starts
// at boot when an S link to it sits in a multi-user runlevel's rc directory.

// notServices are files of /etc/init.d that are not services.
var notServices = map[string]bool{"README": true, "skeleton": true, "rc": true, "rcS": true, "functions": true}

func (s *linuxSystem) initDir() string { return filepath.Join(s.root, "etc", "init.d") }

// initScript checks a service name and returns its script's path.
func (s *linuxSystem) initScript(name string) (string, error) {
	name = strings.TrimSuffix(name, ".service")
	if err := checkUnitName(name); err != nil || strings.ContainsAny(name, "/\\") || notServices[name] {
		return "", invalid("invalid service name %q", name)
	}
	p := filepath.Join(s.initDir(), name)
	if info, err := os.Stat(p); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", notFound("no service %s", name)
	}
	return p, nil
}

func (s *linuxSystem) initServices(ctx context.Context) ([]agentproto.Service, error) {
	entries, err := os.ReadDir(s.initDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, notSupported("neither systemd nor SysV init scripts (/etc/init.d) are on this machine")
	}
	if err != nil {
		return nil, failed("listing init scripts: %v", err)
	}
	svcs := []agentproto.Service{}
	for _, e := range entries {
		if name := e.Name(); !strings.HasPrefix(name, ".") {
			if svc, err := s.initService(ctx, name); err == nil {
				svcs = append(svcs, svc)
			}
		}
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].Name < svcs[j].Name })
	return svcs, nil
}

func (s *linuxSystem) initService(ctx context.Context, name string) (agentproto.Service, error) {
	script, err := s.initScript(name)
	if err != nil {
		return agentproto.Service{}, err
	}
	name = filepath.Base(script)
	svc := agentproto.Service{Name: name, Status: "unknown", StartType: s.initStartType(name)}
	_, err = s.run(ctx, script, "status")
	var exit *exec.ExitError
	switch {
	case err == nil:
		svc.Status = "running"
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		svc.Status = "stopped"
	case ctx.Err() != nil:
		return agentproto.Service{}, ctx.Err()
	}
	return svc, nil
}

// initStartType is automatic when a multi-user runlevel starts the service, manual otherwise.
func (s *linuxSystem) initStartType(name string) string {
	for _, level := range []string{"2", "3", "4", "5"} {
		links, _ := filepath.Glob(filepath.Join(s.root, "etc", "rc"+level+".d", "S[0-9][0-9]"+name))
		if len(links) > 0 {
			return "automatic"
		}
	}
	return "manual"
}

func (s *linuxSystem) controlInitService(ctx context.Context, verb, name string) (agentproto.Service, error) {
	script, err := s.initScript(name)
	if err != nil {
		return agentproto.Service{}, err
	}
	if _, err := s.run(ctx, script, verb); err != nil {
		return agentproto.Service{}, failed("%v", err)
	}
	return s.initService(ctx, filepath.Base(script))
}
