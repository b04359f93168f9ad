//go:build !unix

package configpolicy

import "errors"

func diskSpace(string) (uint64, uint64, error) {
	return 0, 0, errors.New("free disk space is read on Linux and other Unix systems only")
}
