package gitlabtest

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The container registry API (lib/api/project_container_repositories.rb)
// over the real registry the simulated pipelines push to
// (Options.RegistryHost; images.go): a project's container repositories
// are the registry's repositories at its path and below (read from the
// registry's catalog, each given an id the first time it is seen), their
// tags and digests are the registry's.
//
//   - GET /projects/:id/registry/repositories (tags, tags_count)
//   - GET …/registry/repositories/:repository_id/tags
//   - GET …/tags/:tag_name: digest, revision (the config's digest),
//     total_size (the layers'), created_at (the config's)
//   - DELETE …/tags/:tag_name (Developer): deletes that tag only, as
//     GitLab does on a registry without a tag delete API: the tag is
//     moved to an image of its own, which is then deleted by digest (the
//     registry must allow deletes: storage delete enabled).
//
// An unknown repository answers 404 "404 Not found", an unknown tag 404
// "404 Tag Not Found". Without a real registry (Options.RegistryHost
// unset) a project has no repositories.

// containerState is the ids given to repositories; guarded by Server.mu.
type containerState struct {
	nextID int64
	ids    map[string]int64 // repository path → id
	paths  map[int64]containerRepo
}

type containerRepo struct {
	id, projectID int64
	path          string // e.g. g/app or g/app/builder
	createdAt     time.Time
}

// realRegistry says whether the fake pushes to a real registry.
func (s *Server) realRegistry() bool { return s.registryHost != DefaultRegistryHost }

// projectRepositories returns the project's repositories, by path,
// reading the registry's catalog outside s.mu.
func (s *Server) projectRepositories(ctx context.Context, p *project) ([]containerRepo, error) {
	s.mu.Lock()
	projectID, prefix := p.id, strings.ToLower(p.path)
	s.mu.Unlock()
	if !s.realRegistry() {
		return nil, nil
	}
	reg, err := name.NewRegistry(s.registryHost)
	if err != nil {
		return nil, err
	}
	catalog, err := remote.Catalog(ctx, reg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := &s.containers
	if cs.ids == nil {
		cs.ids, cs.paths = map[string]int64{}, map[int64]containerRepo{}
	}
	var out []containerRepo
	for _, repo := range catalog {
		if repo != prefix && !strings.HasPrefix(repo, prefix+"/") {
			continue
		}
		id, ok := cs.ids[repo]
		if !ok {
			cs.nextID++
			id = cs.nextID
			cs.ids[repo] = id
			cs.paths[id] = containerRepo{id: id, projectID: projectID, path: repo, createdAt: s.now()}
		}
		out = append(out, cs.paths[id])
	}
	slices.SortFunc(out, func(a, b containerRepo) int { return cmp.Compare(a.path, b.path) })
	return out, nil
}

type containerTagJSON struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Location string `json:"location"`
}

type containerRepoJSON struct {
	ID                     int64               `json:"id"`
	Name                   string              `json:"name"`
	Path                   string              `json:"path"`
	ProjectID              int64               `json:"project_id"`
	Location               string              `json:"location"`
	CreatedAt              string              `json:"created_at"`
	CleanupPolicyStartedAt *string             `json:"cleanup_policy_started_at"`
	TagsCount              *int                `json:"tags_count,omitempty"`
	Tags                   *[]containerTagJSON `json:"tags,omitempty"`
	DeleteAPIPath          string              `json:"delete_api_path,omitempty"`
	Status                 *string             `json:"status"`
}

func (s *Server) tagJSON(repo containerRepo, tag string) containerTagJSON {
	return containerTagJSON{Name: tag, Path: repo.path + ":" + tag, Location: s.registryHost + "/" + repo.path + ":" + tag}
}

// registryError answers a registry read that failed.
func registryError(w http.ResponseWriter, err error) {
	writeMessage(w, http.StatusInternalServerError, "500 Internal Server Error: "+err.Error())
}

// requestRepository finds the project and its repository :repository_id,
// or answers 404.
func (s *Server) requestRepository(w http.ResponseWriter, r *http.Request) (*project, containerRepo, bool) {
	s.mu.Lock()
	p, ok := s.requestProject(w, r)
	s.mu.Unlock()
	if !ok {
		return nil, containerRepo{}, false
	}
	id, err := strconv.ParseInt(r.PathValue("repository_id"), 10, 64)
	if err != nil {
		badRequest(w, "repository_id is invalid")
		return nil, containerRepo{}, false
	}
	repos, err := s.projectRepositories(r.Context(), p)
	if err != nil {
		registryError(w, err)
		return nil, containerRepo{}, false
	}
	for _, repo := range repos {
		if repo.id == id {
			return p, repo, true
		}
	}
	writeMessage(w, http.StatusNotFound, "404 Not found")
	return nil, containerRepo{}, false
}

// listContainerRepositories is GET /projects/:id/registry/repositories.
func (s *Server) listContainerRepositories(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.requestProject(w, r)
	var maintainer bool
	if ok {
		maintainer = s.accessLevel(callerOf(r), p) >= AccessMaintainer || callerOf(r).admin
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	repos, err := s.projectRepositories(r.Context(), p)
	if err != nil {
		registryError(w, err)
		return
	}
	q := r.URL.Query()
	withTags, withCount := q.Get("tags") == "true", q.Get("tags_count") == "true"
	page := paginate(s, w, r, repos)
	out := make([]containerRepoJSON, 0, len(page))
	for _, repo := range page {
		j := containerRepoJSON{
			ID: repo.id, Name: strings.TrimPrefix(strings.TrimPrefix(repo.path, strings.ToLower(p.path)), "/"),
			Path: repo.path, ProjectID: repo.projectID, Location: s.registryHost + "/" + repo.path,
			CreatedAt: gitlabTime(repo.createdAt),
		}
		if maintainer {
			j.DeleteAPIPath = s.APIURL() + "/projects/" + strconv.FormatInt(repo.projectID, 10) +
				"/registry/repositories/" + strconv.FormatInt(repo.id, 10)
		}
		if withTags || withCount {
			tags, err := s.registryTags(r.Context(), repo)
			if err != nil {
				registryError(w, err)
				return
			}
			if withCount {
				n := len(tags)
				j.TagsCount = &n
			}
			if withTags {
				list := make([]containerTagJSON, 0, len(tags))
				for _, t := range tags {
					list = append(list, s.tagJSON(repo, t))
				}
				j.Tags = &list
			}
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

// registryTags are the repository's tags by name.
func (s *Server) registryTags(ctx context.Context, repo containerRepo) ([]string, error) {
	rr, err := name.NewRepository(s.registryHost + "/" + repo.path)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(rr, remote.WithContext(ctx))
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(tags)
	return tags, nil
}

// listContainerTags is GET …/registry/repositories/:repository_id/tags.
func (s *Server) listContainerTags(w http.ResponseWriter, r *http.Request) {
	_, repo, ok := s.requestRepository(w, r)
	if !ok {
		return
	}
	tags, err := s.registryTags(r.Context(), repo)
	if err != nil {
		registryError(w, err)
		return
	}
	page := paginate(s, w, r, tags)
	out := make([]containerTagJSON, 0, len(page))
	for _, t := range page {
		out = append(out, s.tagJSON(repo, t))
	}
	writeJSON(w, http.StatusOK, out)
}

type containerTagDetailsJSON struct {
	containerTagJSON
	Revision      *string `json:"revision"`
	ShortRevision *string `json:"short_revision"`
	Digest        string  `json:"digest"`
	CreatedAt     *string `json:"created_at"`
	TotalSize     *int64  `json:"total_size"`
}

// notTag says whether err is the registry's "no such manifest".
func notTag(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// getContainerTag is GET …/tags/:tag_name, read from the registry.
func (s *Server) getContainerTag(w http.ResponseWriter, r *http.Request) {
	_, repo, ok := s.requestRepository(w, r)
	if !ok {
		return
	}
	tag, err := name.NewTag(s.registryHost + "/" + repo.path + ":" + r.PathValue("tag_name"))
	if err != nil {
		writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		return
	}
	desc, err := remote.Get(tag, remote.WithContext(r.Context()))
	if notTag(err) {
		writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		return
	}
	if err != nil {
		registryError(w, err)
		return
	}
	out := containerTagDetailsJSON{containerTagJSON: s.tagJSON(repo, tag.TagStr()), Digest: desc.Digest.String()}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			registryError(w, err)
			return
		}
		m, err := img.Manifest()
		if err != nil {
			registryError(w, err)
			return
		}
		rev := m.Config.Digest.Hex
		short := rev[:min(9, len(rev))]
		out.Revision, out.ShortRevision = &rev, &short
		var total int64
		for _, l := range m.Layers {
			total += l.Size
		}
		out.TotalSize = &total
		if cf, err := img.ConfigFile(); err == nil && !cf.Created.IsZero() {
			out.CreatedAt = timePtr(cf.Created.Time)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteContainerTag is DELETE …/tags/:tag_name: the tag only, as GitLab
// deletes it from a registry without a tag delete API (its third-party
// DeleteTagsService): the tag is first moved to an image of its own, and
// that image is deleted, so other tags of the same digest stay.
func (s *Server) deleteContainerTag(w http.ResponseWriter, r *http.Request) {
	_, repo, ok := s.requestRepository(w, r)
	if !ok {
		return
	}
	tag, err := name.NewTag(s.registryHost + "/" + repo.path + ":" + r.PathValue("tag_name"))
	if err != nil {
		writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		return
	}
	ctx := r.Context()
	if _, err := remote.Head(tag, remote.WithContext(ctx)); err != nil {
		if notTag(err) {
			writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		} else {
			registryError(w, err)
		}
		return
	}
	cf, err := empty.Image.ConfigFile()
	if err != nil {
		registryError(w, err)
		return
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = map[string]string{"gitlabtest.deleted-tag": randomToken("", 16)}
	dummy, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		registryError(w, err)
		return
	}
	digest, err := dummy.Digest()
	if err == nil {
		err = remote.Write(tag, dummy, remote.WithContext(ctx))
	}
	if err == nil {
		err = remote.Delete(tag.Context().Digest(digest.String()), remote.WithContext(ctx))
	}
	if err != nil {
		writeMessage(w, http.StatusBadRequest, "400 Bad request: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}
