//go:build !windows

package script

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/shirou/gopsutil/v4/host"

	"gale/internal/wire/agentproto"
)

// consoleUser names the user logged in at the machine's console: the newest login on a local
// terminal or display. It is a variable so that tests can name a user of their own.
var consoleUser = func(ctx context.Context) (string, error) {
	logins, err := host.UsersWithContext(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil // no login records at all (a container): nobody is logged in
	}
	if err != nil {
		return "", fmt.Errorf("cannot read who is logged in: %w", err)
	}
	sort.Slice(logins, func(i, j int) bool { return logins[i].Started > logins[j].Started })
	for _, l := range logins {
		if l.User != "" && l.User != "root" && local(l.Terminal, l.Host) {
			return l.User, nil
		}
	}
	return "", nil
}

// local reports whether a login is at the machine itself: a virtual console, or a display
// with no remote host.
func local(terminal, host string) bool {
	return strings.HasPrefix(terminal, "tty") || strings.HasPrefix(terminal, ":") || strings.HasPrefix(host, ":")
}

// runAs prepares cmd, whose script lies in dir, to run as the user runAs names: for
// agentproto.RunAsUser the console user (the script and its directory become theirs, and
// HOME, USER and LOGNAME are theirs); system and elevated run as the agent, which runs as
// root. It returns the directory the script runs in.
func runAs(ctx context.Context, cmd *exec.Cmd, runAs, dir, file string) error {
	if runAs != agentproto.RunAsUser {
		return nil
	}
	name, err := consoleUser(ctx)
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("no user is logged in at this device's console to run the script as; run it as system")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("the console user %s is not known to the system: %w", name, err)
	}
	uid, errU := strconv.ParseUint(u.Uid, 10, 32)
	gid, errG := strconv.ParseUint(u.Gid, 10, 32)
	if errU != nil || errG != nil {
		return fmt.Errorf("the console user %s has no numeric user and group ID", name)
	}
	if uint32(uid) != uint32(os.Geteuid()) && os.Geteuid() != 0 {
		return fmt.Errorf("the agent does not run as root, so it cannot run a script as %s", name)
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				groups = append(groups, uint32(n))
			}
		}
	}
	for _, p := range []string{dir, file} {
		if err := os.Chown(p, int(uid), int(gid)); err != nil {
			return fmt.Errorf("cannot hand the script to %s: %w", name, err)
		}
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}
	cmd.Env = append(cmd.Env, "HOME="+u.HomeDir, "USER="+name, "LOGNAME="+name)
	return nil
}
