package agentdist

import (
	"cmp"
	"regexp"
	"strconv"
	"strings"

	"gale/internal/platform/apperr"
)

// versionPattern is the accepted form of an agent version: semver-like, with an optional
// leading "v" and one pre-release (-...) or build (+...) suffix.
var versionPattern = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)([-+][0-9A-Za-z.-]+)?$`)

const maxVersionLen = 64

// NormalizeVersion validates v and returns it without the leading "v": "v1.2.3" and "1.2.3"
// name the same release, and the canonical form is what is stored and reported.
func NormalizeVersion(v string) (string, error) {
	if len(v) > maxVersionLen || !versionPattern.MatchString(v) {
		return "", apperr.Invalid("version", "use a version like 1.2.3, v1.2.3 or 1.2.3-rc.1")
	}
	return strings.TrimPrefix(v, "v"), nil
}

type semver struct {
	nums       [3]uint64
	prerelease []string
}

// parseSemver reads a normalized version; numbers too large to hold sort as the largest.
func parseSemver(v string) semver {
	var s semver
	m := versionPattern.FindStringSubmatch(v)
	if m == nil {
		return s
	}
	for i := range s.nums {
		n, err := strconv.ParseUint(m[i+1], 10, 64)
		if err != nil {
			n = ^uint64(0)
		}
		s.nums[i] = n
	}
	if suffix := m[4]; strings.HasPrefix(suffix, "-") {
		s.prerelease = strings.Split(suffix[1:], ".")
	}
	return s
}

// CompareVersions orders two normalized versions by semantic-versioning precedence (1.10.0
// after 1.9.0, 1.2.3-rc.1 before 1.2.3); versions of equal precedence (build suffixes) fall
// back to their text so the order is total.
func CompareVersions(a, b string) int {
	sa, sb := parseSemver(a), parseSemver(b)
	for i := range sa.nums {
		if c := cmp.Compare(sa.nums[i], sb.nums[i]); c != 0 {
			return c
		}
	}
	if c := comparePrerelease(sa.prerelease, sb.prerelease); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func comparePrerelease(a, b []string) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return 1 // a release comes after its pre-releases
	case len(b) == 0:
		return -1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		na, errA := strconv.ParseUint(a[i], 10, 64)
		nb, errB := strconv.ParseUint(b[i], 10, 64)
		var c int
		switch {
		case errA == nil && errB == nil:
			c = cmp.Compare(na, nb)
		case errA == nil:
			c = -1 // numeric identifiers sort before alphanumeric ones
		case errB == nil:
			c = 1
		default:
			c = strings.Compare(a[i], b[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
