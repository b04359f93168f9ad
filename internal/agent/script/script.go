// Package script is the agent's run_script command: an inline script run by its language's
// interpreter from a private temporary file, with the command's timeout and an output cap.
package script

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
	"unicode/utf8"

	"gale/internal/agent/capability"
	"gale/internal/agent/proctree"
	"gale/internal/wire/agentproto"
)

// Register registers the run_script command with reg.
func Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandRunScript, func(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
		var rs agentproto.RunScript
		if err := json.Unmarshal(c.Payload, &rs); err != nil {
			return failed("the script payload is unreadable: " + err.Error())
		}
		if err := turns.acquire(ctx); err != nil {
			return agentproto.CommandResult{Status: agentproto.ResultTimedOut,
				Error: fmt.Sprintf("the script waited for its turn (%d run at once) past its timeout and did not start", MaxConcurrent)}
		}
		defer turns.release()
		return run(ctx, c.ID, rs)
	})
}

func failed(msg string) agentproto.CommandResult {
	return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: msg}
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

// run runs an inline script from a private temporary file, with the command's timeout
// and the output cap; on timeout the whole process tree is killed.
func run(ctx context.Context, commandID string, rs agentproto.RunScript) agentproto.CommandResult {
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
	stdout, stderr := &outputBuffer{max: limit}, &outputBuffer{max: limit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	proctree.KillOnCancel(cmd)
	if err := runAs(ctx, cmd, rs.RunAs, dir, file); err != nil {
		return failed(err.Error())
	}
	cmd.WaitDelay = 5 * time.Second
	if err = cmd.Start(); err == nil {
		liveCtx, stopLive := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sendLive(liveCtx, commandID, stdout, stderr)
		}()
		err = cmd.Wait()
		stopLive()
		<-done
	}
	res := agentproto.CommandResult{Status: agentproto.ResultCompleted, Truncated: stdout.truncated || stderr.truncated}
	res.Stdout, res.StdoutEncoding = encodeOutput(stdout.Bytes())
	res.Stderr, res.StderrEncoding = encodeOutput(stderr.Bytes())
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

// encodeOutput carries a stream as text when it is text, else (a NUL, invalid UTF-8, a
// multi-byte character cut by the output cap) as base64, so the bytes arrive exactly.
func encodeOutput(b []byte) (string, string) {
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), agentproto.OutputBase64
}
