package verify

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitlab.com/depsd/depsd/deps"
)

// An index entry is picked as podman pull picks it: OS and architecture
// equal, the variant when one is asked for, an entry without a variant
// preferred otherwise; an attestation (unknown/unknown) is no real platform.
func TestPick(t *testing.T) {
	entry := func(os, arch, variant, digest string) v1.Descriptor {
		h, _ := v1.NewHash("sha256:" + digest + "0000000000000000000000000000000000000000000000000000000000000000"[len(digest):])
		return v1.Descriptor{Digest: h, Platform: &v1.Platform{OS: os, Architecture: arch, Variant: variant}}
	}
	idx := []v1.Descriptor{
		entry("unknown", "unknown", "", "a0"), // an attestation
		entry("linux", "arm", "v6", "a6"),
		entry("linux", "arm", "v7", "a7"),
		entry("linux", "arm64", "v8", "a8"),
		entry("linux", "amd64", "", "b1"),
	}
	for _, tc := range []struct {
		p    deps.Platform
		want string // digest prefix; "": none
	}{
		{deps.Platform{OS: "linux", Architecture: "amd64"}, "b1"},
		{deps.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, "a7"},
		{deps.Platform{OS: "linux", Architecture: "arm64"}, "a8"},
		{deps.Platform{OS: "linux", Architecture: "arm", Variant: "v5"}, ""},
		{deps.Platform{OS: "windows", Architecture: "amd64"}, ""},
	} {
		d, ok := pick(idx, tc.p)
		got := ""
		if ok {
			got = d.Digest.Hex[:2]
		}
		if got != tc.want {
			t.Errorf("pick %s = %q, want %q", tc.p, got, tc.want)
		}
	}
}
