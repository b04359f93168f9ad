package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gale/internal/testkit/apptest"
)

// maxAgentRSS is the resident memory the agent may reach while moving a file of any size.
const maxAgentRSS = 50 << 20

// transferSize is 1 GiB with GALE_E2E_LARGE=1 (and without -short), else 64 MiB so that the
// suite stays fast.
func transferSize() int64 {
	if os.Getenv("GALE_E2E_LARGE") == "1" && !testing.Short() {
		return 1 << 30
	}
	return 64 << 20
}

// TestFileTransfersStreamWithFlatAgentMemory downloads and uploads a large file through a
// real agent and checks the bytes arrive intact while the agent's memory stays flat.
func TestFileTransfersStreamWithFlatAgentMemory(t *testing.T) {
	node := apptest.New(t)
	agent := startStreamAgent(t, node)
	admin := node.Admin()
	size := transferSize()
	dir := t.TempDir()
	src := filepath.Join(dir, "source.bin")
	want := writeRandomFile(t, src, size)
	peak := watchRSS(t, agent.cmd.Process.Pid)

	files := node.Server.URL + "/api/v1/system-tools/devices/" + agent.deviceID + "/files"
	start := time.Now()
	req, _ := http.NewRequest(http.MethodGet, files+"/download?path="+url.QueryEscape(src), nil)
	req.Header.Set("Authorization", "Bearer "+admin.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	n, err := io.Copy(sum, res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("download: status %d, %d bytes, %v", res.StatusCode, n, err)
	}
	down := time.Since(start)
	if got := hex.EncodeToString(sum.Sum(nil)); got != want || n != size {
		t.Fatalf("downloaded %d bytes with SHA-256 %s, want %d with %s", n, got, size, want)
	}
	if res.Header.Get("Content-Length") != strconv.FormatInt(size, 10) || res.Header.Get("X-Checksum-Sha256") != want {
		t.Errorf("download headers = %v", res.Header)
	}
	if cd := res.Header.Get("Content-Disposition"); !strings.Contains(cd, "source.bin") {
		t.Errorf("Content-Disposition = %q", cd)
	}

	dst := filepath.Join(dir, "copy.bin")
	body, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	start = time.Now()
	req, _ = http.NewRequest(http.MethodPost, files+"/upload?mode=0600&path="+url.QueryEscape(dst), body)
	req.Header.Set("Authorization", "Bearer "+admin.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.ContentLength = size
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	up := time.Since(start)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upload: status %d: %s", res.StatusCode, answer)
	}
	var entry struct {
		SizeBytes int64  `json:"sizeBytes"`
		Mode      string `json:"mode"`
	}
	if err := json.Unmarshal(answer, &entry); err != nil || entry.SizeBytes != size || entry.Mode != "-rw-------" {
		t.Errorf("upload answer = %s (%v)", answer, err)
	}
	if got := fileSHA256(t, dst); got != want {
		t.Fatalf("uploaded file's SHA-256 = %s, want %s", got, want)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".copy.bin.gale-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	hwm := statusKiB(agent.cmd.Process.Pid, "VmHWM") << 10
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	t.Logf("%.0f MiB: download %.2fs (%.0f MiB/s), upload %.2fs (%.0f MiB/s); agent peak RSS sampled %.1f MiB, VmHWM %.1f MiB",
		mib(size), down.Seconds(), mib(size)/down.Seconds(), up.Seconds(), mib(size)/up.Seconds(), mib(peak.Load()), mib(hwm))
	if hwm > maxAgentRSS {
		t.Errorf("the agent's peak resident memory was %.1f MiB, want under %d MiB", mib(hwm), maxAgentRSS>>20)
	}
}

// writeRandomFile writes size pseudo-random bytes to p, in chunks, and returns their SHA-256.
func writeRandomFile(t *testing.T, p string, size int64) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.NewChaCha8([32]byte{1})
	sum := sha256.New()
	chunk := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(chunk)) {
		_, _ = rng.Read(chunk)
		part := chunk[:min(int64(len(chunk)), left)]
		sum.Write(part)
		if _, err := f.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// watchRSS samples the process's resident memory until the test ends and keeps the highest.
func watchRSS(t *testing.T, pid int) *atomic.Int64 {
	peak := &atomic.Int64{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if rss := statusKiB(pid, "VmRSS") << 10; rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return peak
}

// statusKiB reads a field of /proc/<pid>/status, in KiB; 0 when it cannot.
func statusKiB(pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(raw) {
		if rest, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}
