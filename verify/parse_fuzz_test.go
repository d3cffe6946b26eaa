package verify

import (
	"testing"

	"gitlab.com/depsd/depsd/deps"
)

// What a registry answers is untrusted: parsing it never panics, and an
// answer that parses names a config.
func FuzzParse(f *testing.F) {
	f.Add("application/vnd.oci.image.manifest.v1+json", []byte(`{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:`+"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"+`","size":2},"annotations":{"org.opencontainers.image.base.digest":""}}`))
	f.Add("application/vnd.oci.image.index.v1+json", []byte(`{"schemaVersion":2,"manifests":[{"digest":"sha256:`+"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"+`","size":1,"platform":{"os":"linux","architecture":"amd64"}}]}`))
	f.Add("", []byte(`{"rootfs":{"type":"layers","diff_ids":["sha256:`+"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"+`"]},"os":"linux"}`))
	f.Fuzz(func(t *testing.T, mediaType string, body []byte) {
		tp, err := parseTop(Manifest{MediaType: mediaType, Body: body}, deps.Platform{OS: "linux", Architecture: "amd64"})
		if err == nil && tp.image == nil && tp.platform == "" {
			t.Errorf("parsed %q to nothing", body)
		}
		if err == nil && tp.image != nil && tp.image.config == "" {
			t.Errorf("a manifest without a config parsed: %q", body)
		}
		_, _ = parseConfig(body)
	})
}
