package systemtools

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gale/internal/wire/agentproto"
)

// unitNamePattern is what a unit name may contain. It keeps option-like and shell-like
// strings away from systemctl.
var unitNamePattern = regexp.MustCompile(`^[A-Za-z0-9@._:\\-]+$`)

func checkUnitName(name string) error {
	if !unitNamePattern.MatchString(name) || strings.HasPrefix(name, "-") {
		return invalid("invalid unit name %q", name)
	}
	return nil
}

// serviceUnit checks a service name and gives it the .service suffix it may lack.
func serviceUnit(name string) (string, error) {
	if err := checkUnitName(name); err != nil {
		return "", err
	}
	if !strings.HasSuffix(name, ".service") {
		name += ".service"
	}
	return name, nil
}

func (s *linuxSystem) services(ctx context.Context) ([]agentproto.Service, error) {
	if !s.systemd() {
		return s.initServices(ctx)
	}
	units, err := s.run(ctx, "systemctl", "list-units", "--type=service", "--all", "--no-legend", "--no-pager", "--plain")
	if err != nil {
		return nil, err
	}
	files, err := s.run(ctx, "systemctl", "list-unit-files", "--type=service", "--no-legend", "--no-pager")
	if err != nil {
		return nil, err
	}
	return mergeServices(parseListUnits(units), parseUnitFiles(files)), nil
}

func (s *linuxSystem) service(ctx context.Context, name string) (agentproto.Service, error) {
	if !s.systemd() {
		return s.initService(ctx, name)
	}
	unit, err := serviceUnit(name)
	if err != nil {
		return agentproto.Service{}, err
	}
	out, err := s.run(ctx, "systemctl", "show", unit,
		"--property=Id,Description,LoadState,ActiveState,SubState,UnitFileState,MainPID", "--no-pager")
	if err != nil {
		return agentproto.Service{}, err
	}
	blocks := parseShow(out)
	if len(blocks) == 0 || blocks[0]["LoadState"] == "not-found" {
		return agentproto.Service{}, notFound("no service %s", unit)
	}
	return showService(blocks[0], unit), nil
}

// controlService runs systemctl start, stop or restart, which waits for the job to finish,
// then reads the new state.
func (s *linuxSystem) controlService(ctx context.Context, verb, name string) (agentproto.Service, error) {
	if !s.systemd() {
		return s.controlInitService(ctx, verb, name)
	}
	svc, err := s.service(ctx, name)
	if err != nil {
		return agentproto.Service{}, err
	}
	if _, err := s.run(ctx, "systemctl", "--no-ask-password", verb, svc.Name); err != nil {
		return agentproto.Service{}, err
	}
	return s.service(ctx, svc.Name)
}

// parseListUnits reads `systemctl list-units --plain --no-legend`: UNIT LOAD ACTIVE SUB
// DESCRIPTION. Units that are referenced but not installed are left out.
func parseListUnits(out []byte) []agentproto.Service {
	var svcs []agentproto.Service
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		// Older systemd marks failed units with a bullet even in plain mode.
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(line, "●"), "*"))
		f, desc := splitFields(line, 4)
		if len(f) < 4 || f[1] == "not-found" {
			continue
		}
		svcs = append(svcs, agentproto.Service{
			Name:        f[0],
			Description: desc,
			Status:      serviceStatus(f[2]),
			SubState:    f[3],
		})
	}
	return svcs
}

// parseUnitFiles reads `systemctl list-unit-files --no-legend`: UNIT STATE [PRESET].
func parseUnitFiles(out []byte) map[string]string {
	states := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 {
			states[f[0]] = f[1]
		}
	}
	return states
}

// mergeServices gives loaded units their start type and adds installed services that are
// not loaded (disabled ones, mostly) as stopped.
func mergeServices(units []agentproto.Service, files map[string]string) []agentproto.Service {
	out := make([]agentproto.Service, 0, len(units)+len(files))
	seen := map[string]bool{}
	for _, u := range units {
		state, ok := files[u.Name]
		if !ok {
			state = files[templateOf(u.Name)]
		}
		u.StartType = startType(state)
		seen[u.Name] = true
		out = append(out, u)
	}
	for name, state := range files {
		if seen[name] || strings.HasSuffix(name, "@.service") {
			continue // templates are not services until instantiated
		}
		out = append(out, agentproto.Service{Name: name, Status: "stopped", SubState: "dead", StartType: startType(state)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// templateOf names the template of an instance: getty@tty1.service → getty@.service.
func templateOf(unit string) string {
	at := strings.IndexByte(unit, '@')
	dot := strings.LastIndexByte(unit, '.')
	if at < 0 || dot < at {
		return ""
	}
	return unit[:at+1] + unit[dot:]
}

// parseShow reads `systemctl show` output: Key=Value lines, one block per unit separated by
// blank lines. A repeated key (TimersCalendar) keeps every value, one per line.
func parseShow(out []byte) []map[string]string {
	var blocks []map[string]string
	var cur map[string]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			cur = nil
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if cur == nil {
			cur = map[string]string{}
			blocks = append(blocks, cur)
		}
		if old, dup := cur[k]; dup {
			v = old + "\n" + v
		}
		cur[k] = v
	}
	return blocks
}

func showService(p map[string]string, unit string) agentproto.Service {
	svc := agentproto.Service{
		Name:        p["Id"],
		Description: p["Description"],
		Status:      serviceStatus(p["ActiveState"]),
		SubState:    p["SubState"],
		StartType:   startType(p["UnitFileState"]),
	}
	if svc.Name == "" {
		svc.Name = unit
	}
	if pid, err := strconv.ParseInt(p["MainPID"], 10, 32); err == nil {
		svc.PID = int32(pid)
	}
	return svc
}

func serviceStatus(active string) string {
	switch active {
	case "active", "reloading", "refreshing":
		return "running"
	case "inactive":
		return "stopped"
	case "activating":
		return "starting"
	case "deactivating":
		return "stopping"
	case "failed":
		return "failed"
	}
	return "unknown"
}

func startType(unitFileState string) string {
	switch unitFileState {
	case "enabled", "enabled-runtime":
		return "automatic"
	case "disabled", "masked", "masked-runtime":
		return "disabled"
	case "static":
		return "static"
	}
	return "manual"
}

// splitFields returns the first n whitespace-separated fields of s and the rest of s after
// them, its inner spacing kept. It returns fewer fields when s has fewer.
func splitFields(s string, n int) ([]string, string) {
	fields := make([]string, 0, n)
	rest := strings.TrimLeft(s, " \t")
	for len(fields) < n && rest != "" {
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		fields = append(fields, rest[:end])
		rest = strings.TrimLeft(rest[end:], " \t")
	}
	return fields, rest
}
