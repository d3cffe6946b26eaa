package buildinfo

import (
	"strings"
	"testing"
)

// TestVersionIsNeverEmpty: a test binary has no link-time version, so the
// fallback from the build information applies.
func TestVersionIsNeverEmpty(t *testing.T) {
	info := Get()
	if info.Version == "" || !strings.HasPrefix(info.GoVersion, "go") {
		t.Errorf("info %+v", info)
	}
	if UserAgent() != "depsd/"+info.Version {
		t.Errorf("user agent %q", UserAgent())
	}
}
