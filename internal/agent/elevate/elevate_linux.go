package elevate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// Service is the agent's elevation service.
type Service struct {
	opts Options
	log  *slog.Logger
	reg  *capability.Registry

	mu      sync.Mutex
	waiters map[string]chan agentproto.ElevationDecision // local ID → decisions
	running map[string]*os.Process                       // request ID → a command run as root
	timers  map[string]*time.Timer                       // request ID → a grant's removal
}

// New returns the elevation service.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.SudoersDir == "" {
		o.SudoersDir = DefaultSudoersDir
	}
	return &Service{opts: o, log: o.Logger, waiters: map[string]chan agentproto.ElevationDecision{}, running: map[string]*os.Process{},
		timers: map[string]*time.Timer{}}
}

// Register adds the decision command and starts the listener with the agent.
func (s *Service) Register(reg *capability.Registry) {
	s.reg = reg
	reg.Command(agentproto.CommandElevationDecision, s.onDecision)
	reg.OnStart(func(ctx context.Context, _ capability.Reporter) {
		s.sweep()
		if s.opts.Socket == "off" {
			return
		}
		if os.Geteuid() != 0 {
			s.log.Info("elevation requests are off: the agent does not run as root")
			return
		}
		go s.listen(ctx)
	})
}

func (s *Service) listen(ctx context.Context) {
	path := s.opts.Socket
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		s.log.Warn("elevation requests are off: another agent listens on the socket", "socket", path)
		return
	}
	_ = os.Remove(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.log.Error("elevation socket", "error", err)
		return
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		s.log.Error("elevation socket", "error", err)
		return
	}
	// Any local user may ask; what they may do is the server's decision.
	if err := os.Chmod(path, 0o666); err != nil {
		s.log.Error("elevation socket", "error", err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("elevation socket closed", "error", err)
			}
			return
		}
		go s.serve(ctx, c)
	}
}

func send(c *net.UnixConn, r reply) {
	b, _ := json.Marshal(r)
	_, _ = c.Write(append(b, '\n'))
}

func refuse(c *net.UnixConn, format string, args ...any) {
	send(c, reply{Type: "exit", Code: 1, Message: fmt.Sprintf(format, args...)})
}

// peer is what the agent knows of the asking process.
type peer struct {
	pid, uid int
	user     string
	groups   []string
	parent   string
	cwd      string
}

func peerOf(c *net.UnixConn) (peer, error) {
	var p peer
	raw, err := c.SyscallConn()
	if err != nil {
		return p, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return p, err
	}
	if cerr != nil {
		return p, cerr
	}
	p.pid, p.uid = int(cred.Pid), int(cred.Uid)
	u, err := user.LookupId(strconv.Itoa(p.uid))
	if err != nil {
		return p, fmt.Errorf("no user with uid %d", p.uid)
	}
	p.user = u.Username
	if gids, err := u.GroupIds(); err == nil {
		for i, gid := range gids {
			if i == agentproto.MaxElevationGroups {
				break
			}
			if g, err := user.LookupGroupId(gid); err == nil {
				p.groups = append(p.groups, g.Name)
			}
		}
	}
	// The peer is the gale-agent elevate client; the parent is what started it (a shell).
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				if exe, err := os.Readlink("/proc/" + f[1] + "/exe"); err == nil {
					p.parent = exe
				}
			}
		}
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.pid)); err == nil {
		p.cwd = cwd
	}
	return p, nil
}

// resolve finds the executable of argv[0]: an absolute path as is, a bare name in SafePath;
// a relative path is refused. The result has its symbolic links resolved and must be a
// regular file that only root can change (else its hash would not bind what runs).
func resolve(name string) (string, error) {
	var path string
	switch {
	case strings.HasPrefix(name, "/"):
		path = name
	case strings.Contains(name, "/"):
		return "", errors.New("give the command as a bare name or an absolute path")
	default:
		for _, dir := range filepath.SplitList(SafePath) {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				path = p
				break
			}
		}
		if path == "" {
			return "", fmt.Errorf("%s not found in %s", name, SafePath)
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", real)
	}
	if !ok || sys.Uid != 0 || st.Mode()&0o022 != 0 {
		return "", fmt.Errorf("%s must be owned by root and writable by root only", real)
	}
	return real, nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readRequest reads the client's request and its three descriptors.
func readRequest(c *net.UnixConn) (clientRequest, []*os.File, error) {
	var in clientRequest
	buf := make([]byte, maxRequest+1)
	oob := make([]byte, unix.CmsgSpace(3*4)*2)
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return in, nil, err
	}
	var files []*os.File
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "client"))
			}
		}
	}
	if n > maxRequest {
		return in, files, errors.New("the request is too large")
	}
	if len(files) != 3 {
		return in, files, errors.New("the client must pass its stdin, stdout and stderr")
	}
	if err := json.Unmarshal(buf[:n], &in); err != nil {
		return in, files, errors.New("the request is not readable")
	}
	total := 0
	for _, a := range in.Argv {
		total += len(a) + 1
		if strings.ContainsRune(a, 0) {
			return in, files, errors.New("an argument holds NUL")
		}
	}
	if len(in.Argv) == 0 || len(in.Argv) > agentproto.MaxElevationArgs || total > agentproto.MaxElevationCommandLine {
		return in, files, fmt.Errorf("1 to %d arguments, %d bytes in all", agentproto.MaxElevationArgs, agentproto.MaxElevationCommandLine)
	}
	return in, files, nil
}

func (s *Service) serve(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	in, files, err := readRequest(c)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		refuse(c, "%v", err)
		return
	}
	p, err := peerOf(c)
	if err != nil {
		refuse(c, "cannot identify the caller: %v", err)
		return
	}
	path, err := resolve(in.Argv[0])
	if err != nil {
		refuse(c, "%v", err)
		return
	}
	if in.Grant && (!safeUser.MatchString(p.user) || !safePath.MatchString(path)) {
		refuse(c, "a grant needs a plain user name and executable path")
		return
	}
	sum, err := hashFile(path)
	if err != nil {
		refuse(c, "cannot read %s: %v", path, err)
		return
	}
	req := agentproto.ElevationRequest{LocalID: uuid.NewString(), User: p.user, UID: p.uid, Groups: p.groups, Path: path, SHA256: sum,
		ParentImage: p.parent, CommandLine: strings.Join(append([]string{path}, in.Argv[1:]...), " "), Grant: in.Grant}
	ch := make(chan agentproto.ElevationDecision, 8)
	s.mu.Lock()
	s.waiters[req.LocalID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, req.LocalID)
		s.mu.Unlock()
	}()
	if s.reg == nil {
		refuse(c, "the agent is not connected")
		return
	}
	s.reg.Send(agentproto.TypeElevationRequest, req)
	s.log.Info("elevation requested", "user", p.user, "path", path, "grant", in.Grant)
	send(c, reply{Type: "status", Message: "asked the server to run " + path + " as root"})

	// The client hanging up abandons the request.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(gone)
	}()
	timeout := time.NewTimer(WaitLimit)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			refuse(c, "the agent is stopping")
			return
		case <-gone:
			return
		case <-timeout.C:
			refuse(c, "no decision within %s: not elevated", WaitLimit)
			return
		case d := <-ch:
			switch d.Decision {
			case agentproto.ElevationPending:
				send(c, reply{Type: "status", Message: "waiting for a technician's approval (request " + d.RequestID + ")"})
				continue
			case agentproto.ElevationApproved:
				if in.Grant {
					if err := s.grant(d, p.user, path); err != nil {
						refuse(c, "approved, but the sudoers entry failed: %v", err)
						return
					}
					send(c, reply{Type: "exit", Message: fmt.Sprintf("approved: sudo %s is allowed until %s", path, d.ExpiresAt.Format(time.RFC3339))})
					return
				}
				code, err := s.run(d.RequestID, path, in.Argv[1:], files, p.cwd)
				if err != nil {
					refuse(c, "approved, but %s did not start: %v", path, err)
					return
				}
				send(c, reply{Type: "exit", Code: code})
				return
			default:
				msg := "not elevated: the request was " + d.Decision
				if d.Reason != "" {
					msg += " (" + d.Reason + ")"
				}
				refuse(c, "%s", msg)
				return
			}
		}
	}
}

// run runs the command as root with the client's descriptors and returns its exit status.
func (s *Service) run(requestID, path string, args []string, files []*os.File, cwd string) (int, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	cmd.Env = []string{"PATH=" + SafePath, "HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/sh"}
	cmd.Dir = "/"
	if st, err := os.Stat(cwd); cwd != "" && err == nil && st.IsDir() {
		cmd.Dir = cwd
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.running[requestID] = cmd.Process
	s.mu.Unlock()
	err := cmd.Wait()
	s.mu.Lock()
	delete(s.running, requestID)
	s.mu.Unlock()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code >= 0 {
			return code, nil
		}
		return 128 + int(syscall.SIGKILL), nil
	}
	return 0, err
}

// onDecision takes a decision from the server to the waiting client, and carries out a
// revocation or expiry: the grant removed, a command still running killed.
func (s *Service) onDecision(_ context.Context, c agentproto.Command) agentproto.CommandResult {
	var d agentproto.ElevationDecision
	if err := json.Unmarshal(c.Payload, &d); err != nil {
		return capability.Outcome(nil, fmt.Errorf("unreadable decision: %w", err))
	}
	if _, err := uuid.Parse(d.RequestID); err != nil {
		return capability.Outcome(nil, errors.New("the decision names no request"))
	}
	done := map[string]any{"requestId": d.RequestID, "decision": d.Decision}
	if d.Decision == agentproto.ElevationRevoked || d.Decision == agentproto.ElevationExpired {
		removed, err := s.removeGrant(d.RequestID)
		if err != nil {
			return capability.Outcome(nil, err)
		}
		done["grantRemoved"] = removed
		s.mu.Lock()
		proc := s.running[d.RequestID]
		s.mu.Unlock()
		if proc != nil {
			_ = proc.Kill()
			done["killed"] = true
		}
	}
	s.mu.Lock()
	ch := s.waiters[d.LocalID]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- d:
			done["delivered"] = true
		default:
		}
	}
	return capability.Outcome(done, nil)
}

var (
	safeUser = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)
	safePath = regexp.MustCompile(`^/[A-Za-z0-9._/+-]+$`)
)

const grantHeader = "# gale-elevation request="

func (s *Service) grantFile(requestID string) string {
	return filepath.Join(s.opts.SudoersDir, "gale-"+requestID)
}

// grant writes the sudoers entry of an approved grant: validated with visudo -cf before it
// is moved into place (mode 0440), removed at its expiry.
func (s *Service) grant(d agentproto.ElevationDecision, user, path string) error {
	if d.ExpiresAt == nil || !d.ExpiresAt.After(time.Now()) {
		return errors.New("the approval has no expiry in the future")
	}
	if _, err := uuid.Parse(d.RequestID); err != nil || !safeUser.MatchString(user) || !safePath.MatchString(path) {
		return errors.New("unsafe user or path")
	}
	body := fmt.Sprintf("%s%s expires=%s\n%s ALL=(root) NOPASSWD: %s\n", grantHeader, d.RequestID, d.ExpiresAt.UTC().Format(time.RFC3339),
		user, path)
	// A name with a dot: sudo's includedir skips it until it is renamed into place.
	tmp := filepath.Join(s.opts.SudoersDir, ".gale-"+d.RequestID+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o440); err != nil {
		return err
	}
	visudo := s.opts.Visudo
	if visudo == "" {
		for _, dir := range filepath.SplitList(SafePath) {
			if _, err := os.Stat(filepath.Join(dir, "visudo")); err == nil {
				visudo = filepath.Join(dir, "visudo")
				break
			}
		}
	}
	if visudo == "" {
		os.Remove(tmp)
		return errors.New("visudo is not installed")
	}
	if out, err := exec.Command(visudo, "-cf", tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("visudo refused the entry: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Chmod(tmp, 0o440); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, s.grantFile(d.RequestID)); err != nil {
		os.Remove(tmp)
		return err
	}
	s.arm(d.RequestID, *d.ExpiresAt)
	s.log.Info("sudoers grant written", "requestId", d.RequestID, "user", user, "path", path, "expiresAt", d.ExpiresAt)
	return nil
}

// arm removes the grant at its expiry, whatever the server says.
func (s *Service) arm(requestID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.timers[requestID]; t != nil {
		t.Stop()
	}
	s.timers[requestID] = time.AfterFunc(time.Until(at), func() {
		if _, err := s.removeGrant(requestID); err != nil {
			s.log.Error("remove an expired sudoers grant", "requestId", requestID, "error", err)
		}
	})
}

func (s *Service) removeGrant(requestID string) (bool, error) {
	s.mu.Lock()
	if t := s.timers[requestID]; t != nil {
		t.Stop()
		delete(s.timers, requestID)
	}
	s.mu.Unlock()
	err := os.Remove(s.grantFile(requestID))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err == nil {
		s.log.Info("sudoers grant removed", "requestId", requestID)
	}
	return err == nil, err
}

// sweep drops the grants that expired while the agent was not running, and re-arms the rest.
func (s *Service) sweep() {
	matches, _ := filepath.Glob(filepath.Join(s.opts.SudoersDir, "gale-*"))
	for _, f := range matches {
		id := strings.TrimPrefix(filepath.Base(f), "gale-")
		exp, ok := grantExpiry(f)
		if !ok || !exp.After(time.Now()) {
			if err := os.Remove(f); err != nil {
				s.log.Error("remove an expired sudoers grant", "file", f, "error", err)
			}
			continue
		}
		s.arm(id, exp)
	}
}

func grantExpiry(path string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if !strings.HasPrefix(line, grantHeader) {
		return time.Time{}, false
	}
	_, v, ok := strings.Cut(strings.TrimSpace(line), " expires=")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// Ask sends argv to the agent on socket with the process's stdin, stdout and stderr, prints
// the agent's status lines to stderr, and returns the exit status to end with.
func Ask(socket string, argv []string, grant bool, stderr io.Writer) int {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		fmt.Fprintf(stderr, "gale-agent elevate: the agent does not answer on %s: %v\n", socket, err)
		return 1
	}
	defer c.Close()
	b, _ := json.Marshal(clientRequest{Argv: argv, Grant: grant})
	if _, _, err := c.WriteMsgUnix(b, unix.UnixRights(0, 1, 2), nil); err != nil {
		fmt.Fprintf(stderr, "gale-agent elevate: %v\n", err)
		return 1
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		var r reply
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if r.Message != "" {
			fmt.Fprintf(stderr, "gale-agent elevate: %s\n", r.Message)
		}
		if r.Type == "exit" {
			return r.Code
		}
	}
	fmt.Fprintln(stderr, "gale-agent elevate: the agent closed the request without an answer: not elevated")
	return 1
}
