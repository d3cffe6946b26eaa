// Package ciscripts tests the shell scripts of .ci/ that decide something
// (Go's ./... does not enter .ci itself).
package ciscripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debian-mirror.sh finds the mirror apt uses for a suite in either format
// of apt's sources, and fails with a message naming where it looked when
// there is none. The hosts here are example names: no mirror's host name
// belongs in the repository.
func TestDebianMirrorFromAptSources(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // under the apt directory
		want  string            // "" : the script must fail
	}{
		{"deb822, security and updates listed first", map[string]string{
			"sources.list.d/debian.sources": "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n" +
				"# the main archive\nTypes: deb deb-src\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n",
		}, "http://mirror.example/debian"},
		{"deb822 stanza disabled", map[string]string{
			"sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n",
			"sources.list.d/b.sources": "Types: deb\nURIs: http://on.example/debian\nSuites: bookworm\nComponents: main\n",
		}, "http://on.example/debian"},
		{"deb822 deb-src only", map[string]string{
			"sources.list.d/src.sources": "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n",
		}, ""},
		{"one-line sources.list with options and comments", map[string]string{
			"sources.list": "# deb http://commented.example/debian bookworm main\n" +
				"deb-src http://src.example/debian bookworm main\n" +
				"deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian bookworm main contrib\n",
		}, "http://mirror.example/debian"},
		{"one-line .list in sources.list.d", map[string]string{
			"sources.list.d/debian.list": "deb http://security.example/debian-security bookworm-security main\ndeb http://mirror.example/debian bookworm main\n",
		}, "http://mirror.example/debian"},
		{"another suite only", map[string]string{
			"sources.list": "deb http://mirror.example/debian trixie main\n",
		}, ""},
		{"files apt ignores are ignored", map[string]string{
			"sources.list.d/old.list.disabled": "deb http://ignored.example/debian bookworm main\n",
			"sources.list.d/x.sources.save":    "Types: deb\nURIs: http://ignored.example/debian\nSuites: bookworm\n",
		}, ""},
		{"no sources at all", map[string]string{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etc := t.TempDir()
			if err := os.MkdirAll(filepath.Join(etc, "sources.list.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(etc, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "../../.ci/debian-mirror.sh", "bookworm")
			cmd.Env = append(os.Environ(), "DEPSD_APT_ETC="+etc)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			got := strings.TrimSpace(string(out))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("found %q, want a failure", got)
				}
				if !strings.Contains(stderr.String(), "no Debian mirror for bookworm") || !strings.Contains(stderr.String(), etc) {
					t.Errorf("failure message %q does not say what is missing and where it looked", stderr.String())
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("mirror %q (%v, %s), want %q", got, err, stderr.String(), tc.want)
			}
		})
	}
}
