package executor

import (
	_ "crypto/sha256" // registers the digest algorithm image references are checked with
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/distribution/reference"

	"gitlab.com/depsd/depsd/podman-executor/container"
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

// NetworkName is the per-job network on which services are reachable.
func (id Identity) NetworkName() string { return id.JobName() + "-net" }

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

// compileGlob turns an allowed-images glob into a regexp: "*" matches
// within one path segment, "**" across segments, "?" one character.
func compileGlob(g string) (*regexp.Regexp, error) {
	if strings.TrimSpace(g) == "" {
		return nil, errors.New("empty pattern")
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch {
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case g[i] == '*':
			b.WriteString("[^/]*")
		case g[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// allowed reports whether image matches one of the globs; no globs allow
// everything.
func allowed(image string, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if re, err := compileGlob(g); err == nil && re.MatchString(image) {
			return true
		}
	}
	return false
}

// parseVolume reads "host:container[:ro|rw]".
func parseVolume(v string) (container.Mount, error) {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") {
		return container.Mount{}, fmt.Errorf("driver config: volume %q: want host:container[:ro]", v)
	}
	m := container.Mount{Source: parts[0], Destination: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return container.Mount{}, fmt.Errorf("driver config: volume %q: mode must be ro or rw", v)
		}
	}
	return m, nil
}
