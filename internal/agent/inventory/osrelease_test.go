package inventory

import "testing"

func TestParseOSRelease(t *testing.T) {
	fields := parseOSRelease(`# Debian
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION_CODENAME=bookworm

not a field
VARIANT='Server Edition'
QUOTED="say \"hi\" for \$5"
`)
	want := map[string]string{
		"PRETTY_NAME":      "Debian GNU/Linux 12 (bookworm)",
		"NAME":             "Debian GNU/Linux",
		"VERSION_ID":       "12",
		"VERSION_CODENAME": "bookworm",
		"VARIANT":          "Server Edition",
		"QUOTED":           `say "hi" for $5`,
	}
	if len(fields) != len(want) {
		t.Fatalf("got %d fields, want %d: %v", len(fields), len(want), fields)
	}
	for key, value := range want {
		if fields[key] != value {
			t.Errorf("%s = %q, want %q", key, fields[key], value)
		}
	}
}

func TestReleaseFromOSRelease(t *testing.T) {
	tests := []struct {
		name   string
		fields map[string]string
		want   release
	}{
		{"debian", map[string]string{"NAME": "Debian GNU/Linux", "VERSION_ID": "12", "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)",
			"VERSION_CODENAME": "bookworm"},
			release{name: "Debian GNU/Linux", version: "12", prettyName: "Debian GNU/Linux 12 (bookworm)", codename: "bookworm"}},
		{"rolling with build", map[string]string{"NAME": "Arch Linux", "BUILD_ID": "rolling"},
			release{name: "Arch Linux", build: "rolling"}},
		{"pretty name only", map[string]string{"PRETTY_NAME": "Custom OS"}, release{name: "Custom OS", prettyName: "Custom OS"}},
		{"empty", map[string]string{}, release{name: "Linux"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := releaseFromOSRelease(tt.fields); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
