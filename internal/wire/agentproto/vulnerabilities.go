package agentproto

// CommandPackageChangelog reads the Debian changelog of given package versions from the
// configured mirror (apt-get download, changelog.Debian.gz) and reports the CVE identifiers
// its entries name (payload PackageChangelog, result PackageChangelogResult).
const CommandPackageChangelog = "package_changelog"

// MaxChangelogPackages is the most packages one package_changelog names.
const MaxChangelogPackages = 50

// MaxChangelogCVEs bounds the CVE identifiers reported for one package.
const MaxChangelogCVEs = 500

// PackageChangelog is the payload of package_changelog.
type PackageChangelog struct {
	Packages []ChangelogRequest `json:"packages"`
}

// ChangelogRequest names one package version whose changelog to read: the entries newer than
// SinceVersion ("" for every entry) up to and including Version.
type ChangelogRequest struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	SinceVersion string `json:"sinceVersion,omitempty"`
}

// PackageChangelogResult is the Result of a package_changelog: one entry per package asked.
type PackageChangelogResult struct {
	Packages []ChangelogEntry `json:"packages"`
}

// ChangelogEntry is what one package's changelog says: the CVEs of its entries in the range
// asked, and the highest urgency among them (low, medium, high, emergency, critical).
// Error is set, and the rest empty, when the changelog could not be read.
type ChangelogEntry struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	CVEs    []string `json:"cves"`
	Urgency string   `json:"urgency,omitempty"`
	// Entries counts the changelog entries in the range.
	Entries int    `json:"entries"`
	Error   string `json:"error,omitempty"`
}
