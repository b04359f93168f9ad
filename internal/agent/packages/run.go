package packages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/agent/proctree"
)

// outputCap is how much of what the package manager printed a result carries: the tail,
// where the errors are.
const outputCap = 64 << 10

// parseCap bounds the stdout a run keeps for parsing (a full system's upgrade simulation is
// a few hundred KiB).
const parseCap = 64 << 20

// tail keeps the last max bytes written to it.
type tail struct {
	buf       []byte
	max       int
	truncated bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	return len(p), nil
}

// String returns the text kept, without a character cut at its start.
func (t *tail) String() string {
	b := t.buf
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// capped keeps the first max bytes written to it for parsing; more is an error, not a
// silently shortened list.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.Len()+len(p) > c.max {
		c.over = true
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

// runner runs the package manager's programs for one command and keeps the tail of all
// they printed, with each command line, for the command's result.
type runner struct {
	env    []string
	stdout *tail
	stderr *tail
	// lastStderr is the tail of what the last run printed on stderr.
	lastStderr []byte
}

func newRunner(env []string) *runner {
	return &runner{env: env, stdout: &tail{max: outputCap}, stderr: &tail{max: outputCap}}
}

// run runs prog with args and returns its stdout and exit code. err is set when the program
// could not run or was stopped by ctx, not for a non-zero exit.
func (r *runner) run(ctx context.Context, prog string, args ...string) ([]byte, int, error) {
	fmt.Fprintf(r.stdout, "+ %s %s\n", prog, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), r.env...)
	// Parsed output must not depend on the machine's language.
	cmd.Env = append(cmd.Env, "LC_ALL=C", "LANG=C", "LANGUAGE=")
	out := &capped{max: parseCap}
	errb := &tail{max: outputCap}
	cmd.Stdout = &teeWriter{out, r.stdout}
	cmd.Stderr = &teeWriter{errb, r.stderr}
	proctree.KillOnCancel(cmd)
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r.lastStderr = errb.buf
	if ctx.Err() != nil {
		return nil, -1, ctx.Err()
	}
	if out.over {
		return nil, -1, fmt.Errorf("%s printed more than %d bytes", prog, parseCap)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code := exitErr.ExitCode()
		if code < 0 {
			return nil, code, fmt.Errorf("%s was killed: %v", prog, err)
		}
		return out.Bytes(), code, nil
	}
	if err != nil {
		return nil, -1, fmt.Errorf("cannot run %s: %w", prog, err)
	}
	return out.Bytes(), 0, nil
}

// must runs prog and fails on a non-zero exit, naming the last error line it printed.
func (r *runner) must(ctx context.Context, prog string, args ...string) ([]byte, error) {
	out, code, err := r.run(ctx, prog, args...)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, exitError(prog, code, r.lastStderr)
	}
	return out, nil
}

// exitError describes a failed run by its last line that says "E:" (apt's errors), else its
// last line.
func exitError(prog string, code int, stderr []byte) error {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	msg := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "Error:") {
			msg = l
			break
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(lines[len(lines)-1])
	}
	if msg == "" {
		return fmt.Errorf("%s exited with code %d", prog, code)
	}
	return fmt.Errorf("%s exited with code %d: %s", prog, code, msg)
}

type teeWriter struct{ a, b io.Writer }

func (t *teeWriter) Write(p []byte) (int, error) {
	t.a.Write(p)
	t.b.Write(p)
	return len(p), nil
}
