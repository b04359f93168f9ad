// Package docs runs the shell examples of the README and of docs/ against a real server and
// agent, so that an example that stops matching the server fails the build.
//
// Every ```sh block runs, in the order of its file, the README first and then docs/*.md by
// name. A block is marked by an HTML comment on the line before it:
//
//	<!-- doc-test: skip: why -->   not run (installs a service, needs an outside system, ...)
//	<!-- doc-test: server -->      starts the server: run in the background, its `make` lines
//	                               left out (the test has built bin/gale and bin/gale-agent)
//	<!-- doc-test: file NAME -->   a script the next examples call: written to NAME, not run
//
// and a whole file by `<!-- doc-test: skip file: why -->` on a line of its own. The README's
// examples run in one shell; the variables and functions they leave behind (API, AUTH, ORG,
// poll, ...) are where every docs/ file's examples start, as a reader continuing from the
// README would. curl answers an HTTP error with a failure (--fail-with-body), so an example
// the server refuses stops its file's run at that block.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/proctest"
)

// block is one shell example of a file.
type block struct {
	line int // of the opening fence
	text string
	// mark is the doc-test directive before the block: "", "server", "skip: ...", "file NAME".
	mark string
}

var directive = regexp.MustCompile(`^<!-- doc-test: (.+?) -->$`)

// parse returns the shell blocks of a markdown file, and why the whole file is skipped ("" when
// it is not).
func parse(path string) ([]block, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var blocks []block
	var skipFile, mark string
	var cur *block
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = body.String()
			blocks = append(blocks, *cur)
			cur, mark = nil, ""
			body.Reset()
		case cur != nil:
			body.WriteString(line + "\n")
		case strings.HasPrefix(line, "```"):
			if lang := strings.TrimPrefix(line, "```"); lang == "sh" || lang == "bash" || lang == "shell" {
				cur = &block{line: n, mark: mark}
			} else {
				// A fence in another language: skip to its end.
				for sc.Scan() {
					n++
					if strings.TrimSpace(sc.Text()) == "```" {
						break
					}
				}
			}
			mark = ""
		default:
			if m := directive.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				if why, ok := strings.CutPrefix(m[1], "skip file: "); ok {
					skipFile = why
				} else {
					mark = m[1]
				}
			} else if strings.TrimSpace(line) != "" {
				mark = ""
			}
		}
	}
	if cur != nil {
		return nil, "", fmt.Errorf("%s:%d: the block never ends", path, cur.line)
	}
	for _, b := range blocks {
		if b.mark != "" && b.mark != "server" && !strings.HasPrefix(b.mark, "skip: ") && !strings.HasPrefix(b.mark, "file ") {
			return nil, "", fmt.Errorf("%s:%d: unknown doc-test directive %q", path, b.line, b.mark)
		}
	}
	return blocks, skipFile, sc.Err()
}

// docFiles are the README and docs/*.md, in the order their examples run.
func docFiles(t *testing.T) []string {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return append([]string{"../../README.md"}, files...)
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	md := "# x\n\n<!-- doc-test: skip: needs SMTP -->\n```sh\nmail\n```\n\n```json\n{\"a\": 1}\n```\n\n" +
		"<!-- doc-test: server -->\n```sh\nmake build\n./bin/gale serve\n```\nText.\n\n```sh\necho one\necho two\n```\n"
	path := filepath.Join(dir, "x.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, skip, err := parse(path)
	if err != nil || skip != "" {
		t.Fatal(err, skip)
	}
	want := []block{{4, "mail\n", "skip: needs SMTP"}, {13, "make build\n./bin/gale serve\n", "server"}, {19, "echo one\necho two\n", ""}}
	if !slices.Equal(blocks, want) {
		t.Fatalf("blocks = %+v, want %+v", blocks, want)
	}
	if err := os.WriteFile(path, []byte("<!-- doc-test: sometimes -->\n```sh\nx\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := parse(path); err == nil || !strings.Contains(err.Error(), "unknown doc-test directive") {
		t.Fatalf("an unknown directive = %v, want refused", err)
	}
}

// TestExamples runs every example against a real server (on the test's database) and agent.
func TestExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "oathtool", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the documentation's examples need %s (Debian package %s)", tool, tool)
		}
	}
	work := t.TempDir()
	build(t, filepath.Join(work, "bin"))
	addr := proctest.FreeAddr(t)
	base := "http://" + addr
	// Every address the examples give the server at is this test's server.
	rewrite := strings.NewReplacer("http://localhost:8080", base, "https://gale.example.com", base)
	env := append(os.Environ(), "LISTEN_ADDR="+addr, "PUBLIC_URL="+base, "DATABASE_URL="+storetest.URL(t),
		// The agent the README starts never serves privileged access on this host's socket nor
		// looks at its sudoers directory.
		"GALE_ELEVATE_SOCKET=off", "GALE_ELEVATE_SUDOERS_DIR="+t.TempDir())

	type doc struct {
		name   string
		blocks []block
		skip   string
	}
	var docs []doc
	var server *block
	for _, path := range docFiles(t) {
		blocks, skip, err := parse(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path, "../../")
		for i, b := range blocks {
			if b.mark == "server" {
				if server != nil {
					t.Fatalf("%s:%d: a second server block", name, b.line)
				}
				server = &blocks[i]
			}
		}
		docs = append(docs, doc{name, blocks, skip})
	}
	if server == nil {
		t.Fatal("no example is marked as the one that starts the server")
	}
	var start strings.Builder
	for _, line := range strings.Split(rewrite.Replace(server.text), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "make ") {
			start.WriteString(line + "\n")
		}
	}
	logs := runBackground(t, work, env, start.String())
	waitReady(t, base, logs)

	// What the examples start (the README's agent) runs on until every file has run.
	parent := t
	t.Cleanup(func() { killUnder(filepath.Join(work, "bin")) })
	state := filepath.Join(work, "walkthrough.state")
	for i, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			if d.skip != "" {
				t.Skip(d.skip)
			}
			var script strings.Builder
			script.WriteString("set -eo pipefail\ncurl() { command curl --fail-with-body \"$@\"; }\n")
			if i == 0 {
				script.WriteString("__before=\" $(compgen -v | tr '\\n' ' ') \"\n")
			} else {
				if _, err := os.Stat(state); err != nil {
					t.Skip("the README's examples, which these continue, did not finish")
				}
				script.WriteString(". " + state + "\n")
			}
			ran := 0
			for _, b := range d.blocks {
				text := rewrite.Replace(b.text)
				switch {
				case b.mark == "server" || strings.HasPrefix(b.mark, "skip: "):
					continue
				case strings.HasPrefix(b.mark, "file "):
					file := filepath.Join(work, strings.TrimPrefix(b.mark, "file "))
					if err := os.WriteFile(file, []byte(text), 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				fmt.Fprintf(&script, "echo '>>> %s:%d' >&2\n%s", d.name, b.line, text)
				ran++
			}
			if ran == 0 {
				t.Skip("no example to run")
			}
			if i == 0 {
				// What the README's examples defined, for the files that continue from them.
				script.WriteString("for __v in $(compgen -v); do case \"$__before\" in *\" $__v \"*) ;; *) declare -p \"$__v\";; esac; " +
					"done | grep -v ' __' > " + state + ".tmp\ndeclare -f >> " + state + ".tmp\nmv " + state + ".tmp " + state + "\n")
			}
			out, err := runScript(parent, work, env, script.String())
			if err != nil {
				t.Fatalf("%s: %v; the last block run is the last >>> line:\n%s\nserver log (tail):\n%s", d.name, err, out, tail(logs.String(), 3000))
			}
			t.Logf("%s: %d examples ran:\n%s", d.name, ran, out)
		})
	}
}

// build compiles the server and the agent into dir, as `make build` names them.
func build(t *testing.T, dir string) {
	t.Helper()
	for _, cmd := range []string{"gale", "gale-agent"} {
		c := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "../../cmd/"+cmd)
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v: %s", cmd, err, out)
		}
	}
}

// runScript runs a bash script in dir, in a process group of its own that is killed with
// everything it left running (the README's agent) when t ends.
func runScript(t *testing.T, dir string, env []string, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var out proctest.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	return out.String(), err
}

// killUnder kills every process whose executable lies under dir: an agent's watchdog and main
// agent restart each other, so one may have started outside the process group killed.
func killUnder(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range procs {
		if target, err := os.Readlink(exe); err == nil && strings.HasPrefix(target, dir+"/") {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(exe))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// runBackground starts a bash script that keeps running (the server) until the test ends.
func runBackground(t *testing.T, dir string, env []string, script string) *proctest.Output {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	logs := &proctest.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return logs
}

func waitReady(t *testing.T, base string, logs *proctest.Output) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(base + "/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server the README starts is not ready within 60 s; its log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
