// Package thirdparty keeps the third-party catalog: applications of other vendors that the
// platform patches (a browser, an archiver), with the installed-package names that detect
// them on a device and their versions' installers. The platform's administrators keep it; a
// smoke test downloads one version's installer and checks its checksum and file type, and a
// passing test marks that version platform-tested.
package thirdparty

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

// Package is a catalog entry.
type Package struct {
	ID          string `json:"id"`
	Vendor      string `json:"vendor"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Homepage    string `json:"homepage"`
	// OSTypes are the systems the application exists for.
	OSTypes []string `json:"osTypes"`
	// PackageNames are the installed-software names that are this application on a device
	// (the Debian package, the RPM, the name Windows lists), compared without case.
	PackageNames    []string `json:"packageNames"`
	DefaultSeverity string   `json:"defaultSeverity" doc:"The severity of its patches unless a version's advisories say more."`
	// Versions are newest first; the first is the latest.
	Versions       []Version  `json:"versions"`
	LatestVersion  *string    `json:"latestVersion"`
	PlatformTested bool       `json:"platformTested" doc:"Whether the latest version passed a smoke test."`
	LastTest       *SmokeTest `json:"lastTest"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// Version is one release of a catalog entry, with its installer.
type Version struct {
	Version     string     `json:"version" minLength:"1" maxLength:"100"`
	DownloadURL string     `json:"downloadUrl" maxLength:"2000" doc:"http or https address of the installer."`
	SHA256      string     `json:"sha256" doc:"SHA-256 of the installer, 64 hex digits."`
	FileType    string     `json:"fileType" enum:"deb,rpm,msi,exe,pkg,dmg"`
	OSType      string     `json:"osType" enum:"windows,macos,linux"`
	CVEIDs      []string   `json:"cveIds,omitempty" maxItems:"100" doc:"CVE identifiers this version fixes."`
	ReleasedAt  *time.Time `json:"releasedAt,omitempty"`
	// PlatformTested and TestedAt are set by a passing smoke test, and kept while the
	// version's installer (address and checksum) stays the same.
	PlatformTested bool       `json:"platformTested" readOnly:"true"`
	TestedAt       *time.Time `json:"testedAt,omitempty" readOnly:"true"`
}

// SmokeTest is one test of a version's installer.
type SmokeTest struct {
	ID         string     `json:"id"`
	PackageID  string     `json:"packageId"`
	Version    string     `json:"version"`
	Status     string     `json:"status" enum:"queued,running,passed,failed"`
	Message    string     `json:"message"`
	SizeBytes  *int64     `json:"sizeBytes"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// Smoke test statuses.
const (
	TestQueued  = "queued"
	TestRunning = "running"
	TestPassed  = "passed"
	TestFailed  = "failed"
)

// CodeTestInProgress answers a test of an entry that has one queued or running.
const CodeTestInProgress = "TEST_IN_PROGRESS"

// Limits of an entry.
const (
	maxPackageNames = 20
	maxVersions     = 50
)

// PackageInput creates an entry, or (PATCH) changes the fields it sets; Versions, when set,
// replace the entry's versions.
type PackageInput struct {
	Vendor          *string    `json:"vendor,omitempty" minLength:"1" maxLength:"100"`
	Name            *string    `json:"name,omitempty" minLength:"1" maxLength:"100"`
	Description     *string    `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Homepage        *string    `json:"homepage,omitempty" maxLength:"2000"`
	OSTypes         []string   `json:"osTypes,omitempty" maxItems:"3"`
	PackageNames    []string   `json:"packageNames,omitempty" maxItems:"20"`
	DefaultSeverity *string    `json:"defaultSeverity,omitempty" enum:"critical,important,moderate,low,unknown"`
	Versions        *[]Version `json:"versions,omitempty" maxItems:"50" doc:"Newest first; replaces every version."`
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	cveID     = regexp.MustCompile(`^CVE-[0-9]{4}-[0-9]{4,}$`)
)

// validate checks a whole entry (after a PATCH is applied) and normalizes it.
func validate(p *Package) error {
	var bad []apperr.Detail
	fail := func(field, msg string) { bad = append(bad, apperr.Detail{Field: field, Message: msg}) }
	p.Vendor, p.Name = strings.TrimSpace(p.Vendor), strings.TrimSpace(p.Name)
	if p.Vendor == "" {
		fail("vendor", "required")
	}
	if p.Name == "" {
		fail("name", "required")
	}
	if p.Homepage != "" && !webURL(p.Homepage) {
		fail("homepage", "an http or https address")
	}
	if len(p.OSTypes) == 0 {
		fail("osTypes", "name one or more of windows, macos, linux")
	}
	for _, o := range p.OSTypes {
		if o != "windows" && o != "macos" && o != "linux" {
			fail("osTypes", "unknown system "+o+": windows, macos or linux")
		}
	}
	p.OSTypes = dedupe(p.OSTypes)
	if len(p.PackageNames) == 0 || len(p.PackageNames) > maxPackageNames {
		fail("packageNames", "name 1 to 20 installed-package names that detect the application")
	}
	for i, n := range p.PackageNames {
		p.PackageNames[i] = strings.TrimSpace(n)
		if p.PackageNames[i] == "" || len(p.PackageNames[i]) > 200 {
			fail("packageNames", "each name has 1 to 200 characters")
		}
	}
	p.PackageNames = dedupe(p.PackageNames)
	if len(p.Versions) > maxVersions {
		fail("versions", "at most 50 versions")
	}
	seen := map[string]bool{}
	for i := range p.Versions {
		v := &p.Versions[i]
		field := "versions[" + strconv.Itoa(i) + "]"
		v.Version, v.SHA256 = strings.TrimSpace(v.Version), strings.ToLower(strings.TrimSpace(v.SHA256))
		switch {
		case v.Version == "":
			fail(field+".version", "required")
		case seen[v.Version]:
			fail(field+".version", "listed twice")
		}
		seen[v.Version] = true
		if !webURL(v.DownloadURL) {
			fail(field+".downloadUrl", "an http or https address")
		}
		if !sha256Hex.MatchString(v.SHA256) {
			fail(field+".sha256", "64 hex digits")
		}
		if os, ok := agentproto.FileTypeOS[v.FileType]; !ok {
			fail(field+".fileType", "deb, rpm, msi, exe, pkg or dmg")
		} else if v.OSType != os {
			fail(field+".osType", "a "+v.FileType+" installer is for "+os)
		}
		if !slices.Contains(p.OSTypes, v.OSType) {
			fail(field+".osType", "not one of the entry's osTypes")
		}
		for _, c := range v.CVEIDs {
			if !cveID.MatchString(c) {
				fail(field+".cveIds", "not a CVE identifier: "+c)
			}
		}
	}
	if len(bad) > 0 {
		return apperr.InvalidFields(bad)
	}
	return nil
}

func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func dedupe(l []string) []string {
	out := make([]string, 0, len(l))
	for _, s := range l {
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, s) }) {
			out = append(out, s)
		}
	}
	return out
}
