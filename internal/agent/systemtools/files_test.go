package systemtools

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gale/internal/wire/agentproto"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestFilesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	p := filepath.Join(dir, "hello.txt")
	content := "héllo, world\n"

	up := result[agentproto.FileEntry](t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: p, Content: b64(content), Mode: "0640"}))
	if up.Type != "file" || up.SizeBytes != int64(len(content)) || up.Path != p {
		t.Errorf("upload entry %+v", up)
	}
	if runtime.GOOS != "windows" && up.Mode != "-rw-r-----" {
		t.Errorf("mode %q, want -rw-r-----", up.Mode)
	}

	// A second upload without overwrite is refused and leaves the file alone.
	wantCode(t, call(t, tools, agentproto.MethodFileUpload, agentproto.FileUploadArgs{Path: p, Content: b64("other")}), agentproto.ErrInvalid)
	if got, _ := os.ReadFile(p); string(got) != content {
		t.Fatalf("file changed to %q", got)
	}

	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.bin"), []byte{0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	list := result[[]agentproto.FileEntry](t, call(t, tools, agentproto.MethodFileList, agentproto.PathArgs{Path: dir}))
	var names []string
	for _, e := range list {
		names = append(names, e.Name+":"+e.Type)
	}
	if got := strings.Join(names, ","); got != "sub:directory,a.bin:file,hello.txt:file" {
		t.Errorf("list = %s", got)
	}
	if runtime.GOOS != "windows" && (list[0].Mode[0] != 'd' || list[0].Owner == "") {
		t.Errorf("directory entry %+v", list[0])
	}

	read := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: p}))
	if read.Encoding != "utf-8" || read.Content != content || read.Truncated || read.SizeBytes != int64(len(content)) {
		t.Errorf("read %+v", read)
	}

	dl := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileDownload, agentproto.PathArgs{Path: p}))
	sum := sha256.Sum256([]byte(content))
	if dl.Encoding != "base64" || dl.Content != b64(content) || dl.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("download %+v", dl)
	}

	// Overwrite keeps the permissions when none are given.
	result[agentproto.FileEntry](t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: p, Content: b64("new"), Overwrite: true}))
	if got, _ := os.ReadFile(p); string(got) != "new" {
		t.Errorf("after overwrite: %q", got)
	}
	if info, _ := os.Stat(p); runtime.GOOS != "windows" && info.Mode().Perm() != 0o640 {
		t.Errorf("mode after overwrite %v", info.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*gale-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestFileReadParts(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abcdéf"), 0o644); err != nil { // é is two bytes
		t.Fatal(err)
	}
	part := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: p, Offset: 1, Limit: 2}))
	if part.Content != "bc" || part.Offset != 1 || !part.Truncated || part.SizeBytes != 7 {
		t.Errorf("part %+v", part)
	}
	// A read that would cut é in half stops before it.
	cut := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: p, Offset: 2, Limit: 3}))
	if cut.Encoding != "utf-8" || cut.Content != "cd" || !cut.Truncated {
		t.Errorf("cut %+v", cut)
	}
	tail := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: p, Offset: 4}))
	if tail.Content != "éf" || tail.Truncated {
		t.Errorf("tail %+v", tail)
	}

	bin := []byte{0x7f, 'E', 'L', 'F', 0, 0xff, 0xfe}
	pb := filepath.Join(dir, "bin")
	if err := os.WriteFile(pb, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	rb := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: pb}))
	got, err := base64.StdEncoding.DecodeString(rb.Content)
	if rb.Encoding != "base64" || err != nil || !bytes.Equal(got, bin) {
		t.Errorf("binary read %+v", rb)
	}

	wantCode(t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: dir}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: p, Offset: -1}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: filepath.Join(dir, "nope")}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodFileList, agentproto.PathArgs{Path: filepath.Join(dir, "nope")}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodFileList, agentproto.PathArgs{Path: p}), agentproto.ErrInvalid)
}

func TestFilePathChecks(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	for _, p := range []string{
		"",
		"relative/file",
		dir + "/sub/../../etc/passwd",
		dir + "/..",
		dir + "/a\x00b",
	} {
		wantCode(t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: p}), agentproto.ErrInvalid)
		wantCode(t, call(t, tools, agentproto.MethodFileUpload, agentproto.FileUploadArgs{Path: p, Content: b64("x")}), agentproto.ErrInvalid)
	}
	wantCode(t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: filepath.Join(dir, "missing", "f"), Content: b64("x")}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: filepath.Join(dir, "f"), Content: "not base64!"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: filepath.Join(dir, "f"), Content: b64("x"), Mode: "rw-r--r--"}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: dir, Content: b64("x"), Overwrite: true}), agentproto.ErrInvalid)
}

func TestDeniedPaths(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "agent")
	other := filepath.Join(dir, "other")
	for _, d := range []string{conf, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "secret"), []byte("token"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tools := New(Options{ConfigDir: conf, DeniedPaths: []string{other}})

	for _, d := range []string{conf, other} {
		secret := filepath.Join(d, "secret")
		wantCode(t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: secret}), agentproto.ErrInvalid)
		wantCode(t, call(t, tools, agentproto.MethodFileDownload, agentproto.PathArgs{Path: secret}), agentproto.ErrInvalid)
		wantCode(t, call(t, tools, agentproto.MethodFileList, agentproto.PathArgs{Path: d}), agentproto.ErrInvalid)
		wantCode(t, call(t, tools, agentproto.MethodFileUpload,
			agentproto.FileUploadArgs{Path: filepath.Join(d, "new"), Content: b64("x")}), agentproto.ErrInvalid)
		wantCode(t, call(t, tools, agentproto.MethodFileUpload,
			agentproto.FileUploadArgs{Path: secret, Content: b64("x"), Overwrite: true}), agentproto.ErrInvalid)
	}
	if got, _ := os.ReadFile(filepath.Join(conf, "secret")); string(got) != "token" {
		t.Errorf("secret changed to %q", got)
	}
	// The parent stays listable, and a name that only starts like the denied one is allowed.
	result[[]agentproto.FileEntry](t, call(t, tools, agentproto.MethodFileList, agentproto.PathArgs{Path: dir}))
	result[agentproto.FileEntry](t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: conf + "-notes", Content: b64("x")}))

	if runtime.GOOS == "windows" {
		return
	}
	// A symbolic link does not lead around the refusal.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(conf, link); err != nil {
		t.Fatal(err)
	}
	wantCode(t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: filepath.Join(link, "secret")}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: filepath.Join(link, "new"), Content: b64("x")}), agentproto.ErrInvalid)

	// An upload does not replace a symbolic link.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "flink")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, call(t, tools, agentproto.MethodFileUpload,
		agentproto.FileUploadArgs{Path: filepath.Join(dir, "flink"), Content: b64("x"), Overwrite: true}), agentproto.ErrInvalid)
}

func TestFileSizeLimits(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: takes no disk space.
	if err := f.Truncate(agentproto.MaxFileDownloadBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	e := wantCode(t, call(t, tools, agentproto.MethodFileDownload, agentproto.PathArgs{Path: big}), agentproto.ErrInvalid)
	if e.Message != "file is larger than 50 MiB" {
		t.Errorf("message %q", e.Message)
	}
	// A read of a large file stops at the read limit.
	rd := result[agentproto.FileContent](t, call(t, tools, agentproto.MethodFileRead, agentproto.FileReadArgs{Path: big, Limit: 1 << 30}))
	if rd.Encoding != "base64" || !rd.Truncated || base64.StdEncoding.DecodedLen(len(rd.Content)) < agentproto.MaxFileReadBytes {
		t.Errorf("large read: encoding %s truncated %v length %d", rd.Encoding, rd.Truncated, len(rd.Content))
	}

	// Called directly: the same content through JSON would cost three copies.
	over := strings.Repeat("A", base64.StdEncoding.EncodedLen(agentproto.MaxFileUploadBytes)+4)
	_, err = tools.uploadFile(agentproto.FileUploadArgs{Path: filepath.Join(dir, "up"), Content: over})
	if ce := (*agentproto.CallError)(nil); !errors.As(err, &ce) || ce.Code != agentproto.ErrInvalid {
		t.Errorf("oversize upload: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "up")); !os.IsNotExist(err) {
		t.Errorf("oversize upload wrote a file: %v", err)
	}
}

func TestLsMode(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		want string
	}{
		{0o644, "-rw-r--r--"},
		{os.ModeDir | 0o755, "drwxr-xr-x"},
		{os.ModeDir | os.ModeSticky | 0o777, "drwxrwxrwt"},
		{os.ModeSymlink | 0o777, "lrwxrwxrwx"},
		{os.ModeSetuid | 0o755, "-rwsr-xr-x"},
		{os.ModeSetgid | 0o640, "-rw-r-S---"},
	} {
		if got := lsMode(tc.mode); got != tc.want {
			t.Errorf("lsMode(%v) = %s, want %s", tc.mode, got, tc.want)
		}
	}
}
