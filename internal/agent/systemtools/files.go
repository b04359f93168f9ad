package systemtools

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/shirou/gopsutil/v4/disk"

	"gale/internal/wire/agentproto"
)

// checkPath accepts an absolute path without ".." segments outside the denied paths and
// returns it cleaned.
func (t *Tools) checkPath(p string) (string, error) {
	switch {
	case p == "":
		return "", invalid("path is required")
	case strings.ContainsRune(p, 0):
		return "", invalid("path contains a NUL byte")
	case !filepath.IsAbs(p):
		return "", invalid("path must be absolute: %q", p)
	}
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r < utf8.RuneSelf && os.IsPathSeparator(byte(r)) }) {
		if seg == ".." {
			return "", invalid("path must not contain \"..\": %q", p)
		}
	}
	p = filepath.Clean(p)
	if t.denies(p) {
		return "", invalid("access to %s is refused on this agent", p)
	}
	return p, nil
}

// denies reports whether p, or where it leads through symbolic links, lies in a denied path.
func (t *Tools) denies(p string) bool {
	resolved := resolve(p)
	for _, d := range t.denied {
		if within(p, d) || within(resolved, d) || within(resolved, resolve(d)) {
			return true
		}
	}
	return false
}

// resolve follows symbolic links in p; for a path that does not exist yet it resolves the
// deepest existing parent.
func resolve(p string) string {
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// within reports whether p is dir or lies under it. Windows and macOS file systems usually
// ignore case, so the comparison does too there.
func within(p, dir string) bool {
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" {
		p, dir = strings.ToLower(p), strings.ToLower(dir)
	}
	if p == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(p, dir)
}

func fileError(p string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return &agentproto.CallError{Code: agentproto.ErrInsufficientSpace, Message: fmt.Sprintf("%s: the file system is full", p)}
	case errors.Is(err, fs.ErrNotExist):
		return notFound("%s does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		return failed("%s: permission denied", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return failed("%s: %v", p, pe.Err)
	}
	return failed("%s: %v", p, err)
}

// listDir lists a directory, directories first, then by name.
func (t *Tools) listDir(dir string) ([]agentproto.FileEntry, error) {
	dir, err := t.checkPath(dir)
	if err != nil {
		return nil, err
	}
	if info, err := os.Stat(dir); err != nil {
		return nil, fileError(dir, err)
	} else if !info.IsDir() {
		return nil, invalid("%s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fileError(dir, err)
	}
	names := userNames{}
	out := make([]agentproto.FileEntry, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, fileEntry(filepath.Join(dir, e.Name()), info, names))
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := out[i].Type == "directory", out[j].Type == "directory"
		if di != dj {
			return di
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func fileEntry(p string, info fs.FileInfo, names userNames) agentproto.FileEntry {
	e := agentproto.FileEntry{
		Name:       info.Name(),
		Path:       p,
		SizeBytes:  info.Size(),
		Mode:       lsMode(info.Mode()),
		ModifiedAt: info.ModTime().UTC(),
		Type:       "other",
	}
	switch {
	case info.Mode().IsRegular():
		e.Type = "file"
	case info.IsDir():
		e.Type = "directory"
	case info.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
	}
	if uid, ok := fileUID(info); ok {
		e.Owner = names.lookup(uid)
	}
	return e
}

// lsMode spells a mode the way ls -l does ("-rw-r--r--", "drwxrwxrwt"), which technicians
// read more easily than Go's own notation.
func lsMode(m fs.FileMode) string {
	b := []byte("----------")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		if m&(1<<uint(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	special := func(pos int, set bool, c byte) {
		if !set {
			return
		}
		if b[pos] == '-' {
			b[pos] = c - 'a' + 'A'
		} else {
			b[pos] = c
		}
	}
	special(3, m&fs.ModeSetuid != 0, 's')
	special(6, m&fs.ModeSetgid != 0, 's')
	special(9, m&fs.ModeSticky != 0, 't')
	return string(b)
}

// userNames caches uid → user name lookups within one call.
type userNames map[string]string

func (n userNames) lookup(uid string) string {
	if name, ok := n[uid]; ok {
		return name
	}
	name := uid
	if u, err := user.LookupId(uid); err == nil {
		name = u.Username
	}
	n[uid] = name
	return name
}

// openRegular opens a regular file for reading. It checks the type first so that opening a
// named pipe cannot block the agent.
func openRegular(p string) (*os.File, fs.FileInfo, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, nil, fileError(p, err)
	}
	if info.IsDir() {
		return nil, nil, invalid("%s is a directory", p)
	}
	if !info.Mode().IsRegular() {
		return nil, nil, invalid("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, fileError(p, err)
	}
	return f, info, nil
}

// readFile returns up to Limit bytes from Offset, as text when they are valid UTF-8.
func (t *Tools) readFile(a agentproto.FileReadArgs) (agentproto.FileContent, error) {
	p, err := t.checkPath(a.Path)
	if err != nil {
		return agentproto.FileContent{}, err
	}
	if a.Offset < 0 || a.Limit < 0 {
		return agentproto.FileContent{}, invalid("offset and limit must not be negative")
	}
	limit := a.Limit
	if limit == 0 || limit > agentproto.MaxFileReadBytes {
		limit = agentproto.MaxFileReadBytes
	}
	f, info, err := openRegular(p)
	if err != nil {
		return agentproto.FileContent{}, err
	}
	defer f.Close()
	// Read one byte more than asked to learn whether more remains: files under /proc report
	// a size of zero, so the size cannot tell.
	buf, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, a.Offset, 1<<62), limit+1))
	if err != nil {
		return agentproto.FileContent{}, fileError(p, err)
	}
	truncated := int64(len(buf)) > limit
	if truncated {
		buf = buf[:limit]
	}
	out := agentproto.FileContent{Path: p, SizeBytes: info.Size(), Offset: a.Offset, Truncated: truncated}
	if text, ok := asText(buf, truncated); ok {
		out.Encoding, out.Content = "utf-8", string(text)
	} else {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(buf)
	}
	return out, nil
}

// asText returns b when it is text: valid UTF-8 without NUL bytes. When the read stopped
// early, a character cut at the end is dropped so the next read starts on it.
func asText(b []byte, cut bool) ([]byte, bool) {
	if bytes.IndexByte(b, 0) >= 0 {
		return nil, false
	}
	if utf8.Valid(b) {
		return b, true
	}
	if cut {
		for k := 1; k < utf8.UTFMax && k < len(b); k++ {
			head, tail := b[:len(b)-k], b[len(b)-k:]
			if utf8.RuneStart(tail[0]) && !utf8.FullRune(tail) && utf8.Valid(head) {
				return head, true
			}
		}
	}
	return nil, false
}

// downloadFile returns a whole file, base64, with its SHA-256.
func (t *Tools) downloadFile(path string) (agentproto.FileContent, error) {
	p, err := t.checkPath(path)
	if err != nil {
		return agentproto.FileContent{}, err
	}
	f, info, err := openRegular(p)
	if err != nil {
		return agentproto.FileContent{}, err
	}
	defer f.Close()
	tooLarge := invalid("file is larger than %d MiB", agentproto.MaxFileDownloadBytes>>20)
	if info.Size() > agentproto.MaxFileDownloadBytes {
		return agentproto.FileContent{}, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, agentproto.MaxFileDownloadBytes+1))
	if err != nil {
		return agentproto.FileContent{}, fileError(p, err)
	}
	if len(data) > agentproto.MaxFileDownloadBytes {
		return agentproto.FileContent{}, tooLarge // it grew while being read
	}
	sum := sha256.Sum256(data)
	return agentproto.FileContent{
		Path:      p,
		SizeBytes: int64(len(data)),
		Encoding:  "base64",
		Content:   base64.StdEncoding.EncodeToString(data),
		SHA256:    hex.EncodeToString(sum[:]),
	}, nil
}

// uploadFile writes a file atomically: a temporary file in the same directory, renamed over
// the target, so a reader never sees half a file.
func (t *Tools) uploadFile(a agentproto.FileUploadArgs) (agentproto.FileEntry, error) {
	if len(a.Content) > base64.StdEncoding.EncodedLen(agentproto.MaxFileUploadBytes) {
		return agentproto.FileEntry{}, invalid("content is larger than %d MiB", agentproto.MaxFileUploadBytes>>20)
	}
	target, err := t.prepareWrite(a.Path, a.Mode, a.Overwrite)
	if err != nil {
		return agentproto.FileEntry{}, err
	}
	data, err := base64.StdEncoding.DecodeString(a.Content)
	if err != nil {
		return agentproto.FileEntry{}, invalid("content is not valid base64: %v", err)
	}
	if len(data) > agentproto.MaxFileUploadBytes {
		return agentproto.FileEntry{}, invalid("content is larger than %d MiB", agentproto.MaxFileUploadBytes>>20)
	}
	if err := t.checkSpace(target.path, int64(len(data))); err != nil {
		return agentproto.FileEntry{}, err
	}
	if _, err := target.write(bytes.NewReader(data), sha256.New()); err != nil {
		return agentproto.FileEntry{}, fileError(target.path, err)
	}
	return target.entry()
}

// spaceReserve is what a file write leaves free on its file system, so that an upload cannot
// fill the disk the machine (and the agent's own state) needs.
const spaceReserve = 64 << 20

// checkSpace refuses a write of size bytes to path that would leave less than spaceReserve
// free on its file system. When the free space cannot be read the write goes ahead: a full
// disk then fails it with the same code.
func (t *Tools) checkSpace(path string, size int64) error {
	free, err := t.freeSpace(filepath.Dir(path))
	if err != nil || uint64(size)+spaceReserve <= free {
		return nil
	}
	return &agentproto.CallError{Code: agentproto.ErrInsufficientSpace, Message: fmt.Sprintf(
		"%s has %d bytes free; writing %d bytes there would leave less than the %d MiB kept free", filepath.Dir(path), free, size, spaceReserve>>20)}
}

func freeSpace(dir string) (uint64, error) {
	u, err := disk.Usage(dir)
	if err != nil {
		return 0, err
	}
	return u.Free, nil
}

// writeTarget is a checked destination of a file write.
type writeTarget struct {
	path string
	mode fs.FileMode
	// old is the file being replaced, nil for a new one: the new file takes its owner.
	old fs.FileInfo
}

// prepareWrite checks that path may be written: its directory exists, and it is no
// directory, link or other special file, nor an existing file unless overwrite is set. mode
// is octal permissions ("0644"); empty keeps a replaced file's, or 0644 for a new one.
func (t *Tools) prepareWrite(path, mode string, overwrite bool) (writeTarget, error) {
	p, err := t.checkPath(path)
	if err != nil {
		return writeTarget{}, err
	}
	target := writeTarget{path: p, mode: 0o644}
	if mode != "" {
		m, err := strconv.ParseUint(mode, 8, 32)
		if err != nil || m > 0o777 {
			return writeTarget{}, invalid("mode must be octal permissions such as 0644, not %q", mode)
		}
		target.mode = fs.FileMode(m)
	}
	dir := filepath.Dir(p)
	if info, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return writeTarget{}, notFound("directory %s does not exist", dir)
		}
		return writeTarget{}, fileError(dir, err)
	} else if !info.IsDir() {
		return writeTarget{}, invalid("%s is not a directory", dir)
	}
	switch info, err := os.Lstat(p); {
	case err == nil && info.IsDir():
		return writeTarget{}, invalid("%s is a directory", p)
	case err == nil && !info.Mode().IsRegular():
		// Renaming over a symbolic link would replace the link, not the file it names.
		return writeTarget{}, invalid("%s is not a regular file", p)
	case err == nil && !overwrite:
		return writeTarget{}, invalid("%s already exists; set overwrite to replace it", p)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return writeTarget{}, fileError(p, err)
	case err == nil:
		// A replaced file keeps its owner, and its permissions unless new ones are given.
		target.old = info
		if mode == "" {
			target.mode = info.Mode().Perm()
		}
	}
	return target, nil
}

// write replaces the target with what r yields, through a temporary file in the same
// directory that is synced and then renamed over it: a failed or cut-off write leaves no
// file behind, and a reader never sees half of one. Every byte written also goes to sum.
// It returns how many bytes were written.
func (w writeTarget) write(r io.Reader, sum io.Writer) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(w.path), "."+filepath.Base(w.path)+".gale-*")
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	buf := make([]byte, copyBufferSize)
	n, err := io.CopyBuffer(io.MultiWriter(tmp, sum), r, buf)
	if err != nil {
		return n, err
	}
	// Chmod, unlike the mode given at creation, is not narrowed by the umask.
	if err := tmp.Chmod(w.mode); err != nil {
		return n, err
	}
	if w.old != nil {
		if err := chownLike(tmp, w.old); err != nil {
			return n, err
		}
	}
	if err := tmp.Sync(); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), w.path); err != nil {
		return n, fmt.Errorf("replacing the file: %w", err)
	}
	done = true
	return n, nil
}

// entry describes the target once written.
func (w writeTarget) entry() (agentproto.FileEntry, error) {
	info, err := os.Lstat(w.path)
	if err != nil {
		return agentproto.FileEntry{}, fileError(w.path, err)
	}
	return fileEntry(w.path, info, userNames{}), nil
}
