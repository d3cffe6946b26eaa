package deps

import (
	_ "crypto/sha256" // registers the digest algorithm reference.Parse* validates against
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// ImageRef is a normalised container image reference.
type ImageRef struct {
	// Image is the full reference with the implied tag made explicit:
	// "debian" becomes "docker.io/library/debian:latest".
	Image string
	// Repository is host/path without tag or digest, with the host in lower
	// case (registry host names are DNS names).
	Repository string
	Tag        string
	Digest     string
}

// NormalizeImage parses a reference as docker and podman do: Docker Hub
// shorthands are expanded, a missing tag becomes "latest" unless a digest
// pins the image, and registries with ports are kept.
func NormalizeImage(ref string) (ImageRef, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ImageRef{}, fmt.Errorf("invalid image reference %q: %w", ref, err)
	}
	named = reference.TagNameOnly(named)
	host := reference.Domain(named)
	if lower := strings.ToLower(host); strings.ContainsAny(lower, ".:") || lower == "localhost" {
		// A host recognised by its dot, port or name stays one in lower case;
		// one recognised only by its capitals ("Registry/x") must keep them.
		host = lower
	}
	out := ImageRef{Repository: host + "/" + reference.Path(named)}
	out.Image = out.Repository
	if t, ok := named.(reference.Tagged); ok {
		out.Tag = t.Tag()
		out.Image += ":" + out.Tag
	}
	if d, ok := named.(reference.Digested); ok {
		out.Digest = d.Digest().String()
		out.Image += "@" + out.Digest
	}
	return out, nil
}

// RegistryMap maps image repositories to the GitLab projects that own them,
// by the container registry prefix GitLab reports for each project
// (container_registry_image_prefix). An image belongs to the project with
// the longest prefix that ends at a path boundary, so
// registry.example.com/group/project/sub maps to group/project. Hosts and
// paths compare case-insensitively, as GitLab resolves routes.
type RegistryMap struct {
	byPrefix map[string]string // lower-case prefix → project path
	maxDepth int               // most path segments of any prefix
}

// NewRegistryMap builds a map from registry prefix (host/path, as GitLab
// reports it) to project path. Empty prefixes (registry disabled) are skipped.
func NewRegistryMap(prefixToProject map[string]string) *RegistryMap {
	m := &RegistryMap{byPrefix: make(map[string]string, len(prefixToProject))}
	for prefix, project := range prefixToProject {
		key := strings.ToLower(strings.Trim(prefix, "/"))
		if key == "" {
			continue
		}
		m.byPrefix[key] = project
		if n := strings.Count(key, "/"); n > m.maxDepth {
			m.maxDepth = n
		}
	}
	return m
}

// Project returns the project owning repository (host/path), if any. It
// tries prefixes from the longest possible down, so it costs one map lookup
// per path segment however many projects are known.
func (m *RegistryMap) Project(repository string) (string, bool) {
	key := strings.ToLower(strings.Trim(repository, "/"))
	if strings.Count(key, "/") > m.maxDepth {
		cut := 0
		for range m.maxDepth + 1 {
			cut += strings.IndexByte(key[cut:], '/') + 1
		}
		key = key[:cut-1]
	}
	for {
		if p, ok := m.byPrefix[key]; ok {
			return p, true
		}
		i := strings.LastIndexByte(key, '/')
		if i < 0 {
			return "", false
		}
		key = key[:i]
	}
}

// HostProject maps a repository to a project path when its host equals
// registry: the path after the host. It is what `depsd check --registry`
// uses when no project list is at hand.
func HostProject(repository, registry string) (string, bool) {
	host, path, ok := strings.Cut(repository, "/")
	if !ok || registry == "" || !strings.EqualFold(host, strings.Trim(registry, "/")) {
		return "", false
	}
	return path, true
}
