package elevate

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"gale/internal/wire/agentproto"
)

func TestResolve(t *testing.T) {
	if p, err := resolve("id"); err != nil || !strings.HasSuffix(p, "/id") || !filepath.IsAbs(p) {
		t.Errorf("resolve(id) = %q, %v", p, err)
	}
	if _, err := resolve("./id"); err == nil {
		t.Error("a relative path was accepted")
	}
	if _, err := resolve("no-such-command-gale"); err == nil {
		t.Error("a missing command was accepted")
	}
	// A file others may change cannot be bound by its hash.
	f := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(f); err == nil || !strings.Contains(err.Error(), "writable by root only") {
		t.Errorf("a world-writable executable = %v", err)
	}
}

func TestGrantSweepAndRevoke(t *testing.T) {
	if _, err := exec.LookPath("visudo"); err != nil {
		t.Skip("needs visudo")
	}
	dir := t.TempDir()
	s := New(Options{SudoersDir: dir})
	id := uuid.NewString()
	exp := time.Now().Add(time.Hour)
	if err := s.grant(agentproto.ElevationDecision{RequestID: id, ExpiresAt: &exp}, "nobody", "/usr/bin/id"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "gale-"+id)
	body, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(body), "nobody ALL=(root) NOPASSWD: /usr/bin/id") {
		t.Fatalf("grant file = %q, %v", body, err)
	}
	if err := s.grant(agentproto.ElevationDecision{RequestID: uuid.NewString(), ExpiresAt: &exp}, "bad user", "/usr/bin/id"); err == nil {
		t.Error("an unsafe user name was written")
	}

	// An agent starting again drops the grants that expired meanwhile and keeps the others.
	old := uuid.NewString()
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if err := os.WriteFile(filepath.Join(dir, "gale-"+old), []byte(grantHeader+old+" expires="+past+"\nnobody ALL=(root) NOPASSWD: /usr/bin/id\n"),
		0o440); err != nil {
		t.Fatal(err)
	}
	s2 := New(Options{SudoersDir: dir})
	s2.sweep()
	if _, err := os.Stat(filepath.Join(dir, "gale-"+old)); !os.IsNotExist(err) {
		t.Error("an expired grant survived the sweep")
	}
	if _, err := os.Stat(file); err != nil {
		t.Error("a live grant was swept")
	}

	// The server's revocation removes it.
	raw, _ := json.Marshal(agentproto.ElevationDecision{RequestID: id, Decision: agentproto.ElevationRevoked})
	res := s2.onDecision(context.Background(), agentproto.Command{Type: agentproto.CommandElevationDecision, Payload: raw})
	if res.Status != agentproto.ResultCompleted || !strings.Contains(string(res.Result), `"grantRemoved":true`) {
		t.Errorf("revoke = %+v %s", res, res.Result)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Error("the revoked grant is still there")
	}
	// The agent's own timer removes a grant at its expiry.
	soon := time.Now().Add(200 * time.Millisecond)
	id3 := uuid.NewString()
	if err := s2.grant(agentproto.ElevationDecision{RequestID: id3, ExpiresAt: &soon}, "nobody", "/usr/bin/id"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "gale-"+id3)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired grant was not removed by the agent's timer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
