package thirdparty

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"

	"gale/internal/wire/agentproto"
)

// RunQueued runs the queued smoke tests one after another, each claimed by a conditional
// update so that two nodes never run one twice, and fails those left running by a node that
// stopped.
func (s *Service) RunQueued(ctx context.Context) error {
	if err := s.failInterrupted(ctx); err != nil {
		return err
	}
	for ctx.Err() == nil {
		t, v, ok, err := s.claim(ctx)
		if err != nil || !ok {
			return err
		}
		size, err := s.check(ctx, v)
		if err := s.finish(ctx, t, v, size, err); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) failInterrupted(ctx context.Context) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `UPDATE third_party_tests SET status = $1, message = $2, finished_at = $3
			WHERE status = $4 AND started_at < $5`, TestFailed, "the test was interrupted (the server running it stopped); queue it again",
			now, TestRunning, now.Add(-staleAfter)); err != nil {
			return fmt.Errorf("fail interrupted smoke tests: %w", err)
		}
		return nil
	})
}

// claim takes the oldest queued test, with the version it tests.
func (s *Service) claim(ctx context.Context) (SmokeTest, Version, bool, error) {
	var t SmokeTest
	var v Version
	found := false
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM third_party_tests WHERE status = $1 ORDER BY created_at, id LIMIT 1`, TestQueued).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a queued smoke test: %w", err)
		}
		t, err = scanTest(tx.QueryRowContext(ctx, `UPDATE third_party_tests SET status = $1, started_at = $2 WHERE id = $3 AND status = $4
			RETURNING `+testColumns, TestRunning, s.clock.Now(), id, TestQueued))
		if errors.Is(err, sql.ErrNoRows) {
			return nil // another node took it
		}
		if err != nil {
			return fmt.Errorf("claim smoke test %s: %w", id, err)
		}
		err = tx.QueryRowContext(ctx, `SELECT version, download_url, sha256, file_type FROM third_party_versions
			WHERE package_id = $1 AND version = $2`, t.PackageID, t.Version).Scan(&v.Version, &v.DownloadURL, &v.SHA256, &v.FileType)
		if errors.Is(err, sql.ErrNoRows) {
			// The version was removed after the test was queued: the test fails with that.
			v.Version = t.Version
			found = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the version of smoke test %s: %w", t.ID, err)
		}
		found = true
		return nil
	})
	return t, v, found, err
}

// check downloads a version's installer, bounded, and checks its checksum and file type; it
// returns the size read.
func (s *Service) check(ctx context.Context, v Version) (int64, error) {
	if v.DownloadURL == "" {
		return 0, errors.New("the entry no longer lists this version")
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.DownloadURL, nil)
	if err != nil {
		return 0, fmt.Errorf("the download address is unusable: %w", err)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("the download failed: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("the download failed: the server answered %s", res.Status)
	}
	h := sha256.New()
	sniff := &sniffer{}
	n, err := io.Copy(io.MultiWriter(h, sniff), io.LimitReader(res.Body, s.opts.MaxBytes+1))
	switch {
	case err != nil:
		return n, fmt.Errorf("the download broke off after %d bytes: %w", n, err)
	case n > s.opts.MaxBytes:
		return n, fmt.Errorf("the installer is larger than the %d bytes a smoke test downloads", s.opts.MaxBytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != v.SHA256 {
		return n, fmt.Errorf("checksum mismatch: the catalog says %s, the download is %s", v.SHA256, got)
	}
	if !sniff.is(v.FileType) {
		return n, fmt.Errorf("the download is not a %s installer (its first bytes are %q)", v.FileType, sniff.head)
	}
	return n, nil
}

// finish records a test's outcome; a passing test marks its version platform-tested.
func (s *Service) finish(ctx context.Context, t SmokeTest, v Version, size int64, failure error) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		status, msg := TestPassed, fmt.Sprintf("the installer downloaded (%d bytes), its checksum and %s file type are right", size, v.FileType)
		if failure != nil {
			status, msg = TestFailed, failure.Error()
		}
		res, err := tx.ExecContext(ctx, `UPDATE third_party_tests SET status = $1, message = $2, size_bytes = $3, finished_at = $4
			WHERE id = $5 AND status = $6`, status, msg, size, now, t.ID, TestRunning)
		if err != nil {
			return fmt.Errorf("record smoke test %s: %w", t.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 || failure != nil {
			return nil
		}
		// Only the installer tested is marked: a version changed meanwhile keeps its mark off.
		if _, err := tx.ExecContext(ctx, `UPDATE third_party_versions SET platform_tested = $1, tested_at = $2
			WHERE package_id = $3 AND version = $4 AND download_url = $5 AND sha256 = $6`, true, now, t.PackageID, v.Version,
			v.DownloadURL, v.SHA256); err != nil {
			return fmt.Errorf("mark version %s of %s tested: %w", v.Version, t.PackageID, err)
		}
		return nil
	})
}

// sniffer keeps the first and the last bytes of what passes through, which the installer
// formats are recognized by.
type sniffer struct {
	head []byte
	tail []byte
}

const sniffLen = 512

func (s *sniffer) Write(p []byte) (int, error) {
	if room := sniffLen - len(s.head); room > 0 {
		s.head = append(s.head, p[:min(room, len(p))]...)
	}
	s.tail = append(s.tail, p[max(0, len(p)-sniffLen):]...)
	if len(s.tail) > sniffLen {
		s.tail = s.tail[len(s.tail)-sniffLen:]
	}
	return len(p), nil
}

// is reports whether the bytes seen are of an installer of the file type: a Debian archive
// (an ar archive whose first member is debian-binary), an RPM lead, an MSI's compound file, a
// PE executable, a xar archive (pkg), or a disk image whose last 512 bytes start "koly".
func (s *sniffer) is(fileType string) bool {
	switch fileType {
	case agentproto.FileDeb:
		return bytes.HasPrefix(s.head, []byte("!<arch>\ndebian-binary"))
	case agentproto.FileRPM:
		return bytes.HasPrefix(s.head, []byte{0xed, 0xab, 0xee, 0xdb})
	case agentproto.FileMSI:
		return bytes.HasPrefix(s.head, []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1})
	case agentproto.FileExe:
		return bytes.HasPrefix(s.head, []byte("MZ"))
	case agentproto.FilePkg:
		return bytes.HasPrefix(s.head, []byte("xar!"))
	case agentproto.FileDmg:
		return len(s.tail) == sniffLen && bytes.HasPrefix(s.tail, []byte("koly"))
	}
	return false
}
