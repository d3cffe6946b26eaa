package executor

import (
	_ "crypto/sha256" // registers the digest algorithm image references are checked with
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/distribution/reference"
)

// Labels every container and network of the executor carries. gc and
// cleanup act only on things with LabelManaged; nothing else is touched.
const (
	labelPrefix     = "io.depsd.podman-executor."
	LabelManaged    = labelPrefix + "managed"
	LabelGroup      = labelPrefix + "group" // the job container's name
	LabelRole       = labelPrefix + "role"  // "job" or "service"
	LabelRunner     = labelPrefix + "runner"
	LabelProject    = labelPrefix + "project"
	LabelJob        = labelPrefix + "job"
	LabelConcurrent = labelPrefix + "concurrent"
	LabelCreated    = labelPrefix + "created" // RFC 3339, UTC
)

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// clean makes s safe inside a container or network name.
func clean(s string) string {
	s = unsafeName.ReplaceAllString(s, "_")
	if s == "" {
		return "0"
	}
	return s
}

// JobName is the job container's name: unique per runner, project,
// concurrent slot and job, and the same on every stage of one job, so
// later stages (and a retried prepare) find it without shared state.
func (id Identity) JobName() string {
	return fmt.Sprintf("podman-executor-r%s-p%s-c%s-j%s",
		clean(id.Runner), clean(id.Project), clean(id.Concurrent), clean(id.Job))
}

// storeKey names the project's kept things (cache directory, builds
// volume, build storage): its id, with "-protected" for the jobs of its
// protected refs when they are kept apart.
func (id Identity) storeKey() string {
	if id.Protected {
		return clean(id.Project) + "-protected"
	}
	return clean(id.Project)
}

// NetworkName is the per-job network on which services are reachable.
func (id Identity) NetworkName() string { return id.JobName() + "-net" }

// BuildsVolumeName is the podman volume holding the builds directory of
// one runner, project and concurrent slot (builds_volume = true).
func (id Identity) BuildsVolumeName() string {
	return fmt.Sprintf("podman-executor-builds-r%s-p%s-c%s", clean(id.Runner), id.storeKey(), clean(id.Concurrent))
}

// BuildJobBuildsVolumeName is the builds volume of the build jobs of one
// runner, project and concurrent slot, when they run in a user namespace
// of their own: their checkout is not the other jobs'.
func (id Identity) BuildJobBuildsVolumeName() string { return id.BuildsVolumeName() + "-build" }

// BuildStorageVolumeName is the podman volume holding the build storage
// (layers, images) of one runner and project's build jobs.
func (id Identity) BuildStorageVolumeName() string {
	return fmt.Sprintf("podman-executor-buildstore-r%s-p%s", clean(id.Runner), id.storeKey())
}

// HelperName is the name of the job's helper container (helper_image).
func (id Identity) HelperName() string { return id.JobName() + "-helper" }

// ServiceName is the name of the job's i-th service container.
func (id Identity) ServiceName(i int) string { return fmt.Sprintf("%s-svc%d", id.JobName(), i) }

// Labels are the labels of the job's containers and network.
func (id Identity) Labels(role string, now time.Time) map[string]string {
	return map[string]string{
		LabelManaged:    "true",
		LabelGroup:      id.JobName(),
		LabelRole:       role,
		LabelRunner:     id.Runner,
		LabelProject:    id.Project,
		LabelJob:        id.Job,
		LabelConcurrent: id.Concurrent,
		LabelCreated:    now.UTC().Format(time.RFC3339),
	}
}

// ServiceAliases returns the host names a service is reachable by: its
// aliases (comma or space separated) and, as GitLab does, the image name
// without tag or digest with "/" replaced by "__" and by "-".
func ServiceAliases(s Service) []string {
	var out []string
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, a := range strings.FieldsFunc(s.Alias, func(r rune) bool { return r == ',' || r == ' ' }) {
		add(a)
	}
	repo := imageRepository(s.Name)
	add(strings.ReplaceAll(repo, "/", "__"))
	add(strings.ReplaceAll(repo, "/", "-"))
	return out
}

// qualifiedImage spells out what GitLab means by an image name: Docker Hub
// for a name without a registry, "latest" for one without a tag or digest.
func qualifiedImage(name string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", name, err)
	}
	return reference.TagNameOnly(ref).String(), nil
}

// imageRepository strips the tag and digest from an image reference,
// keeping a registry port ("host:5000/x:1" → "host:5000/x").
func imageRepository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// registryHost is the registry part of an image reference, as docker
// reads it: the first segment when it has a dot or port or is localhost.
func registryHost(ref string) string {
	first, rest, ok := strings.Cut(ref, "/")
	if ok && rest != "" && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "docker.io"
}

// validGlob checks an allowed_images / allowed_services glob. The dialect
// is doublestar's, as depsd's scope globs: "*" within a path segment,
// "**" as a whole segment across segments, "?", "[a-z]", "{a,b}".
func validGlob(g string) error {
	if strings.TrimSpace(g) == "" {
		return errors.New("empty pattern")
	}
	if !doublestar.ValidatePattern(g) {
		return errors.New("invalid pattern (unclosed [ or {, or a trailing \\)")
	}
	return nil
}

// allowed reports whether image matches one of the globs; no globs allow
// everything.
func allowed(image string, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, err := doublestar.Match(g, image); err == nil && ok {
			return true
		}
	}
	return false
}
