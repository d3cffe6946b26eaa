package gitlabtest

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"gitlab.com/depsd/depsd/registry/registrytest"
)

type repoOut struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Path      string `json:"path"`
	Location  string `json:"location"`
	TagsCount *int   `json:"tags_count"`
	Tags      []struct {
		Name string `json:"name"`
	} `json:"tags"`
}

// publishedFixture: g/app pushed :1 and :latest (one image) and
// g/app/builder:x to a real registry; g/other pushed nothing.
func publishedFixture(t *testing.T) (*Server, string) {
	t.Helper()
	host := registrytest.Start(t)
	s := New(Options{RegistryHost: host})
	t.Cleanup(s.Close)
	seed(t, s, "g/app", "g/other")
	if err := s.SetImages("g/app", Images{Refs: []string{host + "/g/app:1", host + "/g/app:latest", host + "/g/app/builder:x"}}); err != nil {
		t.Fatal(err)
	}
	id := mustDo[int64](t)(s.AddPipeline("g/app", "main", "push", "running"))
	if err := s.SetPipelineStatus(id, "success"); err != nil {
		t.Fatal(err)
	}
	if f := s.PublishFailures(); len(f) > 0 {
		t.Fatal(f)
	}
	return s, host
}

// The registry API lists a project's repositories and tags from the real
// registry, details a tag with the registry's digest, and deletes one tag
// while its digest's other tags stay; unknown repositories and tags are
// GitLab's 404s.
func TestRegistryTags(t *testing.T) {
	s, host := publishedFixture(t)
	code, body := callAs(t, s, s.Token, "GET", "/projects/g%2Fapp/registry/repositories?tags=true&tags_count=true", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	repos := decode[[]repoOut](t, body)
	if len(repos) != 2 || repos[0].Path != "g/app" || repos[0].Name != "" || repos[1].Name != "builder" ||
		repos[0].Location != host+"/g/app" || repos[0].TagsCount == nil || *repos[0].TagsCount != 2 ||
		len(repos[0].Tags) != 2 || repos[0].Tags[0].Name != "1" {
		t.Fatalf("repositories %s", body)
	}
	if code, body := callAs(t, s, s.Token, "GET", "/projects/g%2Fother/registry/repositories", nil); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("g/other: %d %s", code, body)
	}
	root := "/projects/g%2Fapp/registry/repositories/" + itoa(repos[0].ID)
	code, body = callAs(t, s, s.Token, "GET", root+"/tags", nil)
	if code != 200 || !strings.Contains(body, `"path":"g/app:latest"`) {
		t.Fatalf("tags: %d %s", code, body)
	}
	published := s.PublishedImages()
	code, body = callAs(t, s, s.Token, "GET", root+"/tags/latest", nil)
	detail := decode[map[string]any](t, body)
	if code != 200 || detail["digest"] != published[1].Digest || detail["revision"] == nil || detail["total_size"] == nil {
		t.Fatalf("tag detail: %d %s, want digest %s", code, body, published[1].Digest)
	}

	if code, body := callAs(t, s, s.Token, "DELETE", root+"/tags/latest", nil); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if _, err := remote.Head(must(name.NewTag(host + "/g/app:latest"))); err == nil {
		t.Fatal("g/app:latest still in the registry")
	}
	d, err := remote.Head(must(name.NewTag(host + "/g/app:1")))
	if err != nil || d.Digest.String() != published[0].Digest {
		t.Fatalf("g/app:1 after deleting latest: %v %v, want it kept at %s", d, err, published[0].Digest)
	}

	for _, tt := range []struct{ method, path, want string }{
		{"GET", root + "/tags/latest", "404 Tag Not Found"},
		{"DELETE", root + "/tags/latest", "404 Tag Not Found"},
		{"GET", "/projects/g%2Fapp/registry/repositories/999/tags", "404 Not found"},
		{"GET", "/projects/g%2Fother/registry/repositories/" + itoa(repos[0].ID) + "/tags", "404 Not found"},
	} {
		if code, body := callAs(t, s, s.Token, tt.method, tt.path, nil); code != 404 || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s: %d %s, want 404 %s", tt.method, tt.path, code, body, tt.want)
		}
	}
}

// A Reporter reads a private project's registry but cannot delete a tag.
func TestRegistryRoles(t *testing.T) {
	s, _ := publishedFixture(t)
	rep := mustDo[User](t)(s.AddUser("rep"))
	out := mustDo[User](t)(s.AddUser("out"))
	if err := s.AddMember("g/app", "rep", AccessReporter); err != nil {
		t.Fatal(err)
	}
	code, body := callAs(t, s, rep.Token, "GET", "/projects/g%2Fapp/registry/repositories", nil)
	if code != 200 {
		t.Fatalf("reporter lists: %d %s", code, body)
	}
	id := itoa(decode[[]repoOut](t, body)[0].ID)
	if code, _ := callAs(t, s, rep.Token, "DELETE", "/projects/g%2Fapp/registry/repositories/"+id+"/tags/1", nil); code != 403 {
		t.Fatalf("reporter deletes: %d, want 403", code)
	}
	if code, _ := callAs(t, s, out.Token, "GET", "/projects/g%2Fapp/registry/repositories", nil); code != 404 {
		t.Fatalf("outsider lists: %d, want 404", code)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
