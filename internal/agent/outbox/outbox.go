// Package outbox keeps what the agent could not deliver while the server was unreachable
// (command results, heartbeat samples) in a directory on disk, so that it survives the
// connection and the agent process, and is delivered once the server is back.
//
// Each entry is one file, written to a temporary name and renamed into place, so a crash
// leaves either the whole entry or none of it. Entries are named by a sequence that is also
// their time of entry, which orders them and dates them without reading them. The outbox is
// bounded in entries, bytes and age: past a bound the oldest entries are dropped, because
// what is recent matters more than what is old.
package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gale/internal/agent/atomicfile"
)

// Limits bound an outbox; a zero field takes its default.
type Limits struct {
	MaxEntries int           // default 1,000
	MaxBytes   int64         // default 10 MB
	MaxAge     time.Duration // default 24 h
}

// Default limits.
const (
	DefaultMaxEntries = 1000
	DefaultMaxBytes   = 10 << 20
	DefaultMaxAge     = 24 * time.Hour
)

// Entry is one kept message.
type Entry struct {
	// ID names the entry for Remove.
	ID string
	// Kind says what the payload is, as the caller named it at Put.
	Kind    string
	At      time.Time
	Payload json.RawMessage
}

// Outbox is a bounded, durable queue in a directory. It is safe for concurrent use by the
// goroutines of one process; two processes must not share a directory.
type Outbox struct {
	dir    string
	limits Limits
	now    func() time.Time
	mu     sync.Mutex
	files  []file // oldest first
	bytes  int64
	last   int64 // sequence of the newest entry
}

type file struct {
	seq  int64
	size int64
}

const suffix = ".json"

// record is an entry's file content.
type record struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// Open opens (creating it if needed) the outbox in dir. Entries left by an earlier process
// are kept, except those past the limits; a leftover temporary file of an interrupted write
// is removed.
func Open(dir string, l Limits) (*Outbox, error) {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultMaxAge
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the outbox %s: %w", dir, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the outbox %s: %w", dir, err)
	}
	b := &Outbox{dir: dir, limits: l, now: time.Now}
	for _, de := range des {
		name := de.Name()
		seq, ok := parseName(name)
		if !ok {
			// A write a crash interrupted leaves its temporary file (see atomicfile).
			if strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") {
				_ = os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		b.files = append(b.files, file{seq: seq, size: info.Size()})
		b.bytes += info.Size()
		b.last = max(b.last, seq)
	}
	sort.Slice(b.files, func(i, j int) bool { return b.files[i].seq < b.files[j].seq })
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.trim(0); err != nil {
		return nil, err
	}
	return b, nil
}

// Put keeps payload (marshalled to JSON) under kind. It returns how many older entries it
// dropped to stay within the limits.
func (b *Outbox) Put(kind string, payload any) (dropped int, err error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("outbox: marshal %s: %w", kind, err)
	}
	data, err := json.Marshal(record{Kind: kind, Payload: raw})
	if err != nil {
		return 0, fmt.Errorf("outbox: marshal %s: %w", kind, err)
	}
	size := int64(len(data))
	if size > b.limits.MaxBytes {
		return 0, fmt.Errorf("outbox: a %s of %d bytes exceeds the outbox's %d bytes", kind, size, b.limits.MaxBytes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if dropped, err = b.trim(size); err != nil {
		return dropped, err
	}
	// The sequence is the time of entry in nanoseconds, kept rising even if the clock is set back.
	seq := max(b.now().UnixNano(), b.last+1)
	if err := atomicfile.Write(filepath.Join(b.dir, b.name(seq)), data, 0o600); err != nil {
		return dropped, fmt.Errorf("outbox: keep a %s: %w", kind, err)
	}
	b.last = seq
	b.files = append(b.files, file{seq: seq, size: size})
	b.bytes += size
	return dropped, nil
}

// Entries returns the kept entries, oldest first, after dropping those past their age. An
// entry whose file cannot be read any more (it was damaged) is dropped.
func (b *Outbox) Entries() ([]Entry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.trim(0); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(b.files))
	var damaged []int64
	for _, f := range b.files {
		data, err := os.ReadFile(filepath.Join(b.dir, b.name(f.seq)))
		var rec record
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil {
			damaged = append(damaged, f.seq)
			continue
		}
		out = append(out, Entry{ID: strconv.FormatInt(f.seq, 10), Kind: rec.Kind, At: time.Unix(0, f.seq), Payload: rec.Payload})
	}
	for _, seq := range damaged {
		if err := b.remove(seq); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Remove forgets a delivered entry; removing one already gone is not an error.
func (b *Outbox) Remove(id string) error {
	seq, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return fmt.Errorf("outbox: bad entry ID %q", id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.remove(seq)
}

// Len is the number of kept entries.
func (b *Outbox) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.files)
}

// Clear forgets every entry (the agent enrolled anew: they belong to another device).
func Clear(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear the outbox %s: %w", dir, err)
	}
	return nil
}

// trim drops the oldest entries until there is room for one more of the given size (none
// when incoming is 0) and no entry is older than MaxAge. b.mu is held.
func (b *Outbox) trim(incoming int64) (dropped int, err error) {
	oldest := b.now().Add(-b.limits.MaxAge).UnixNano()
	room := 0
	if incoming > 0 {
		room = 1
	}
	for len(b.files) > 0 {
		f := b.files[0]
		if f.seq >= oldest && len(b.files)+room <= b.limits.MaxEntries && b.bytes+incoming <= b.limits.MaxBytes {
			break
		}
		if err := b.remove(f.seq); err != nil {
			return dropped, err
		}
		dropped++
	}
	return dropped, nil
}

// remove deletes one entry's file and forgets it. b.mu is held.
func (b *Outbox) remove(seq int64) error {
	if err := os.Remove(filepath.Join(b.dir, b.name(seq))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("outbox: remove an entry: %w", err)
	}
	for i, f := range b.files {
		if f.seq == seq {
			b.files = append(b.files[:i], b.files[i+1:]...)
			b.bytes -= f.size
			break
		}
	}
	return nil
}

// name is an entry's file name: its sequence, zero-padded so names sort like sequences.
func (b *Outbox) name(seq int64) string { return fmt.Sprintf("%020d%s", seq, suffix) }

func parseName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	return seq, err == nil && seq > 0
}
