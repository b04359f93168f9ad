//go:build unix

package systemtools

import (
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// fileUID returns the uid of a file's owner.
func fileUID(info fs.FileInfo) (string, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return strconv.FormatUint(uint64(st.Uid), 10), true
}

// chownLike gives f the owner and group of like. Only root may give a file away, so other
// users leave f as it is: theirs.
func chownLike(f *os.File, like fs.FileInfo) error {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
