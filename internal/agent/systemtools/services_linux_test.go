package systemtools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gale/internal/wire/agentproto"
)

// fakeRun answers commands from canned output keyed by the command line; it records every
// command it was asked to run.
type fakeRun struct {
	out  map[string]string
	errs map[string]error
	ran  []string
}

func (f *fakeRun) run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	f.ran = append(f.ran, line)
	if err, ok := f.errs[line]; ok {
		return nil, err
	}
	out, ok := f.out[line]
	if !ok {
		return nil, &cmdError{cmd: line, stderr: "unexpected command", err: errors.New("exit status 1")}
	}
	return []byte(out), nil
}

func fakeSystem(f *fakeRun, systemd bool) *linuxSystem {
	return &linuxSystem{run: f.run, systemd: func() bool { return systemd }, journald: func() bool { return systemd }}
}

const listUnitsFixture = `cron.service                loaded    active   running Regular background program processing daemon
getty@tty1.service          loaded    active   running Getty on tty1
● nginx.service             loaded    failed   failed  A high performance web server
syslog.service              not-found inactive dead    syslog.service
systemd-fsck@dev-disk-by\x2duuid-AB.service loaded active exited File System Check on /dev/disk/by-uuid/AB
ssh.service                 loaded    activating start   OpenBSD Secure Shell server
`

const unitFilesFixture = `cron.service                 enabled         enabled
getty@.service               enabled         enabled
nginx.service                disabled        enabled
systemd-fsck@.service        static          -
ssh.service                  masked          enabled
apache-htcacheclean.service  disabled        enabled
rescue.service               static          -
`

func TestParseServices(t *testing.T) {
	got := mergeServices(parseListUnits([]byte(listUnitsFixture)), parseUnitFiles([]byte(unitFilesFixture)))
	want := []agentproto.Service{
		{Name: "apache-htcacheclean.service", Status: "stopped", SubState: "dead", StartType: "disabled"},
		{Name: "cron.service", Description: "Regular background program processing daemon", Status: "running", SubState: "running", StartType: "automatic"},
		{Name: "getty@tty1.service", Description: "Getty on tty1", Status: "running", SubState: "running", StartType: "automatic"},
		{Name: "nginx.service", Description: "A high performance web server", Status: "failed", SubState: "failed", StartType: "disabled"},
		{Name: "rescue.service", Status: "stopped", SubState: "dead", StartType: "static"},
		{Name: "ssh.service", Description: "OpenBSD Secure Shell server", Status: "starting", SubState: "start", StartType: "disabled"},
		{Name: `systemd-fsck@dev-disk-by\x2duuid-AB.service`, Description: "File System Check on /dev/disk/by-uuid/AB", Status: "running", SubState: "exited", StartType: "static"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("services:\n got %+v\nwant %+v", got, want)
	}
}

const showFixture = `Id=cron.service
Description=Regular background program processing daemon
LoadState=loaded
ActiveState=active
SubState=running
UnitFileState=enabled
MainPID=612
`

func TestServiceGetAndControl(t *testing.T) {
	show := "systemctl show cron.service --property=Id,Description,LoadState,ActiveState,SubState,UnitFileState,MainPID --no-pager"
	f := &fakeRun{out: map[string]string{
		show: showFixture,
		"systemctl --no-ask-password restart cron.service":                                                                      "",
		"systemctl show nope.service --property=Id,Description,LoadState,ActiveState,SubState,UnitFileState,MainPID --no-pager": "Id=nope.service\nLoadState=not-found\nActiveState=inactive\n",
	}}
	tools := &Tools{sys: fakeSystem(f, true)}

	svc := result[agentproto.Service](t, call(t, tools, agentproto.MethodServiceGet, agentproto.NameArgs{Name: "cron"}))
	want := agentproto.Service{Name: "cron.service", Description: "Regular background program processing daemon",
		Status: "running", SubState: "running", StartType: "automatic", PID: 612}
	if svc != want {
		t.Errorf("get = %+v", svc)
	}

	f.ran = nil
	result[agentproto.Service](t, call(t, tools, agentproto.MethodServiceRestart, agentproto.NameArgs{Name: "cron.service"}))
	if want := []string{show, "systemctl --no-ask-password restart cron.service", show}; !reflect.DeepEqual(f.ran, want) {
		t.Errorf("ran %q", f.ran)
	}

	wantCode(t, call(t, tools, agentproto.MethodServiceGet, agentproto.NameArgs{Name: "nope"}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodServiceStop, agentproto.NameArgs{Name: "nope"}), agentproto.ErrNotFound)
	for _, bad := range []string{"", "--force", "cron; reboot", "a b", "../x"} {
		wantCode(t, call(t, tools, agentproto.MethodServiceStart, agentproto.NameArgs{Name: bad}), agentproto.ErrInvalid)
	}
}

func TestServiceCommandFailure(t *testing.T) {
	f := &fakeRun{out: map[string]string{
		"systemctl show cron.service --property=Id,Description,LoadState,ActiveState,SubState,UnitFileState,MainPID --no-pager": showFixture,
	}, errs: map[string]error{
		"systemctl --no-ask-password stop cron.service": &cmdError{cmd: "systemctl stop", stderr: "Access denied", err: errors.New("exit status 1")},
	}}
	e := wantCode(t, call(t, &Tools{sys: fakeSystem(f, true)}, agentproto.MethodServiceStop, agentproto.NameArgs{Name: "cron"}), agentproto.ErrFailed)
	if !strings.Contains(e.Message, "Access denied") {
		t.Errorf("message %q", e.Message)
	}
}

// initRoot makes a machine root whose services are SysV init scripts: web, started at boot,
// keeps its state in a file; broken cannot tell its status.
func initRoot(t *testing.T) string {
	root := t.TempDir()
	state := filepath.Join(root, "web.running")
	files := map[string]string{
		"etc/init.d/web": `#!/bin/sh
case "$1" in
start) touch ` + state + ` ;;
stop) rm -f ` + state + ` ;;
restart) touch ` + state + ` ;;
status) test -e ` + state + ` || exit 3 ;;
*) exit 2 ;;
esac
`,
		"etc/init.d/broken": "#!/bin/sh\nexit 1\n",
		"etc/init.d/README": "#!/bin/sh\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/rc2.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../init.d/web", filepath.Join(root, "etc/rc2.d/S01web")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestServicesWithoutSystemdAreInitScripts(t *testing.T) {
	root := initRoot(t)
	tools := &Tools{sys: &linuxSystem{root: root, run: runCommand, systemd: func() bool { return false }}}
	list := result[[]agentproto.Service](t, call(t, tools, agentproto.MethodServiceList, nil))
	want := []agentproto.Service{{Name: "broken", Status: "unknown", StartType: "manual"}, {Name: "web", Status: "stopped", StartType: "automatic"}}
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("services = %+v", list)
	}
	if svc := result[agentproto.Service](t, call(t, tools, agentproto.MethodServiceStart, agentproto.NameArgs{Name: "web"})); svc.Status != "running" {
		t.Fatalf("after start = %+v", svc)
	}
	if svc := result[agentproto.Service](t, call(t, tools, agentproto.MethodServiceGet, agentproto.NameArgs{Name: "web.service"})); svc.Status != "running" {
		t.Fatalf("get = %+v", svc)
	}
	if svc := result[agentproto.Service](t, call(t, tools, agentproto.MethodServiceStop, agentproto.NameArgs{Name: "web"})); svc.Status != "stopped" {
		t.Fatalf("after stop = %+v", svc)
	}
	wantCode(t, call(t, tools, agentproto.MethodServiceGet, agentproto.NameArgs{Name: "nope"}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodServiceGet, agentproto.NameArgs{Name: "README"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodServiceStart, agentproto.NameArgs{Name: "../../bin/sh"}), agentproto.ErrInvalid)

	// Neither systemd nor init scripts.
	bare := &Tools{sys: &linuxSystem{root: t.TempDir(), run: runCommand, systemd: func() bool { return false }}}
	wantCode(t, call(t, bare, agentproto.MethodServiceList, nil), agentproto.ErrNotSupported)
}

func TestSplitFields(t *testing.T) {
	f, rest := splitFields("  a\tb  c   d  e ", 3)
	if !reflect.DeepEqual(f, []string{"a", "b", "c"}) || rest != "d  e " {
		t.Errorf("got %q %q", f, rest)
	}
	f, rest = splitFields("a", 3)
	if !reflect.DeepEqual(f, []string{"a"}) || rest != "" {
		t.Errorf("got %q %q", f, rest)
	}
}
