package script

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

func TestRunScriptReportsOutputExitCodeAndTruncation(t *testing.T) {
	ctx := context.Background()
	res := run(ctx, "", agentproto.RunScript{Language: "bash", Script: `echo "out $GREETING $1"; echo err >&2; exit 4`,
		Args: []string{"arg1"}, Env: map[string]string{"GREETING": "hi"}, MaxOutputBytes: 1 << 20})
	if res.Status != agentproto.ResultFailed || res.ExitCode == nil || *res.ExitCode != 4 || res.Stdout != "out hi arg1\n" ||
		res.Stderr != "err\n" || res.Truncated {
		t.Fatalf("result = %+v", res)
	}
	res = run(ctx, "", agentproto.RunScript{Language: "sh", Script: "yes | head -c 5000", MaxOutputBytes: 100})
	if res.Status != agentproto.ResultCompleted || len(res.Stdout) != 100 || !res.Truncated || *res.ExitCode != 0 {
		t.Fatalf("capped result: status %s, %d bytes, truncated %v", res.Status, len(res.Stdout), res.Truncated)
	}
	if res := run(ctx, "", agentproto.RunScript{Language: "cmd", Script: "dir"}); res.Status != agentproto.ResultFailed || res.Error == "" {
		t.Fatalf("cmd on Linux = %+v", res)
	}
}

func TestRunScriptTimeoutKillsItsChildren(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "late")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	res := run(ctx, "", agentproto.RunScript{Language: "sh", Script: "(sleep 3; touch " + marker + ") & sleep 30"})
	if res.Status != agentproto.ResultTimedOut || time.Since(start) > 10*time.Second {
		t.Fatalf("timed-out script = %+v after %s", res, time.Since(start))
	}
	time.Sleep(3500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a child of the timed-out script kept running")
	}
}

// Output that is not text arrives exactly, in base64; text stays text.
func TestRunScriptCarriesBinaryOutputExactly(t *testing.T) {
	res := run(context.Background(), "", agentproto.RunScript{Language: "sh", Script: `printf 'a\000b'; printf 'ok' >&2`})
	if res.Status != agentproto.ResultCompleted || res.StdoutEncoding != agentproto.OutputBase64 || res.Stdout != "YQBi" ||
		res.StderrEncoding != "" || res.Stderr != "ok" {
		t.Fatalf("result = %+v", res)
	}
}
