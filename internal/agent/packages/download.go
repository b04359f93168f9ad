package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// maxDownload caps a package file whatever size the server announces.
const maxDownload = 2 << 30

// httpFetch downloads an absolute http or https address.
func httpFetch(ctx context.Context, raw string) (io.ReadCloser, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("cannot download %q: only http and https addresses are supported", raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: time.Hour}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("the download answered %s", resp.Status)
	}
	return resp.Body, nil
}

// download streams the package file into the work directory while hashing it, and checks
// its size and SHA-256. It returns the file's path whenever a file was created, so the
// caller removes it even when the check failed.
func (m *Manager) download(ctx context.Context, p agentproto.SoftwareInstall) (string, string, error) {
	want := strings.ToLower(p.SHA256)
	if len(want) != sha256.Size*2 {
		return "", "", fmt.Errorf("%q is not a SHA-256 checksum", p.SHA256)
	}
	if _, err := hex.DecodeString(want); err != nil {
		return "", "", fmt.Errorf("%q is not a SHA-256 checksum", p.SHA256)
	}
	limit := int64(maxDownload)
	if p.SizeBytes > 0 && p.SizeBytes < limit {
		limit = p.SizeBytes
	}
	body, err := m.o.Fetch(ctx, p.URL)
	if err != nil {
		return "", "", fmt.Errorf("download failed: %w", err)
	}
	defer body.Close()
	f, err := os.CreateTemp(m.o.WorkDir, "gale-package-*."+p.FileType)
	if err != nil {
		return "", "", fmt.Errorf("cannot store the download: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return f.Name(), "", ctx.Err()
	case err != nil:
		return f.Name(), "", fmt.Errorf("download failed: %w", err)
	case n > limit:
		return f.Name(), "", fmt.Errorf("the download is larger than %d bytes", limit)
	case p.SizeBytes > 0 && n != p.SizeBytes:
		return f.Name(), "", fmt.Errorf("the download is %d bytes, expected %d", n, p.SizeBytes)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return f.Name(), got, errors.New("checksum mismatch: expected " + want + ", got " + got)
	}
	return f.Name(), got, nil
}
