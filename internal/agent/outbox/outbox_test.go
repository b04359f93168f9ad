package outbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T, dir string, l Limits) *Outbox {
	t.Helper()
	b, err := Open(dir, l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func payloads(t *testing.T, b *Outbox) []string {
	t.Helper()
	es, err := b.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Kind+":"+string(e.Payload))
	}
	return out
}

func TestKeepsOrderAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, Limits{})
	for _, p := range []string{"a", "b", "c"} {
		if _, err := b.Put("result", p); err != nil {
			t.Fatal(err)
		}
	}
	es, _ := b.Entries()
	if err := b.Remove(es[1].ID); err != nil {
		t.Fatal(err)
	}
	again := open(t, dir, Limits{})
	if got := strings.Join(payloads(t, again), " "); got != `result:"a" result:"c"` {
		t.Fatalf("after reopen = %s", got)
	}
	if _, err := again.Put("heartbeat", "d"); err != nil {
		t.Fatal(err)
	}
	if got := payloads(t, again); len(got) != 3 || got[2] != `heartbeat:"d"` {
		t.Fatalf("a new entry after reopen is not last: %v", got)
	}
}

func TestDropsTheOldestPastTheCountAndSize(t *testing.T) {
	b := open(t, t.TempDir(), Limits{MaxEntries: 3})
	for _, p := range []string{"1", "2", "3", "4", "5"} {
		if _, err := b.Put("k", p); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(payloads(t, b), " "); got != `k:"3" k:"4" k:"5"` {
		t.Fatalf("count-bounded outbox = %s", got)
	}

	// Each entry is {"kind":"k","payload":"xxxxxxxxxx"}: 35 bytes; 100 bytes hold two.
	small := open(t, t.TempDir(), Limits{MaxBytes: 100})
	for _, p := range []string{"aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"} {
		if _, err := small.Put("k", p); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(payloads(t, small), " "); got != `k:"bbbbbbbbbb" k:"cccccccccc"` {
		t.Fatalf("size-bounded outbox = %s", got)
	}
	if _, err := small.Put("k", strings.Repeat("x", 200)); err == nil {
		t.Fatal("an entry larger than the outbox was kept")
	}
}

func TestDropsEntriesPastTheirAge(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, Limits{MaxAge: time.Hour})
	now := time.Now()
	b.now = func() time.Time { return now.Add(-2 * time.Hour) }
	if _, err := b.Put("k", "old"); err != nil {
		t.Fatal(err)
	}
	b.now = func() time.Time { return now }
	if _, err := b.Put("k", "new"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(payloads(t, b), " "); got != `k:"new"` {
		t.Fatalf("entries = %s; want the old one dropped", got)
	}
}

func TestWritesAreAtomic(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, Limits{})
	if _, err := b.Put("k", "whole"); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of writes leaves: a temporary file, and a damaged entry.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte(`{"kind":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.json"), []byte(`{"kind":`), 0o600); err != nil {
		t.Fatal(err)
	}
	again := open(t, dir, Limits{})
	if got := strings.Join(payloads(t, again), " "); got != `k:"whole"` {
		t.Fatalf("entries = %s", got)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 {
		t.Fatalf("left in the outbox directory: %v", left)
	}
}
