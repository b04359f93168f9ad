package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/testkit/proctest"
)

// sysroot is a throwaway copy of this machine's system: an overlay over / whose changes
// live in memory, in its own mount and PID namespaces. Packages install into it with the
// machine's own dpkg and rpm, and whatever runs in it (a server, an agent) ends with it.
// The network is the machine's: a server in one root is reached from the test and from
// another root on 127.0.0.1.
type sysroot struct {
	t *testing.T
	// pid is the machine's ID of the namespaces' first process, which commands join.
	pid  string
	proc *exec.Cmd
}

// setupRoot runs in the new namespaces: it mounts the overlay, the kernel's file systems
// and the directories to share (the same path inside), prints its own process ID as the
// machine sees it (the shell reads its own /proc/self, still the machine's), enters the
// root, says so (only from then on do commands that join it land in the root), and waits
// there until killed. Nothing is mounted outside the namespaces.
const setupRoot = `set -e
base=$1; shift
mount -t tmpfs -o mode=0755 tmpfs "$base"
mkdir "$base/upper" "$base/work" "$base/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
mount -t proc proc "$base/root/proc"
mount --rbind /dev "$base/root/dev"
mount --rbind /sys "$base/root/sys"
for dir in "$@"; do
	mkdir -p "$base/root$dir"
	mount --bind "$dir" "$base/root$dir"
done
touch "$base/root/.throwaway-root"
read -r pid rest </proc/self/stat
echo "$pid"
exec chroot "$base/root" sh -c 'echo ready; exec sleep infinity'
`

// needRoots skips a test that needs throwaway roots when this machine cannot make them,
// and fails it if this machine's system changed where the packages install.
func needRoots(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: packages install into throwaway system roots (mount namespaces, overlayfs, chroot)")
	}
	needTools(t, "unshare", "nsenter", "chroot")
	before := map[string]bool{}
	for _, path := range installPaths {
		_, err := os.Lstat(path)
		before[path] = err == nil
	}
	t.Cleanup(func() {
		for _, path := range installPaths {
			if _, err := os.Lstat(path); (err == nil) != before[path] {
				t.Errorf("this machine's %s changed during the test", path)
			}
		}
	})
}

// installPaths are where the packages and the install script put things.
var installPaths = []string{"/usr/bin/gale", "/usr/bin/gale-agent", "/usr/local/bin/gale-agent", "/etc/gale",
	"/etc/gale-agent", "/var/lib/gale", "/usr/lib/gale", "/etc/init.d/gale-agent", "/var/lib/dpkg/info/gale.list"}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// newRoot makes a root in which the directories shared are visible at their own paths.
func newRoot(t *testing.T, shared ...string) *sysroot {
	t.Helper()
	base := t.TempDir()
	cmd := exec.Command("unshare", append([]string{"--mount", "--pid", "--fork", "--kill-child", "sh", "-c", setupRoot, "sh", base},
		shared...)...)
	// The root ends with the test process, even when it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot make a throwaway root: %v", err)
	}
	r := &sysroot{t: t, proc: cmd}
	t.Cleanup(r.close)
	lines := bufio.NewReader(out)
	pid, err := lines.ReadString('\n')
	ready, _ := lines.ReadString('\n')
	if _, perr := strconv.Atoi(strings.TrimSpace(pid)); err != nil || perr != nil || ready != "ready\n" {
		r.close()
		t.Skipf("cannot make a throwaway root (overlayfs over /, mount namespaces): %v %s", err, stderr.String())
	}
	r.pid = strings.TrimSpace(pid)
	// Commands must never reach this machine's own system.
	if out, err := r.try("test -e /.throwaway-root"); err != nil {
		t.Fatalf("commands do not run in the throwaway root: %v %s", err, out)
	}
	return r
}

// close kills everything in the root; its mounts go with its namespaces.
func (r *sysroot) close() {
	_ = r.proc.Process.Kill()
	_ = r.proc.Wait()
}

// command prepares a command in the root, as root, with a plain system environment and
// the extra variables given.
func (r *sysroot) command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--target", r.pid, "--mount", "--pid", "--root", "--wd", "--"}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
		"HOME=/root", "DEBIAN_FRONTEND=noninteractive"}, env...)
	return cmd
}

// try runs a shell script in the root and returns its combined output.
func (r *sysroot) try(script string) (string, error) {
	out, err := r.command(nil, "sh", "-ec", script).CombinedOutput()
	return string(out), err
}

// run runs a shell script in the root and fails the test when it fails.
func (r *sysroot) run(script string) string {
	r.t.Helper()
	out, err := r.try(script)
	if err != nil {
		r.t.Fatalf("in the root: %s\n%v\n%s", script, err, out)
	}
	return out
}

// exists tells whether path exists in the root.
func (r *sysroot) exists(path string) bool {
	_, err := r.try("test -e " + shellQuote(path) + " || test -L " + shellQuote(path))
	return err == nil
}

// unit is what the test needs of a systemd service unit to start it as systemd would.
type unit struct {
	User, Group, WorkingDirectory string
	// EnvironmentFiles are read in order; Optional tells the ones whose "-" prefix lets them
	// be missing.
	EnvironmentFiles []string
	Optional         map[string]bool
	ExecStart        []string
}

// readUnit reads the [Service] section of a unit file in the root.
func (r *sysroot) readUnit(path string) unit {
	r.t.Helper()
	u := unit{Optional: map[string]bool{}}
	section := ""
	for _, line := range strings.Split(r.run("cat "+shellQuote(path)), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if section != "[Service]" || !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch key {
		case "User":
			u.User = value
		case "Group":
			u.Group = value
		case "WorkingDirectory":
			u.WorkingDirectory = value
		case "EnvironmentFile":
			name, optional := strings.CutPrefix(value, "-")
			u.EnvironmentFiles = append(u.EnvironmentFiles, name)
			u.Optional[name] = optional
		case "ExecStart":
			u.ExecStart = strings.Fields(value)
		}
	}
	if len(u.ExecStart) == 0 {
		r.t.Fatalf("%s has no ExecStart", path)
	}
	return u
}

// service is a unit's command running in a root.
type service struct {
	// pid is its process ID in the root.
	pid string
	// exited receives how it ended.
	exited chan error
}

// start starts the unit's ExecStart as systemd would: as its user and group, in its
// working directory, with the variables of its environment files (read as root).
func (r *sysroot) start(u unit, logs *proctest.Output) *service {
	r.t.Helper()
	var env []string
	for _, file := range u.EnvironmentFiles {
		content, err := r.try("cat " + shellQuote(file))
		if err != nil {
			if u.Optional[file] {
				continue
			}
			r.t.Fatalf("environment file %s: %v %s", file, err, content)
		}
		for _, line := range strings.Split(content, "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") && strings.Contains(line, "=") {
				env = append(env, line)
			}
		}
	}
	uid := strings.TrimSpace(r.run("id -u " + shellQuote(u.User)))
	gid := strings.TrimSpace(r.run("getent group " + shellQuote(u.Group) + " | cut -d: -f3"))
	// The shell prints its ID in the root, then becomes the service.
	args := append([]string{"--setuid", uid, "--setgid", gid, "--", "sh", "-c",
		`cd "$0" && echo "pid $$" && exec "$@"`, u.WorkingDirectory}, u.ExecStart...)
	cmd := exec.Command("nsenter", append([]string{"--target", r.pid, "--mount", "--pid", "--root", "--wd"}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	pids := &pidWriter{w: logs, pid: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = pids, logs
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	// The service is nsenter's child: once nsenter ends, Wait stops waiting for the
	// output of a service that lives on until the root ends.
	cmd.WaitDelay = time.Second
	s := &service{exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.exited
	})
	select {
	case s.pid = <-pids.pid:
	case err := <-s.exited:
		s.exited <- err
		r.t.Fatalf("%v ended at once: %v\n%s", u.ExecStart, err, logs.String())
	case <-time.After(30 * time.Second):
		r.t.Fatalf("%v did not start within 30s:\n%s", u.ExecStart, logs.String())
	}
	return s
}

// pidWriter passes a service's output on, picking out the "pid N" line its wrapper prints.
type pidWriter struct {
	w    *proctest.Output
	pid  chan string
	sent bool
	buf  strings.Builder
}

func (p *pidWriter) Write(b []byte) (int, error) {
	if p.sent {
		return p.w.Write(b)
	}
	p.buf.Write(b)
	if line, rest, ok := strings.Cut(p.buf.String(), "\n"); ok {
		p.pid <- strings.TrimPrefix(line, "pid ")
		p.sent = true
		_, _ = p.w.Write([]byte(rest))
	}
	return len(b), nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
