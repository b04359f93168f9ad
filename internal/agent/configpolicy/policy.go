// Package policy is the agent's policy_evaluate command: it checks a configuration policy's
// rules on the machine (installed packages, free disk space, the OS version, a key in a
// configuration file, a running service) and reports one result per rule. It changes nothing
// on the machine. Linux is the supported system; elsewhere the rules that need a Linux source
// (dpkg or rpm, /etc/os-release, systemd) fail with a message saying so.
package configpolicy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// maxConfigBytes is how much of a configuration file a config_check reads.
const maxConfigBytes = 1 << 20

// serviceName is what a service_running rule may name: systemctl takes it as one argument,
// and nothing that looks like an option or a path passes.
var serviceName = regexp.MustCompile(`^[A-Za-z0-9@._:-]+$`)

// Packages is the installed packages of the machine: the package manager whose version
// ordering applies (agentproto.ManagerApt or ManagerDnf) and each package's version by name.
type Packages func(ctx context.Context) (manager string, versions map[string]string, err error)

// Options are the machine's sources; zero values read the real machine.
type Options struct {
	// Root prefixes every file the rules read (/etc/os-release, config_check paths, mount
	// points), so tests check a tree of their own.
	Root string
	// Packages lists installed packages (default: dpkg-query over PackageRoot's database, or
	// rpm where dpkg is absent).
	Packages Packages
	// PackageRoot is the system tree whose packages the agent manages ("" or "/": its own).
	PackageRoot string
	// ServiceActive reports systemctl is-active's answer for a unit (default: runs it).
	ServiceActive func(ctx context.Context, name string) (state string, err error)
}

// Evaluator checks rules.
type Evaluator struct{ opts Options }

// New returns an Evaluator over opts.
func New(opts Options) *Evaluator {
	if opts.Packages == nil {
		root := opts.PackageRoot
		if root == "" {
			root = "/"
		}
		opts.Packages = func(ctx context.Context) (string, map[string]string, error) { return systemPackages(ctx, root) }
	}
	if opts.ServiceActive == nil {
		opts.ServiceActive = systemctlIsActive
	}
	return &Evaluator{opts: opts}
}

// Register registers policy_evaluate with reg.
func (e *Evaluator) Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandPolicyEvaluate, e.Handle)
}

// Handle carries out a policy_evaluate command.
func (e *Evaluator) Handle(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
	var p agentproto.PolicyEvaluate
	if err := json.Unmarshal(c.Payload, &p); err != nil {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "unreadable policy_evaluate payload: " + err.Error()}
	}
	return capability.Outcome(agentproto.PolicyEvaluateResult{Results: e.Evaluate(ctx, p.Rules)}, nil)
}

// Evaluate checks each rule. The package list is read once, on the first rule that needs it.
func (e *Evaluator) Evaluate(ctx context.Context, rules []agentproto.PolicyRule) []agentproto.PolicyRuleResult {
	out := make([]agentproto.PolicyRuleResult, 0, len(rules))
	var pk *packageList
	for i, r := range rules {
		res := agentproto.PolicyRuleResult{Rule: i, Type: r.Type}
		var err error
		switch r.Type {
		case agentproto.RuleRequiredSoftware, agentproto.RuleProhibitedSoftware:
			if pk == nil {
				pk = &packageList{}
				pk.manager, pk.versions, pk.err = e.opts.Packages(ctx)
			}
			err = pk.check(r, &res)
		case agentproto.RuleDiskSpaceMinimum:
			err = e.disk(r, &res)
		case agentproto.RuleOSVersion:
			err = e.osVersion(r, &res)
		case agentproto.RuleConfigCheck:
			err = e.config(r, &res)
		case agentproto.RuleServiceRunning:
			err = e.service(ctx, r, &res)
		default:
			err = fmt.Errorf("this agent does not know the rule type %q", r.Type)
		}
		if err != nil {
			res.Passed, res.Message = false, err.Error()
		}
		out = append(out, res)
	}
	return out
}

// path is a machine path under the root.
func (e *Evaluator) path(p string) string {
	if e.opts.Root == "" {
		return p
	}
	return filepath.Join(e.opts.Root, p)
}

type packageList struct {
	manager  string
	versions map[string]string
	err      error
}

func (pk *packageList) check(r agentproto.PolicyRule, res *agentproto.PolicyRuleResult) error {
	if pk.err != nil {
		return pk.err
	}
	v, installed := pk.versions[r.Name]
	res.Actual = "not installed"
	if installed {
		res.Actual = v
	}
	if r.Type == agentproto.RuleProhibitedSoftware {
		res.Passed = !installed
		res.Message = r.Name + " is not installed"
		if installed {
			res.Message = r.Name + " " + v + " is installed and prohibited"
		}
		return nil
	}
	if !installed {
		res.Message = r.Name + " is not installed"
		return nil
	}
	if r.MinVersion == "" {
		res.Passed, res.Message = true, r.Name+" "+v+" is installed"
		return nil
	}
	cmp, err := pkgversion.Compare(pk.manager, v, r.MinVersion)
	if err != nil {
		return fmt.Errorf("compare %s with %s: %w", v, r.MinVersion, err)
	}
	res.Passed = cmp >= 0
	res.Message = fmt.Sprintf("%s %s is installed; at least %s is required", r.Name, v, r.MinVersion)
	return nil
}

func (e *Evaluator) disk(r agentproto.PolicyRule, res *agentproto.PolicyRuleResult) error {
	mount := r.MountPoint
	if mount == "" {
		mount = "/"
	}
	free, total, err := diskSpace(e.path(mount))
	if err != nil {
		return fmt.Errorf("read the free space of %s: %w", mount, err)
	}
	gb := float64(free) / (1 << 30)
	pct := 0.0
	if total > 0 {
		pct = float64(free) * 100 / float64(total)
	}
	res.Actual = fmt.Sprintf("%.2f GB free (%.1f%%)", gb, pct)
	res.Passed = true
	var want []string
	if r.MinFreeGB != nil {
		res.Passed = res.Passed && gb >= *r.MinFreeGB
		want = append(want, fmt.Sprintf("%g GB", *r.MinFreeGB))
	}
	if r.MinFreePercent != nil {
		res.Passed = res.Passed && pct >= *r.MinFreePercent
		want = append(want, fmt.Sprintf("%g%%", *r.MinFreePercent))
	}
	res.Message = fmt.Sprintf("%s has %s; at least %s free is required", mount, res.Actual, strings.Join(want, " and "))
	return nil
}

func (e *Evaluator) osVersion(r agentproto.PolicyRule, res *agentproto.PolicyRuleResult) error {
	f, err := os.Open(e.path("/etc/os-release"))
	if err != nil {
		return fmt.Errorf("read the OS version: %w", err)
	}
	defer f.Close()
	values := parseConfig(io.LimitReader(f, maxConfigBytes))
	v, ok := values["VERSION_ID"]
	if !ok {
		return errors.New("/etc/os-release has no VERSION_ID")
	}
	v = strings.Trim(v, `"'`)
	res.Actual = v
	cmp, err := compareDotted(v, r.MinVersion)
	if err != nil {
		return err
	}
	res.Passed = cmp >= 0
	res.Message = fmt.Sprintf("the OS version is %s; at least %s is required", v, r.MinVersion)
	return nil
}

// compareDotted compares versions of dotted numbers part by part (a missing part is 0).
func compareDotted(a, b string) (int, error) {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		var err error
		if i < len(pa) {
			if x, err = strconv.Atoi(pa[i]); err != nil {
				return 0, fmt.Errorf("the version %q is not dotted numbers", a)
			}
		}
		if i < len(pb) {
			if y, err = strconv.Atoi(pb[i]); err != nil {
				return 0, fmt.Errorf("the version %q is not dotted numbers", b)
			}
		}
		if x != y {
			if x < y {
				return -1, nil
			}
			return 1, nil
		}
	}
	return 0, nil
}

func (e *Evaluator) config(r agentproto.PolicyRule, res *agentproto.PolicyRuleResult) error {
	if !filepath.IsAbs(r.Path) {
		return fmt.Errorf("the path %q is not absolute", r.Path)
	}
	f, err := os.Open(e.path(filepath.Clean(r.Path)))
	if errors.Is(err, os.ErrNotExist) {
		res.Actual = "file missing"
		res.Passed = r.Operator == agentproto.ConfigAbsent
		res.Message = r.Path + " does not exist"
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", r.Path, err)
	}
	defer f.Close()
	values := parseConfig(io.LimitReader(f, maxConfigBytes))
	v, present := values[r.Key]
	res.Actual = "absent"
	if present {
		res.Actual = v
	}
	switch r.Operator {
	case agentproto.ConfigEq:
		res.Passed = present && v == r.Expected
	case agentproto.ConfigNe:
		res.Passed = !present || v != r.Expected
	case agentproto.ConfigContains:
		res.Passed = present && strings.Contains(v, r.Expected)
	case agentproto.ConfigPresent:
		res.Passed = present
	case agentproto.ConfigAbsent:
		res.Passed = !present
	default:
		return fmt.Errorf("unknown operator %q", r.Operator)
	}
	res.Message = fmt.Sprintf("%s in %s is %s (%s %q)", r.Key, r.Path, res.Actual, r.Operator, r.Expected)
	return nil
}

// parseConfig reads key=value, "key value" and "key: value" lines; # starts a comment line.
// The first occurrence of a key wins, as most daemons read their files.
func parseConfig(r io.Reader) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxConfigBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, "=: \t")
		if i <= 0 {
			continue
		}
		key := strings.TrimSpace(line[:i])
		if _, seen := out[key]; !seen {
			out[key] = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line[i:]), "=:"))
		}
	}
	return out
}

func (e *Evaluator) service(ctx context.Context, r agentproto.PolicyRule, res *agentproto.PolicyRuleResult) error {
	if !serviceName.MatchString(r.Name) || strings.HasPrefix(r.Name, "-") {
		return fmt.Errorf("%q is not a service name", r.Name)
	}
	state, err := e.opts.ServiceActive(ctx, r.Name)
	if err != nil {
		return err
	}
	res.Actual = state
	res.Passed = state == "active"
	res.Message = r.Name + " is " + state
	return nil
}

// systemctlIsActive asks systemd for a unit's state; it exits non-zero for every state but
// active, which is an answer here.
func systemctlIsActive(ctx context.Context, name string) (string, error) {
	path, err := exec.LookPath("systemctl")
	if err != nil {
		return "", errors.New("systemctl is not available on this system")
	}
	out, err := exec.CommandContext(ctx, path, "is-active", "--", name).Output()
	state := strings.TrimSpace(string(out))
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return "", fmt.Errorf("systemctl is-active %s: %w", name, err)
	}
	if state == "" {
		state = "unknown"
	}
	return state, nil
}

// systemPackages lists installed packages with dpkg-query, or rpm where dpkg is absent.
func systemPackages(ctx context.Context, root string) (string, map[string]string, error) {
	if path, err := exec.LookPath("dpkg-query"); err == nil {
		out, err := exec.CommandContext(ctx, path, "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f",
			"${db:Status-Abbrev}\t${Package}\t${Version}\n").Output()
		if err != nil {
			return "", nil, fmt.Errorf("dpkg-query: %w", err)
		}
		return agentproto.ManagerApt, parseDpkg(out), nil
	}
	if path, err := exec.LookPath("rpm"); err == nil {
		out, err := exec.CommandContext(ctx, path, "-qa", "--qf", "%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\n").Output()
		if err != nil {
			return "", nil, fmt.Errorf("rpm -qa: %w", err)
		}
		return agentproto.ManagerDnf, parseRPM(out), nil
	}
	return "", nil, errors.New("no supported package manager (dpkg or rpm) on this system")
}

// parseDpkg keeps the installed packages ("ii" and the like: the second letter i) of
// dpkg-query's status, name and version lines.
func parseDpkg(out []byte) map[string]string {
	m := map[string]string{}
	for line := range bytes.Lines(out) {
		f := strings.Split(strings.TrimRight(string(line), "\n"), "\t")
		if len(f) != 3 || len(f[0]) < 2 || f[0][1] != 'i' {
			continue
		}
		name, _, _ := strings.Cut(f[1], ":")
		m[name] = f[2]
	}
	return m
}

// parseRPM reads rpm's name and epoch:version-release lines; a zero epoch is left out, as
// the versions policies name rarely carry one.
func parseRPM(out []byte) map[string]string {
	m := map[string]string{}
	for line := range bytes.Lines(out) {
		name, v, ok := strings.Cut(strings.TrimSpace(string(line)), "\t")
		if !ok {
			continue
		}
		m[name] = strings.TrimPrefix(v, "0:")
	}
	return m
}
