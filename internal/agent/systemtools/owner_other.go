//go:build !unix

package systemtools

import (
	"io/fs"
	"os"
)

// fileUID reports no owner: Windows files have security descriptors, not uids.
func fileUID(fs.FileInfo) (string, bool) { return "", false }

// chownLike does nothing: a file written on Windows inherits its directory's permissions.
func chownLike(*os.File, fs.FileInfo) error { return nil }
