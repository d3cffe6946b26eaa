package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gitlab.com/depsd/depsd/deps"
)

// BaseDigestAnnotation and BaseNameAnnotation are the OCI annotations
// buildah and podman build (and `docker buildx --annotation`) write on the
// image manifest: the digest and the name of the built stage's base.
const (
	BaseDigestAnnotation = "org.opencontainers.image.base.digest"
	BaseNameAnnotation   = "org.opencontainers.image.base.name"
)

// errInvalid marks an answer that cannot be parsed.
var errInvalid = errors.New("invalid")

// errNoPlatform: an index without a manifest for the platform.
var errNoPlatform = errors.New("no manifest for the platform")

// top is what the first manifest read of an image says: an image
// manifest (Image set), or an index pointing at the platform's manifest
// (Platform set, with the annotations the index gives that entry).
type top struct {
	image    *manifest
	platform string
	annots   map[string]string
}

// manifest is what verification needs of an image manifest.
type manifest struct {
	annotations map[string]string
	config      string // the config blob's digest
}

// parseTop reads a manifest or an index for platform p.
func parseTop(m Manifest, p deps.Platform) (top, error) {
	mt := types.MediaType(m.MediaType)
	if mt == "" {
		var probe struct {
			MediaType types.MediaType `json:"mediaType"`
		}
		_ = json.Unmarshal(m.Body, &probe)
		mt = probe.MediaType
	}
	if !mt.IsIndex() {
		im, err := parseManifest(m.Body)
		return top{image: &im}, err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(m.Body))
	if err != nil {
		return top{}, fmt.Errorf("index %s: %w: %v", m.Digest, errInvalid, err)
	}
	if d, ok := pick(idx.Manifests, p); ok {
		return top{platform: d.Digest.String(), annots: d.Annotations}, nil
	}
	return top{}, fmt.Errorf("index %s: %w %s", m.Digest, errNoPlatform, p)
}

// pick finds p's manifest in an index, as podman pull does: OS and
// architecture equal, the variant equal when p names one (preferring an
// entry without a variant otherwise). Attestation entries
// (unknown/unknown) never match.
func pick(ds []v1.Descriptor, p deps.Platform) (v1.Descriptor, bool) {
	var found *v1.Descriptor
	for i, d := range ds {
		if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Architecture {
			continue
		}
		switch {
		case d.Platform.Variant == p.Variant:
			return d, true
		case p.Variant == "" && found == nil:
			found = &ds[i]
		}
	}
	if found != nil {
		return *found, true
	}
	return v1.Descriptor{}, false
}

func parseManifest(body []byte) (manifest, error) {
	m, err := v1.ParseManifest(bytes.NewReader(body))
	if err != nil {
		return manifest{}, fmt.Errorf("manifest: %w: %v", errInvalid, err)
	}
	if m.Config.Digest.Hex == "" {
		return manifest{}, fmt.Errorf("manifest: %w: no config", errInvalid)
	}
	return manifest{annotations: m.Annotations, config: m.Config.Digest.String()}, nil
}

// config is what verification needs of an image config.
type config struct {
	diffIDs  []string
	platform deps.Platform
}

func parseConfig(body []byte) (config, error) {
	c, err := v1.ParseConfigFile(bytes.NewReader(body))
	if err != nil {
		return config{}, fmt.Errorf("config: %w: %v", errInvalid, err)
	}
	out := config{platform: deps.Platform{OS: c.OS, Architecture: c.Architecture, Variant: c.Variant}}
	for _, d := range c.RootFS.DiffIDs {
		out.diffIDs = append(out.diffIDs, d.String())
	}
	return out, nil
}

// fits reports whether a single-platform image's config may be for p: a
// config that names no OS or architecture fits any.
func (c config) fits(p deps.Platform) bool {
	return (c.platform.OS == "" || c.platform.OS == p.OS) &&
		(c.platform.Architecture == "" || c.platform.Architecture == p.Architecture) &&
		(p.Variant == "" || c.platform.Variant == "" || c.platform.Variant == p.Variant)
}

// baseAnnotation finds the base digest annotation on the manifest, or on
// the index entry that pointed at it.
func baseAnnotation(sets ...map[string]string) (digest string, ok bool) {
	for _, s := range sets {
		if d, ok := s[BaseDigestAnnotation]; ok {
			return d, true
		}
	}
	return "", false
}
