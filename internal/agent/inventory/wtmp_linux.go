package inventory

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"gale/internal/wire/agentproto"
)

// The layout of glibc's struct utmp, which wtmp is a sequence of, on 64-bit Linux (x86_64 and
// arm64 alike: the time fields stay 32-bit there for compatibility).
const (
	utmpSize        = 384
	utmpTypeOffset  = 0  // int16
	utmpLineOffset  = 8  // char[32]
	utmpUserOffset  = 44 // char[32]
	utmpHostOffset  = 76 // char[256]
	utmpTimeOffset  = 340
	utmpLineLen     = 32
	utmpUserLen     = 32
	utmpHostLen     = 256
	utmpUserProcess = 7 // ut_type of a login
)

// wtmpChunk is how many records wtmpLogons reads at a time from the end of the file, so that
// finding the latest logons costs a few reads even in a wtmp of years.
const wtmpChunk = 64

// wtmpLogons returns the last n logons recorded in var/log/wtmp under root, newest first. A
// system without wtmp (most containers) has no logons rather than a failure. Records are in
// the machine's byte order, which is the agent's own.
func wtmpLogons(root string, n int) ([]agentproto.LoggedInUser, error) {
	f, err := os.Open(filepath.Join(root, "var/log/wtmp"))
	if errors.Is(err, os.ErrNotExist) {
		return []agentproto.LoggedInUser{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	logons := []agentproto.LoggedInUser{}
	// A record being written when the file was measured is left out.
	end := info.Size() - info.Size()%utmpSize
	buf := make([]byte, wtmpChunk*utmpSize)
	for end > 0 && len(logons) < n {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return logons, err
		}
		for off := len(chunk) - utmpSize; off >= 0 && len(logons) < n; off -= utmpSize {
			if logon, ok := parseUtmp(chunk[off : off+utmpSize]); ok {
				logons = append(logons, logon)
			}
		}
		end = start
	}
	return logons, nil
}

// parseUtmp reads one utmp record, reporting whether it is a user's login.
func parseUtmp(record []byte) (agentproto.LoggedInUser, bool) {
	order := binary.NativeEndian
	if int16(order.Uint16(record[utmpTypeOffset:])) != utmpUserProcess {
		return agentproto.LoggedInUser{}, false
	}
	user := cString(record[utmpUserOffset : utmpUserOffset+utmpUserLen])
	if user == "" {
		return agentproto.LoggedInUser{}, false
	}
	logon := agentproto.LoggedInUser{
		Username: user,
		Terminal: cString(record[utmpLineOffset : utmpLineOffset+utmpLineLen]),
		Host:     cString(record[utmpHostOffset : utmpHostOffset+utmpHostLen]),
	}
	// The seconds are read unsigned so that records written after 2038 still date right.
	if secs := order.Uint32(record[utmpTimeOffset:]); secs > 0 {
		logon.StartedAt = time.Unix(int64(secs), 0).UTC()
	}
	return logon, true
}

// cString returns the text of a NUL-padded C string field.
func cString(field []byte) string {
	if i := bytes.IndexByte(field, 0); i >= 0 {
		field = field[:i]
	}
	return string(field)
}
