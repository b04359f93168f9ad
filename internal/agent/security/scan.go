package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// eicar is the antivirus test file's signature: a file that starts with it and holds nothing
// but white space after it, within 128 bytes, is the test file.
const eicar = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`

// Bounds of one scan.
const (
	maxScanFiles   = 2_000_000
	maxScanThreats = 1000
)

// quickPaths are what a quick scan covers: where users and downloads put files, and where
// malware is usually dropped.
var quickPaths = []string{"/root", "/home", "/tmp", "/var/tmp", "/dev/shm"}

// skipped are trees a full scan leaves out: kernel interfaces, not files.
var skipped = []string{"/proc", "/sys", "/dev", "/run"}

// scanPaths resolves what a scan covers.
func scanPaths(p agentproto.SecurityScan) ([]string, error) {
	switch p.ScanType {
	case agentproto.ScanQuick:
		return quickPaths, nil
	case agentproto.ScanFull:
		return []string{"/"}, nil
	case agentproto.ScanCustom:
		if len(p.Paths) == 0 || len(p.Paths) > 100 {
			return nil, errors.New("a custom scan names 1 to 100 paths")
		}
		out := make([]string, len(p.Paths))
		for i, path := range p.Paths {
			if !filepath.IsAbs(path) {
				return nil, fmt.Errorf("%q is not an absolute path", path)
			}
			out[i] = filepath.Clean(path)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown scan type %q: use quick, full or custom", p.ScanType)
}

// Scan looks for threats: with ClamAV's clamscan when it is installed, else with the built-in
// signatures (the EICAR test file). The built-in scan tells progress (when not nil) how many
// files it has looked at, every Options.ProgressEvery.
func (c *Collector) Scan(ctx context.Context, p agentproto.SecurityScan, progress func(filesScanned int)) (agentproto.SecurityScanResult, error) {
	paths, err := scanPaths(p)
	if err != nil {
		return agentproto.SecurityScanResult{}, err
	}
	if _, err := os.Stat(c.path("usr/bin/clamscan")); err == nil && c.o.Root == "/" {
		return c.clamscan(ctx, paths)
	}
	if progress == nil {
		progress = func(int) {}
	}
	return c.builtinScan(ctx, paths, progress)
}

func (c *Collector) builtinScan(ctx context.Context, paths []string, progress func(int)) (agentproto.SecurityScanResult, error) {
	res := agentproto.SecurityScanResult{Engine: "builtin", Threats: []agentproto.FoundThreat{}}
	reported := time.Now()
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: scan on
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if d.IsDir() {
				if (path != root && isSkipped(path)) || path == c.o.QuarantineDir {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if res.FilesScanned >= maxScanFiles || len(res.Threats) >= maxScanThreats {
				res.Truncated = true
				return filepath.SkipAll
			}
			res.FilesScanned++
			if t, ok := matchEICAR(path); ok {
				res.Threats = append(res.Threats, t)
			}
			if time.Since(reported) >= c.o.ProgressEvery {
				reported = time.Now()
				progress(res.FilesScanned)
			}
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func isSkipped(path string) bool {
	for _, s := range skipped {
		if path == s {
			return true
		}
	}
	return false
}

// matchEICAR reports the test file.
func matchEICAR(path string) (agentproto.FoundThreat, bool) {
	f, err := os.Open(path)
	if err != nil {
		return agentproto.FoundThreat{}, false
	}
	defer f.Close()
	head := make([]byte, 129)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if n > 128 || !bytes.HasPrefix(head, []byte(eicar)) || len(bytes.TrimSpace(head[len(eicar):])) != 0 {
		return agentproto.FoundThreat{}, false
	}
	sum := sha256.Sum256(head)
	return agentproto.FoundThreat{Name: "EICAR-Test-File", Category: "test", Severity: "low", FilePath: path,
		SHA256: hex.EncodeToString(sum[:]), Size: int64(n)}, true
}

// clamscan runs ClamAV over the paths and reads the files it reports.
func (c *Collector) clamscan(ctx context.Context, paths []string) (agentproto.SecurityScanResult, error) {
	res := agentproto.SecurityScanResult{Engine: "clamav", Threats: []agentproto.FoundThreat{}}
	args := []string{"--infected", "--recursive", "--stdout", "--no-summary", "--cross-fs=no"}
	for _, s := range skipped {
		args = append(args, "--exclude-dir=^"+s+"/")
	}
	args = append(args, "--")
	args = append(args, paths...)
	out, err := c.o.Command(ctx, "clamscan", args...)
	// clamscan exits 1 when it found something, 2 on errors (unreadable files among them).
	if err != nil && len(out) == 0 && ctx.Err() == nil {
		var exit interface{ ExitCode() int }
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			return res, fmt.Errorf("clamscan failed: %w", err)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutSuffix(sc.Text(), " FOUND")
		if !ok {
			continue
		}
		i := strings.LastIndex(line, ": ")
		if i < 0 {
			continue
		}
		path, name := line[:i], line[i+2:]
		t := agentproto.FoundThreat{Name: name, Category: "malware", Severity: "high", FilePath: path}
		if strings.Contains(strings.ToLower(name), "eicar") {
			t.Category, t.Severity = "test", "low"
		}
		if sum, size, err := fileSum(path); err == nil {
			t.SHA256, t.Size = sum, size
		}
		res.Threats = append(res.Threats, t)
		if len(res.Threats) >= maxScanThreats {
			res.Truncated = true
			break
		}
	}
	return res, nil
}

func fileSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// quarantined is what the quarantine keeps beside a file: where it was and how.
type quarantined struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
}

// Act carries out a threat action.
func (c *Collector) Act(p agentproto.ThreatAction) (agentproto.ThreatActionResult, error) {
	res := agentproto.ThreatActionResult{Action: p.Action, FilePath: p.FilePath}
	if !filepath.IsAbs(p.FilePath) || filepath.Clean(p.FilePath) != p.FilePath {
		return res, fmt.Errorf("%q is not a clean absolute path", p.FilePath)
	}
	sum := strings.ToLower(p.SHA256)
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return res, fmt.Errorf("%q is not a SHA-256 checksum", p.SHA256)
	}
	if strings.HasPrefix(p.FilePath, c.o.QuarantineDir+"/") {
		return res, errors.New("the file is inside the quarantine")
	}
	held := filepath.Join(c.o.QuarantineDir, sum)
	switch p.Action {
	case agentproto.ThreatQuarantine:
		got, _, err := fileSum(p.FilePath)
		if err != nil {
			return res, fmt.Errorf("the file cannot be read: %w", err)
		}
		if got != sum {
			return res, fmt.Errorf("the file changed since the scan (its SHA-256 is %s): nothing was moved", got)
		}
		info, err := os.Lstat(p.FilePath)
		if err != nil {
			return res, err
		}
		if err := os.MkdirAll(c.o.QuarantineDir, 0o700); err != nil {
			return res, err
		}
		if err := os.Chmod(c.o.QuarantineDir, 0o700); err != nil {
			return res, err
		}
		meta, _ := json.Marshal(quarantined{Path: p.FilePath, Mode: info.Mode().Perm()})
		if err := os.WriteFile(held+".json", meta, 0o600); err != nil {
			return res, err
		}
		if err := moveFile(p.FilePath, held, 0o600); err != nil {
			os.Remove(held + ".json")
			return res, fmt.Errorf("the file could not be moved into the quarantine: %w", err)
		}
		res.Location = held
		return res, nil
	case agentproto.ThreatRestore:
		var q quarantined
		meta, err := os.ReadFile(held + ".json")
		if err != nil || json.Unmarshal(meta, &q) != nil || q.Path != p.FilePath {
			return res, errors.New("the quarantine holds no such file")
		}
		if _, err := os.Lstat(p.FilePath); err == nil {
			return res, errors.New("a file exists where the quarantined one was: nothing was restored")
		}
		if err := moveFile(held, p.FilePath, q.Mode); err != nil {
			return res, fmt.Errorf("the file could not be restored: %w", err)
		}
		os.Remove(held + ".json")
		res.Location = p.FilePath
		return res, nil
	case agentproto.ThreatRemove:
		if _, err := os.Stat(held); err == nil {
			if err := os.Remove(held); err != nil {
				return res, err
			}
			os.Remove(held + ".json")
			return res, nil
		}
		got, _, err := fileSum(p.FilePath)
		if err != nil {
			return res, fmt.Errorf("neither the quarantine nor %s holds the file", p.FilePath)
		}
		if got != sum {
			return res, fmt.Errorf("the file changed since the scan (its SHA-256 is %s): nothing was removed", got)
		}
		return res, os.Remove(p.FilePath)
	}
	return res, fmt.Errorf("unknown action %q: use quarantine, restore or remove", p.Action)
}

// moveFile renames src to dst, copying across file systems, and sets dst's permissions.
func moveFile(src, dst string, mode fs.FileMode) error {
	if err := os.Rename(src, dst); err == nil {
		return os.Chmod(dst, mode)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return err
	}
	return os.Remove(src)
}
