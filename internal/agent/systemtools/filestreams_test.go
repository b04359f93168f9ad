package systemtools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// openFileStream serves tools' file streams on one end of an in-memory connection and opens
// a stream of kind from the other.
func openFileStream(t *testing.T, tools *Tools, kind string, args any) (*streams.Stream, *bufio.Reader) {
	t.Helper()
	reg := capability.New()
	tools.Register(reg)
	var server, agent *streams.Session
	server = streams.NewSession(func(_ context.Context, f []byte) error { return agent.Receive(bytes.Clone(f)) }, streams.Options{Initiator: true})
	agent = streams.NewSession(func(_ context.Context, f []byte) error { return server.Receive(bytes.Clone(f)) }, streams.Options{Accept: reg.AcceptStream})
	t.Cleanup(func() { server.Close(nil); agent.Close(nil) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := server.Open(ctx, kind, args)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetDeadline(time.Now().Add(10 * time.Second))
	return st, bufio.NewReader(st)
}

func readLine(t *testing.T, r *bufio.Reader) agentproto.FileStreamHeader {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading a header: %v", err)
	}
	var h agentproto.FileStreamHeader
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatalf("header %q: %v", line, err)
	}
	return h
}

// upload sends data through a file.write stream and returns the agent's result.
func upload(t *testing.T, tools *Tools, args agentproto.FileWriteArgs, data []byte) agentproto.FileStreamHeader {
	t.Helper()
	st, r := openFileStream(t, tools, agentproto.StreamFileWrite, args)
	defer st.Close()
	if h := readLine(t, r); h.Error != nil {
		return h
	}
	if _, err := st.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseWrite()
	return readLine(t, r)
}

func TestFileStreamsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	data := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: many windows
	sum := sha256.Sum256(data)
	p := filepath.Join(dir, "f.bin")
	res := upload(t, tools, agentproto.FileWriteArgs{Path: p, Mode: "0640"}, data)
	if res.Error != nil || *res.SizeBytes != int64(len(data)) || res.SHA256 != hex.EncodeToString(sum[:]) || res.Entry.Mode != "-rw-r-----" {
		t.Fatalf("write result = %+v", res)
	}

	st, r := openFileStream(t, tools, agentproto.StreamFileRead, agentproto.FileReadArgs{Path: p, Offset: 10})
	h := readLine(t, r)
	if h.Error != nil || *h.SizeBytes != int64(len(data)-10) || h.Mode != "0640" {
		t.Fatalf("read header = %+v", h)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data[10:]) {
		t.Fatalf("read %d bytes (%v), want the %d after the offset", len(got), err, len(data)-10)
	}
	if partial := sha256.Sum256(data[10:]); h.SHA256 != hex.EncodeToString(partial[:]) {
		t.Errorf("sha256 = %s", h.SHA256)
	}
	st.Close()
}

func TestFileStreamRefusals(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{ConfigDir: filepath.Join(dir, "config")})
	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, kind string
		args       any
		code, text string
	}{
		{"missing file", agentproto.StreamFileRead, agentproto.FileReadArgs{Path: filepath.Join(dir, "nope")}, agentproto.ErrNotFound, "does not exist"},
		{"directory", agentproto.StreamFileRead, agentproto.FileReadArgs{Path: dir}, agentproto.ErrInvalid, "is a directory"},
		{"relative path", agentproto.StreamFileRead, agentproto.FileReadArgs{Path: "x"}, agentproto.ErrInvalid, "absolute"},
		{"denied path", agentproto.StreamFileWrite, agentproto.FileWriteArgs{Path: filepath.Join(dir, "config", "token")}, agentproto.ErrInvalid, "refused"},
		{"write onto a directory", agentproto.StreamFileWrite, agentproto.FileWriteArgs{Path: dir, Overwrite: true}, agentproto.ErrInvalid, "is a directory"},
		{"no overwrite", agentproto.StreamFileWrite, agentproto.FileWriteArgs{Path: existing}, agentproto.ErrInvalid, "already exists"},
		{"missing directory", agentproto.StreamFileWrite, agentproto.FileWriteArgs{Path: filepath.Join(dir, "no", "f")}, agentproto.ErrNotFound, "does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, r := openFileStream(t, tools, c.kind, c.args)
			defer st.Close()
			h := readLine(t, r)
			if h.Error == nil || h.Error.Code != c.code || !strings.Contains(h.Error.Message, c.text) {
				t.Fatalf("header = %+v, want %s mentioning %q", h, c.code, c.text)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Errorf("after the refusal: %v, want EOF", err)
			}
		})
	}
	if got, _ := os.ReadFile(existing); string(got) != "old" {
		t.Errorf("refused overwrite changed the file: %q", got)
	}
	res := upload(t, tools, agentproto.FileWriteArgs{Path: existing, Overwrite: true}, []byte("new"))
	if got, _ := os.ReadFile(existing); res.Error != nil || string(got) != "new" {
		t.Errorf("overwrite: %+v, file %q", res.Error, got)
	}
}

// TestBrokenWritesLeaveNothing cuts uploads off: by a reset, and by a FIN before the size
// announced. Neither leaves the target nor a temporary file.
func TestBrokenWritesLeaveNothing(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	p := filepath.Join(dir, "f")

	st, r := openFileStream(t, tools, agentproto.StreamFileWrite, agentproto.FileWriteArgs{Path: p})
	readLine(t, r)
	if _, err := st.Write(make([]byte, 300_000)); err != nil {
		t.Fatal(err)
	}
	st.Close() // no FIN: a RESET
	size := int64(1000)
	res := upload(t, tools, agentproto.FileWriteArgs{Path: p, SizeBytes: &size}, make([]byte, 10))
	if res.Error == nil || !strings.Contains(res.Error.Message, "fewer than announced") {
		t.Errorf("short write result = %+v", res)
	}
	// The reset stream's handler cleans up on its own goroutine.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		entries, _ := os.ReadDir(dir)
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in the directory: %v", entries)
		}
	}
}

// A write that declares more bytes than its file system has free, less the reserve, is refused
// before any byte; so is a call's upload.
func TestWritesBeyondTheFreeSpaceAreRefused(t *testing.T) {
	dir := t.TempDir()
	tools := New(Options{})
	target := filepath.Join(dir, "big.bin")
	huge := int64(1) << 60
	res := upload(t, tools, agentproto.FileWriteArgs{Path: target, SizeBytes: &huge}, nil)
	if res.Error == nil || res.Error.Code != agentproto.ErrInsufficientSpace || !strings.Contains(res.Error.Message, "free") {
		t.Fatalf("write of 1 EiB = %+v, want %s", res.Error, agentproto.ErrInsufficientSpace)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused write left %s: %v", target, err)
	}
	small := int64(3)
	if res := upload(t, tools, agentproto.FileWriteArgs{Path: target, SizeBytes: &small}, []byte("abc")); res.Error != nil {
		t.Fatalf("a small write = %+v", res.Error)
	}

	tools.freeSpace = func(string) (uint64, error) { return spaceReserve + 2, nil }
	_, err := tools.uploadFile(agentproto.FileUploadArgs{Path: filepath.Join(dir, "call.bin"), Content: "YWJj"})
	var ce *agentproto.CallError
	if !errors.As(err, &ce) || ce.Code != agentproto.ErrInsufficientSpace {
		t.Fatalf("upload of 3 bytes with 2 to spare = %v, want %s", err, agentproto.ErrInsufficientSpace)
	}
	if _, err := tools.uploadFile(agentproto.FileUploadArgs{Path: filepath.Join(dir, "call.bin"), Content: "YWI="}); err != nil {
		t.Fatalf("upload of 2 bytes with 2 to spare = %v", err)
	}
}
