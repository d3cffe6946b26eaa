package gitlab

import (
	"context"
	"errors"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// The registry API through the client: repositories with their tag
// counts, tags, a tag's digest as pushed, a tag deleted (the others of
// its digest stay), and the not-found and forbidden cases classified.
func TestRegistryTags(t *testing.T) {
	host := registrytest.Start(t)
	srv := newFake(t, gitlabtest.Options{RegistryHost: host})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM scratch\n"}}))
	if err := srv.SetImages("g/app", gitlabtest.Images{Refs: []string{host + "/g/app:mr-4", host + "/g/app:depsd-validate-9"}}); err != nil {
		t.Fatal(err)
	}
	pl := must(srv.AddPipeline("g/app", "main", "push", "running"))
	if err := srv.SetPipelineStatus(pl, "success"); err != nil {
		t.Fatal(err)
	}
	pushed := srv.PublishedImages()[0].Digest
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()

	repos, err := c.ListRegistryRepositories(ctx, id)
	if err != nil || len(repos) != 1 || repos[0].Path != "g/app" || repos[0].TagsCount != 2 || repos[0].Location != host+"/g/app" {
		t.Fatalf("repositories %+v %v", repos, err)
	}
	tags, err := c.ListRegistryTags(ctx, id, repos[0].ID)
	if err != nil || len(tags) != 2 || tags[0].Name != "depsd-validate-9" || tags[1].Name != "mr-4" {
		t.Fatalf("tags %+v %v", tags, err)
	}
	tag, err := c.GetRegistryTag(ctx, id, repos[0].ID, "mr-4")
	if err != nil || tag.Digest != pushed || tag.Revision == "" || tag.TotalSize == 0 {
		t.Fatalf("tag %+v %v, want digest %s", tag, err, pushed)
	}

	dev := must(srv.AddUser("dev"))
	rep := must(srv.AddUser("rep"))
	if err := srv.AddMember("g", "dev", gitlabtest.AccessDeveloper); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddMember("g/app", "rep", gitlabtest.AccessReporter); err != nil {
		t.Fatal(err)
	}
	rc := must(c.WithToken(rep.Token, false))
	if err := rc.DeleteRegistryTag(ctx, id, repos[0].ID, "mr-4"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("reporter deletes: %v, want ErrForbidden", err)
	}
	dc := must(c.WithToken(dev.Token, false))
	if err := dc.DeleteRegistryTag(ctx, id, repos[0].ID, "mr-4"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRegistryTag(ctx, id, repos[0].ID, "mr-4"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted tag: %v, want ErrNotFound", err)
	}
	if err := dc.DeleteRegistryTag(ctx, id, repos[0].ID, "mr-4"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted twice: %v, want ErrNotFound", err)
	}
	if tag, err := c.GetRegistryTag(ctx, id, repos[0].ID, "depsd-validate-9"); err != nil || tag.Digest != pushed {
		t.Fatalf("the other tag of the digest: %+v %v, want kept at %s", tag, err, pushed)
	}
	if _, err := c.ListRegistryTags(ctx, id, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown repository: %v, want ErrNotFound", err)
	}
}
