package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"gale/internal/agentproto"
)

// executor carries out commands.
type executor struct {
	r *runner
}

func (e *executor) run(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
	start := time.Now()
	timeout := time.Duration(max(c.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res agentproto.CommandResult
	switch c.Type {
	case agentproto.CommandRefreshInventory:
		res = e.refreshInventory(ctx)
	case agentproto.CommandRunScript:
		var rs agentproto.RunScript
		if err := json.Unmarshal(c.Payload, &rs); err != nil {
			res = failed("the script payload is unreadable: " + err.Error())
			break
		}
		res = runScript(ctx, rs)
	case agentproto.CommandReboot, agentproto.CommandShutdown:
		var pd agentproto.PowerDelay
		_ = json.Unmarshal(c.Payload, &pd)
		res = power(c.Type, pd)
	default:
		res = failed("this agent does not know the command " + c.Type)
	}
	res.CommandID = c.ID
	res.DurationMs = time.Since(start).Milliseconds()
	return res
}

func failed(msg string) agentproto.CommandResult {
	return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: msg}
}

func (e *executor) refreshInventory(ctx context.Context) agentproto.CommandResult {
	if err := e.r.sendInventory(ctx); err != nil {
		return failed(err.Error())
	}
	return agentproto.CommandResult{Status: agentproto.ResultCompleted}
}

// cappedBuffer keeps the first max bytes written and notes whether more came.
type cappedBuffer struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// interpreter returns the program and arguments that run a script file in a language, and
// the file's extension.
func interpreter(lang, file string) (string, []string, string, error) {
	look := func(names ...string) (string, error) {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s is not installed on this machine", lang)
	}
	var prog string
	var err error
	switch lang {
	case agentproto.LanguageBash:
		prog, err = look("bash")
		return prog, []string{file}, ".sh", err
	case agentproto.LanguageSh:
		prog, err = look("sh")
		return prog, []string{file}, ".sh", err
	case agentproto.LanguagePython:
		prog, err = look("python3", "python")
		return prog, []string{file}, ".py", err
	case agentproto.LanguagePowerShell:
		prog, err = look("pwsh", "powershell")
		return prog, []string{"-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-File", file}, ".ps1", err
	case agentproto.LanguageCmd:
		if runtime.GOOS != "windows" {
			return "", nil, "", errors.New("cmd exists only on Windows")
		}
		prog, err = look("cmd")
		return prog, []string{"/Q", "/C", file}, ".cmd", err
	}
	return "", nil, "", fmt.Errorf("unknown script language %q", lang)
}

// runScript runs an inline script from a private temporary file, with the command's timeout
// and the output cap; on timeout the whole process tree is killed.
func runScript(ctx context.Context, rs agentproto.RunScript) agentproto.CommandResult {
	dir, err := os.MkdirTemp("", "gale-script-*")
	if err != nil {
		return failed("cannot create a temporary directory: " + err.Error())
	}
	defer os.RemoveAll(dir)
	_, _, ext, err := interpreter(rs.Language, "")
	if err != nil {
		return failed(err.Error())
	}
	file := filepath.Join(dir, "script"+ext)
	if err := os.WriteFile(file, []byte(rs.Script), 0o700); err != nil {
		return failed("cannot write the script: " + err.Error())
	}
	prog, args, _, _ := interpreter(rs.Language, file)
	cmd := exec.CommandContext(ctx, prog, append(args, rs.Args...)...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range rs.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	limit := rs.MaxOutputBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	stdout, stderr := &cappedBuffer{max: limit}, &cappedBuffer{max: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	killTree(cmd)
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	res := agentproto.CommandResult{Status: agentproto.ResultCompleted, Stdout: stdout.buf.String(), Stderr: stderr.buf.String(),
		Truncated: stdout.truncated || stderr.truncated}
	code := cmd.ProcessState.ExitCode()
	if cmd.ProcessState != nil {
		res.ExitCode = &code
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.Status, res.Error = agentproto.ResultTimedOut, "the script ran past its timeout and was stopped"
	case errors.As(err, &exitErr):
		res.Status, res.Error = agentproto.ResultFailed, fmt.Sprintf("the script exited with code %d", code)
	case err != nil:
		res.Status, res.Error = agentproto.ResultFailed, err.Error()
	}
	return res
}
