// Package atomicfile writes the agent's small state files (configuration, outbox entries,
// scheduled power actions) so that a crash or a power cut leaves the old file or the new one,
// never half of one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm through a synced temporary file in the same
// directory, renamed into place.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
