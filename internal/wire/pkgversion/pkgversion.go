// Package pkgversion orders package versions the way the system's package manager does:
// Debian ordering for apt ([epoch:]upstream[-revision], with ~ sorting before everything)
// and RPM ordering for dnf ([epoch:]version-release, with ~ before and ^ after the base).
// The agent and the server use it, so both judge "newer" and "older" alike.
package pkgversion

import (
	"fmt"
	"regexp"

	debversion "github.com/knqyf263/go-deb-version"
	rpmversion "github.com/knqyf263/go-rpm-version"

	"gale/internal/wire/agentproto"
)

// debChars is stricter than the library's check, which accepts any Unicode letter: a version
// ends up on a package manager's command line, so only the characters Debian policy allows
// pass.
var debChars = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~:_-]*$`)

// rpmPattern is [epoch:]version[-release] with the characters RPM allows in each part.
var rpmPattern = regexp.MustCompile(`^([0-9]+:)?[A-Za-z0-9][A-Za-z0-9._+~^]*(-[A-Za-z0-9._+~^]+)?$`)

// Valid reports whether v is a well-formed version for the manager (agentproto.ManagerApt or
// ManagerDnf); an unknown manager has no valid versions.
func Valid(manager, v string) bool {
	switch manager {
	case agentproto.ManagerApt:
		return len(v) <= 256 && debChars.MatchString(v) && debversion.Valid(v)
	case agentproto.ManagerDnf:
		return len(v) <= 256 && rpmPattern.MatchString(v)
	}
	return false
}

// Compare returns -1, 0 or 1 as a is older than, the same as, or newer than b in the
// manager's ordering; an error when either is not a valid version for it.
func Compare(manager, a, b string) (int, error) {
	for _, v := range []string{a, b} {
		if !Valid(manager, v) {
			if manager != agentproto.ManagerApt && manager != agentproto.ManagerDnf {
				return 0, fmt.Errorf("unknown package manager %q", manager)
			}
			return 0, fmt.Errorf("%q is not a valid %s package version", v, manager)
		}
	}
	if manager == agentproto.ManagerApt {
		va, _ := debversion.NewVersion(a)
		vb, _ := debversion.NewVersion(b)
		return sign(va.Compare(vb)), nil
	}
	return sign(rpmversion.NewVersion(a).Compare(rpmversion.NewVersion(b))), nil
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
