package gitlabtest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The registry side of simulated pipelines: a project given Images pushes
// them to a real registry when one of its pipelines succeeds, built as a
// build job would build them (its upstream's current image for each
// platform, plus a layer of its own), before the success is reported.

// Images says what a project's successful pipelines push.
type Images struct {
	// Refs are the references pushed (host/path:tag), all the same image.
	// Empty: the project's registry prefix with tag latest.
	Refs []string
	// From is the image the built stage is FROM (host/path:tag, or
	// host/path@sha256:… for a Containerfile that pins its base), read
	// from the registry at each push; empty: FROM scratch, the image is
	// the project's own layer alone.
	From string
	// Platforms are built, as one index when there are several; empty:
	// linux/amd64. An upstream index must have each of them.
	Platforms []v1.Platform
	// Annotate writes org.opencontainers.image.base.digest and base.name
	// on each manifest, as buildah and podman build do (BuildKit does not).
	// The digest is what From's tag resolved to (an index or a manifest).
	Annotate bool
}

// PublishPlan changes what one pipeline of a project pushes.
type PublishPlan struct {
	// From builds on this digest of Images.From instead of its current
	// image: a build on a stale base (a layer cache, a pinned digest).
	From string
	// Nothing: the pipeline succeeds and pushes nothing.
	Nothing bool
}

// What a simulated pipeline pushes, and builds on, follows the build
// component (templates/image-build.yml, docs/build-component.md):
//   - a merge request pipeline (source merge_request_event) pushes only
//     the candidate, the repository of Images.Refs' first reference
//     with tag mr-<iid>; a pipeline of a branch with open merge requests
//     from it pushes their candidates besides Images.Refs;
//   - a validation (the depsd_validate input, or DEPSD_VALIDATE=1)
//     pushes only depsd_validate_tag (DEPSD_VALIDATE_TAG) in that
//     repository, or nothing;
//   - depsd_build_contexts (DEPSD_BUILD_CONTEXTS) naming Images.From, as
//     the FROM writes it, or an ARG (a name without a /) whose value is
//     in From's repository, builds on the REF@DIGEST it gives instead;
//   - BreakBuildOn: a build on that base digest fails (a package the
//     project installs that the base no longer has).

// build is what one pipeline's build does, from its kind and what depsd
// passed it.
type build struct {
	refs     []string // pushed; nil: Images.Refs
	nothing  bool     // pushes nothing
	from     string   // REF@DIGEST to build on instead of From; ""
	validate bool
}

// buildOf says what pipeline pipelineID's build does (the zero build for
// an unknown pipeline).
func (s *Server) buildOf(pipelineID int64, im Images) build {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.inst.pipelines[pipelineID]
	if !ok {
		return build{}
	}
	param := func(input, variable string) string {
		if v, ok := pl.inputs[input]; ok {
			return fmt.Sprint(v)
		}
		for _, v := range pl.vars {
			if v.Key == variable {
				return v.Value
			}
		}
		return ""
	}
	repo := ""
	if len(im.Refs) > 0 {
		if t, err := name.NewTag(im.Refs[0]); err == nil {
			repo = t.Context().Name()
		}
	}
	var b build
	switch v := param("depsd_validate", "DEPSD_VALIDATE"); {
	case v == "true" || v == "1":
		b.validate, b.nothing = true, true
		if tag := param("depsd_validate_tag", "DEPSD_VALIDATE_TAG"); tag != "" && repo != "" {
			b.refs, b.nothing = []string{repo + ":" + tag}, false
		}
	case pl.source == "merge_request_event" && pl.mrIID != 0 && repo != "":
		b.refs = []string{fmt.Sprintf("%s:mr-%d", repo, pl.mrIID)}
	case !pl.tag && repo != "":
		// A branch with open merge requests from it pushes their
		// candidates too (CI_OPEN_MERGE_REQUESTS).
		if p, ok := s.inst.projects[pl.projectID]; ok && pl.ref != p.defaultBranch {
			for _, mr := range p.mrs {
				if mr.state == mrOpened && mr.source == pl.ref {
					b.refs = append(b.refs, fmt.Sprintf("%s:mr-%d", repo, mr.iid))
				}
			}
			if b.refs != nil {
				b.refs = append(slices.Clone(im.Refs), b.refs...)
			}
		}
	}
	if im.From != "" {
		fromRepo := ""
		if r, err := name.ParseReference(im.From); err == nil {
			fromRepo = r.Context().Name()
		}
		for _, c := range strings.Fields(param("depsd_build_contexts", "DEPSD_BUILD_CONTEXTS")) {
			n, value, ok := strings.Cut(c, "=")
			ref, isImage := strings.CutPrefix(value, "docker-image://")
			if !ok || !isImage {
				continue
			}
			r, err := name.ParseReference(ref)
			if err != nil {
				continue
			}
			if n == im.From || (!strings.Contains(n, "/") && r.Context().Name() == fromRepo) {
				b.from = ref
			}
		}
	}
	return b
}

// BreakBuildOn makes the project's builds on the base image digest fail,
// as a build does whose base lost something it needs.
func (s *Server) BreakBuildOn(projectPath, baseDigest string) {
	rs := &s.registry
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.breaks == nil {
		rs.breaks = map[string]map[string]bool{}
	}
	if rs.breaks[projectPath] == nil {
		rs.breaks[projectPath] = map[string]bool{}
	}
	rs.breaks[projectPath][baseDigest] = true
}

// Published is one push of a project's image.
type Published struct {
	Project    string
	PipelineID int64
	Ref        string
	Digest     string // the pushed manifest or index
	// BaseDigest is the upstream digest the image was built on (empty
	// for FROM scratch).
	BaseDigest string
}

// registrySide is the images state, guarded by its own lock: pushes run
// outside s.mu.
type registrySide struct {
	mu        sync.Mutex
	images    map[string]Images        // by project path
	plans     map[string][]PublishPlan // by project path, for the next pipelines
	published []Published
	failures  []error
	breaks    map[string]map[string]bool // by project path: base digests its builds fail on
}

// SetImages makes the project's successful pipelines push images; a zero
// Images stops them.
func (s *Server) SetImages(projectPath string, im Images) error {
	s.mu.Lock()
	p, ok := s.inst.findProject(projectPath)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("set images of %s: project not found", projectPath)
	}
	rs := &s.registry
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if im.Refs == nil && im.From == "" && im.Platforms == nil && !im.Annotate {
		delete(rs.images, p.path)
		return nil
	}
	if len(im.Refs) == 0 {
		im.Refs = []string{s.registryHost + "/" + strings.ToLower(p.path) + ":latest"}
	}
	for _, r := range im.Refs {
		if _, err := name.NewTag(r); err != nil {
			return fmt.Errorf("set images of %s: %w", projectPath, err)
		}
	}
	if _, err := name.ParseReference(im.From); im.From != "" && err != nil {
		return fmt.Errorf("set images of %s: %w", projectPath, err)
	}
	if rs.images == nil {
		rs.images = map[string]Images{}
	}
	rs.images[p.path] = im
	return nil
}

// PlanPublish changes what the project's next successful pipeline
// pushes; plans queue up, one per pipeline.
func (s *Server) PlanPublish(projectPath string, plan PublishPlan) {
	rs := &s.registry
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.plans == nil {
		rs.plans = map[string][]PublishPlan{}
	}
	rs.plans[projectPath] = append(rs.plans[projectPath], plan)
}

// PublishFailures returns why pipelines failed to push, in order (each
// such pipeline ended failed).
func (s *Server) PublishFailures() []error {
	rs := &s.registry
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.failures)
}

// PublishedImages returns every push so far, in order.
func (s *Server) PublishedImages() []Published {
	rs := &s.registry
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.published)
}

// publishFor is publish for a pipeline known by id.
func (s *Server) publishFor(ctx context.Context, pipelineID int64) error {
	s.mu.Lock()
	var path string
	if pl, ok := s.inst.pipelines[pipelineID]; ok {
		path = s.projectPath(pl)
	}
	s.mu.Unlock()
	if path == "" {
		return nil
	}
	return s.publish(ctx, path, pipelineID)
}

// pathOf is the path of pl's project.
func (s *Server) pathOf(pl *pipeline) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.projectPath(pl)
}

// projectPath is the path of pl's project. Callers hold s.mu.
func (s *Server) projectPath(pl *pipeline) string {
	if p, ok := s.inst.projects[pl.projectID]; ok {
		return p.path
	}
	return ""
}

// publish pushes the images of pipeline pl's project, if it has any. It
// runs outside s.mu, before the pipeline's success is set: an error makes
// the pipeline fail, as a job whose push fails does.
func (s *Server) publish(ctx context.Context, projectPath string, pipelineID int64) error {
	err := s.pushImages(ctx, projectPath, pipelineID)
	if err != nil {
		s.registry.mu.Lock()
		s.registry.failures = append(s.registry.failures, fmt.Errorf("pipeline %d: %w", pipelineID, err))
		s.registry.mu.Unlock()
	}
	return err
}

func (s *Server) pushImages(ctx context.Context, projectPath string, pipelineID int64) error {
	rs := &s.registry
	rs.mu.Lock()
	im, ok := rs.images[projectPath]
	var plan PublishPlan
	if ok && len(rs.plans[projectPath]) > 0 {
		plan = rs.plans[projectPath][0]
		rs.plans[projectPath] = rs.plans[projectPath][1:]
	}
	rs.mu.Unlock()
	if !ok || plan.Nothing {
		return nil
	}
	b := s.buildOf(pipelineID, im)
	if b.from != "" {
		im.From, plan.From = b.from, ""
	}
	idx, img, base, err := buildImages(ctx, im, plan, fmt.Sprintf("%s pipeline %d\n", projectPath, pipelineID))
	if err != nil {
		return fmt.Errorf("publish images of %s: %w", projectPath, err)
	}
	rs.mu.Lock()
	broken := rs.breaks[projectPath][base]
	rs.mu.Unlock()
	if broken {
		return fmt.Errorf("build of %s on %s: the base lacks what the project installs", projectPath, base)
	}
	refs := im.Refs
	switch {
	case b.nothing:
		refs = nil
	case b.refs != nil:
		refs = b.refs
	}
	var pushed []Published
	for _, ref := range refs {
		tag, _ := name.NewTag(ref)
		var d v1.Hash
		if idx != nil {
			err = remote.WriteIndex(tag, idx, remote.WithContext(ctx))
			d, _ = idx.Digest()
		} else {
			err = remote.Write(tag, img, remote.WithContext(ctx))
			d, _ = img.Digest()
		}
		if err != nil {
			return fmt.Errorf("publish %s: %w", ref, err)
		}
		pushed = append(pushed, Published{Project: projectPath, PipelineID: pipelineID, Ref: ref, Digest: d.String(), BaseDigest: base})
	}
	rs.mu.Lock()
	rs.published = append(rs.published, pushed...)
	rs.mu.Unlock()
	return nil
}

// buildImages builds the project's image: an index when several
// platforms are built, else one image. base is the upstream digest used.
func buildImages(ctx context.Context, im Images, plan PublishPlan, own string) (idx v1.ImageIndex, img v1.Image, base string, err error) {
	platforms := im.Platforms
	if len(platforms) == 0 {
		platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	}
	var from *remote.Descriptor
	if im.From != "" {
		ref := im.From
		if plan.From != "" {
			r, err := name.ParseReference(im.From)
			if err != nil {
				return nil, nil, "", err
			}
			ref = r.Context().Name() + "@" + plan.From
		}
		r, err := name.ParseReference(ref)
		if err != nil {
			return nil, nil, "", err
		}
		if from, err = remote.Get(r, remote.WithContext(ctx)); err != nil {
			return nil, nil, "", fmt.Errorf("read the base %s: %w", ref, err)
		}
		base = from.Digest.String()
	}
	layer, err := ownLayer(own)
	if err != nil {
		return nil, nil, "", err
	}
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		b, err := baseFor(from, p)
		if err != nil {
			return nil, nil, "", err
		}
		one, err := built(b, p, layer, im, base)
		if err != nil {
			return nil, nil, "", err
		}
		if len(platforms) == 1 {
			return nil, one, base, nil
		}
		adds = append(adds, mutate.IndexAddendum{Add: one, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex), nil, base, nil
}

// baseFor is the upstream's image for platform p (nil: scratch).
func baseFor(from *remote.Descriptor, p v1.Platform) (v1.Image, error) {
	if from == nil {
		return nil, nil
	}
	if !from.MediaType.IsIndex() {
		return from.Image()
	}
	idx, err := from.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture && d.Platform.Variant == p.Variant {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the base %s has no image for %s", from.Digest, p.String())
}

// built is base plus layer, as an OCI image for p.
func built(base v1.Image, p v1.Platform, layer v1.Layer, im Images, baseDigest string) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	var layers []v1.Layer
	if base != nil {
		ls, err := base.Layers()
		if err != nil {
			return nil, err
		}
		layers = ls
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	if img, err = mutate.AppendLayers(img, append(layers, layer)...); err != nil {
		return nil, err
	}
	if im.Annotate {
		img = mutate.Annotations(img, map[string]string{
			"org.opencontainers.image.base.digest": baseDigest,
			"org.opencontainers.image.base.name":   im.From,
		}).(v1.Image)
	}
	return img, nil
}

// ownLayer is a gzip layer holding one file that names the pipeline, so
// each pipeline's image differs.
func ownLayer(content string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "etc/depsd-pipeline", Mode: 0o644, Size: int64(len(content))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write([]byte(content)); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}
