//go:build !windows

package script

import (
	"context"
	"os"
	"strings"
	"testing"

	"gale/internal/wire/agentproto"
)

func TestRunAsUserRunsAsTheConsoleUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	saved := consoleUser
	t.Cleanup(func() { consoleUser = saved })
	ctx := context.Background()

	consoleUser = func(context.Context) (string, error) { return "nobody", nil }
	res := run(ctx, "", agentproto.RunScript{Language: "sh", Script: `id -un; echo "$HOME $USER"; touch ./mine && echo wrote`,
		RunAs: agentproto.RunAsUser})
	if res.Status != agentproto.ResultCompleted || res.Stdout != "nobody\n/nonexistent nobody\nwrote\n" {
		t.Fatalf("run as the console user = %+v", res)
	}
	res = run(ctx, "", agentproto.RunScript{Language: "sh", Script: "id -un", RunAs: agentproto.RunAsSystem})
	if res.Stdout != "root\n" {
		t.Fatalf("run as system = %+v", res)
	}

	consoleUser = func(context.Context) (string, error) { return "", nil }
	res = run(ctx, "", agentproto.RunScript{Language: "sh", Script: "id -un", RunAs: agentproto.RunAsUser})
	if res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "no user is logged in") || res.ExitCode != nil {
		t.Fatalf("run as the console user with nobody logged in = %+v", res)
	}
	consoleUser = func(context.Context) (string, error) { return "no-such-user-here", nil }
	if res = run(ctx, "", agentproto.RunScript{Language: "sh", Script: "id -un", RunAs: agentproto.RunAsUser}); res.Status != agentproto.ResultFailed {
		t.Fatalf("run as an unknown user = %+v", res)
	}
}

func TestConsoleLoginsAreLocalOnes(t *testing.T) {
	for _, tc := range []struct {
		terminal, host string
		local          bool
	}{{"tty1", "", true}, {":0", "", true}, {"seat0", ":0", true}, {"pts/0", "192.0.2.4", false}, {"pts/1", "", false}} {
		if got := local(tc.terminal, tc.host); got != tc.local {
			t.Errorf("local(%q, %q) = %v", tc.terminal, tc.host, got)
		}
	}
}
