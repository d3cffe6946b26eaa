package verify

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// Project is what deciding a node's published images needs of it: one
// per node of each project (its default branch, each followed ref;
// docs/design/nodes.md).
type Project struct {
	// Path is the node's key: the project's path for its default branch.
	Path string
	// Kind and Ref say which node: its branch (the default branch for
	// the default node), or for the release tags the newest release tag.
	Kind deps.NodeKind
	Ref  string
	// RegistryPrefix is where its images live (host/path): GitLab's
	// container_registry_image_prefix, or the configured registry with
	// the project's path, as the scan maps images to projects.
	RegistryPrefix string
	// Dependencies are its own, as the scan found them: downstreams'
	// references to it say which of its images are consumed.
	Dependencies []deps.Dependency
	// Built are the images its built stage is FROM
	// (deps.FileAnalysis.Built). Nil: every FROM dependency counts (an
	// image is then unknown against the bases of its builder stages).
	Built []string
}

// PublishRules are the images declared in depsd.yaml (images.publish) on
// top of those downstreams name.
type PublishRules struct {
	// Publish are templates of references every project publishes:
	// {registry} is the host of its registry prefix, {path} the rest
	// ("{registry}/{path}:latest").
	Publish []string
	// Overrides replace Publish for the projects they match: the first
	// whose Match (a project path, or a glob as path.Match reads it)
	// matches.
	Overrides []PublishOverride
	// Refs are `refs:`: a project a rule matches publishes, at each node,
	// what the rule's templates give for that ref.
	Refs deps.RefRules
}

// PublishOverride is the published images of some projects.
type PublishOverride struct {
	Match   string
	Publish []string
}

// Image is one image a project publishes.
type Image struct {
	Image string `json:"image"` // normalised: host/path:tag
	// Declared: named in images.publish (else only by downstreams).
	Declared bool `json:"declared,omitempty"`
	// Upstreams are the images its built stage is FROM, as their
	// upstreams publish them: a reference the Containerfile pins by
	// digest is named here by its tag (ruby:3 for ruby:3@sha256:…; for a
	// digest alone, the tag its project publishes in that repository),
	// since an image is judged against its upstream's current image,
	// never against the digest its own Containerfile names.
	Upstreams []string `json:"upstreams"`
	// Pins are the digests the Containerfile pins some Upstreams to, by
	// upstream.
	Pins map[string]string `json:"pins,omitempty"`
}

// Published gives, per project path, the images it publishes, sorted: by
// default every image reference in the projects' dependencies that the
// scan mapped to it (FROM, COPY --from, RUN --mount from, with their
// tags; a reference pinned by digest alone names the tag the project
// publishes in that repository, else latest), plus what rules declare. Each image is judged against the project's Built
// images. A template that does not give a valid reference for a project
// is an error naming both; the other images are still returned.
func Published(projects []Project, rules PublishRules) (map[string][]Image, []error) {
	named := map[string]map[string]bool{} // project → image → declared
	add := func(project, image string, declared bool) {
		if named[project] == nil {
			named[project] = map[string]bool{}
		}
		named[project][image] = named[project][image] || declared
	}
	known := map[string]bool{}
	for _, p := range projects {
		known[p.Path] = true
	}
	for _, p := range projects {
		for _, d := range p.Dependencies {
			up := d.UpstreamNode()
			if d.Project == "" || up == p.Path || !known[up] || d.Repository == "" || d.Tag == "" {
				continue
			}
			add(up, d.Repository+":"+d.Tag, false)
		}
	}
	var errs []error
	for _, p := range projects {
		project := deps.NodeProject(p.Path)
		if p.Path == project { // images.publish: a project's, at its default branch
			for _, tmpl := range rules.For(project) {
				ref, err := Expand(tmpl, p.RegistryPrefix)
				if err != nil {
					errs = append(errs, fmt.Errorf("images.publish %q for %s: %w", tmpl, p.Path, err))
					continue
				}
				add(p.Path, ref, true)
			}
		}
		rule, ok := rules.Refs.For(project)
		if !ok {
			continue
		}
		rel, _ := deps.ParseRelease(p.Ref)
		for _, tmpl := range rule.Templates(p.Kind, p.Ref, p.Ref) {
			ref, err := deps.ExpandPublish(tmpl, p.RegistryPrefix, p.Kind, p.Ref, rel)
			if err != nil {
				errs = append(errs, fmt.Errorf("refs publish %q for %s: %w", tmpl, p.Path, err))
				continue
			}
			add(p.Path, ref, true)
		}
	}
	// A reference pinned by digest alone stands for the tag its upstream
	// publishes in that repository, else latest (unpinned): that image is
	// published, so that its digest is read when the upstream is built
	// (what the pin moves to).
	for _, p := range projects {
		for _, d := range p.Dependencies {
			up := d.UpstreamNode()
			if d.Project == "" || up == p.Path || !known[up] || d.Repository == "" || d.Tag != "" || d.Digest == "" {
				continue
			}
			has := false
			for ref := range named[up] {
				has = has || repositoryOf(ref) == d.Repository
			}
			if !has {
				add(up, d.Repository+":latest", false)
			}
		}
	}
	out := map[string][]Image{}
	for _, p := range projects {
		if len(named[p.Path]) == 0 {
			continue
		}
		ups, pins := upstreams(p, named)
		for img, declared := range named[p.Path] {
			out[p.Path] = append(out[p.Path], Image{Image: img, Declared: declared, Upstreams: ups, Pins: pins})
		}
		slices.SortFunc(out[p.Path], func(a, b Image) int { return strings.Compare(a.Image, b.Image) })
	}
	return out, errs
}

// For returns the templates that apply to project.
func (r PublishRules) For(project string) []string {
	for _, o := range r.Overrides {
		if o.Match == project {
			return o.Publish
		}
		if ok, _ := path.Match(o.Match, project); ok {
			return o.Publish
		}
	}
	return r.Publish
}

// upstreams are the references p's images are judged against, and the
// digests p's Containerfile pins some of them to (nil when none is
// pinned); named are the images each project publishes.
func upstreams(p Project, named map[string]map[string]bool) ([]string, map[string]string) {
	refs := p.Built
	if refs == nil {
		for _, d := range p.Dependencies {
			if d.Kind == deps.KindFrom && d.Image != "" && d.Project != p.Path && !slices.Contains(refs, d.Image) {
				refs = append(refs, d.Image)
			}
		}
	}
	var out []string
	var pins map[string]string
	for _, ref := range refs {
		img, err := deps.NormalizeImage(ref)
		if err != nil || img.Digest == "" {
			out = append(out, ref)
			continue
		}
		current := unpinned(img, upstreamProject(p, ref), named)
		if pins == nil {
			pins = map[string]string{}
		}
		pins[current] = img.Digest
		if !slices.Contains(out, current) {
			out = append(out, current)
		}
	}
	return out, pins
}

// unpinned names the published image a pinned reference stands for: its
// own tag, else the tag its project publishes in that repository
// (latest when it publishes it or several others, or when the project is
// unknown).
func unpinned(img deps.ImageRef, project string, named map[string]map[string]bool) string {
	if img.Tag != "" {
		return img.Repository + ":" + img.Tag
	}
	var same []string
	for ref := range named[project] {
		if r, err := deps.NormalizeImage(ref); err == nil && r.Repository == img.Repository {
			same = append(same, ref)
		}
	}
	if len(same) == 1 {
		return same[0]
	}
	return img.Repository + ":latest"
}

// upstreamProject is the node p's dependency on ref names, if known.
func upstreamProject(p Project, ref string) string {
	for _, d := range p.Dependencies {
		if d.Image == ref {
			return d.UpstreamNode()
		}
	}
	return ""
}

var placeholder = regexp.MustCompile(`\{[^}]*\}`)

// Expand fills a template's {registry} and {path} from a project's
// registry prefix (host/path) and normalises the result.
func Expand(tmpl, prefix string) (string, error) {
	var bad []string
	for _, m := range placeholder.FindAllString(tmpl, -1) {
		if m != "{registry}" && m != "{path}" {
			bad = append(bad, m)
		}
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("unknown placeholder %s: want {registry} and {path}", strings.Join(bad, ", "))
	}
	host, p, _ := strings.Cut(strings.Trim(prefix, "/"), "/")
	if strings.Contains(tmpl, "{") && (host == "" || p == "") {
		return "", fmt.Errorf("the project has no container registry (no registry prefix): set registry in depsd.yaml or enable the project's registry")
	}
	ref := strings.NewReplacer("{registry}", host, "{path}", p).Replace(tmpl)
	img, err := deps.NormalizeImage(ref)
	if err != nil {
		return "", err
	}
	if img.Tag == "" {
		return "", fmt.Errorf("%s names a digest: a published image is a tag", ref)
	}
	return img.Repository + ":" + img.Tag, nil
}

// CheckTemplate says whether tmpl gives a valid reference, with an
// example project: for configuration checks.
func CheckTemplate(tmpl string) error {
	_, err := Expand(tmpl, "registry.example.com/group/project")
	return err
}

// repositoryOf is a published reference (host/path:tag) without its tag.
func repositoryOf(ref string) string {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[:i]
	}
	return ref
}
