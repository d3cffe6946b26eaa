package gitlab

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

func tagNames(ts []Tag) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// Tags through the client: every page, GitLab's search and orders, a tag's
// commit, creation and its conflict, deletion and the 404 after; and a
// pipeline created on a tag.
func TestTags(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "infra/base", Files: map[string]string{"Containerfile": "FROM debian\n"}}))
	for _, name := range []string{"v3.1.0", "v3.10.0", "v3.2.1", "v3.2.1-rc1", "nightly"} {
		if err := srv.CreateTag("infra/base", name, "main"); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newClient(t, srv, func(cfg *Config) { cfg.PerPage = 2 })
	ctx := context.Background()
	for _, tt := range []struct {
		search, order string
		want          []string
	}{
		{"^v", TagsByVersion, []string{"v3.10.0", "v3.2.1-rc1", "v3.2.1", "v3.1.0"}},
		{"", TagsByName, []string{"v3.2.1-rc1", "v3.2.1", "v3.10.0", "v3.1.0", "nightly"}},
		{"rc1$", "", []string{"v3.2.1-rc1"}},
		{"NIGHT", "", []string{"nightly"}},
	} {
		srv.ResetRequests()
		got, err := c.ListTags(ctx, id, tt.search, tt.order)
		if err != nil || !slices.Equal(tagNames(got), tt.want) {
			t.Errorf("ListTags(%q, %q) = %v, %v; want %v", tt.search, tt.order, tagNames(got), err, tt.want)
		}
		if n, want := srv.Requests("GET /projects/:id/repository/tags"), int64(max(1, (len(tt.want)+1)/2)); n != want {
			t.Errorf("ListTags(%q, %q): %d requests, want %d (pages of 2)", tt.search, tt.order, n, want)
		}
	}
	head := srv.Branches("infra/base")["main"]
	mustDo(srv.SetFile("infra/base", "Containerfile", "FROM debian:13\n"))
	created, err := c.CreateTag(ctx, id, "v4.0.0", "main", "Release 4")
	if err != nil || created.Name != "v4.0.0" || created.Message != "Release 4" || created.CommitSHA == head || created.CommittedAt.IsZero() {
		t.Fatalf("CreateTag = %+v, %v", created, err)
	}
	if got, err := c.GetTag(ctx, id, "v3.1.0"); err != nil || got.CommitSHA != head || got.Message != "" {
		t.Fatalf("GetTag = %+v, %v", got, err)
	}
	if _, err := c.CreateTag(ctx, id, "v4.0.0", "main", ""); !errors.Is(err, ErrConflict) || !IsPermanent(err) || !strings.Contains(err.Error(), "Tag v4.0.0 already exists") {
		t.Fatalf("CreateTag of an existing tag: %v", err)
	}
	if _, err := c.CreateTag(ctx, id, "v5", "nope", ""); err == nil || errors.Is(err, ErrConflict) || !IsPermanent(err) {
		t.Fatalf("CreateTag at a missing ref: %v", err)
	}
	p, err := c.CreatePipeline(ctx, id, "v4.0.0", CreateOptions{})
	if err != nil || p.Ref != "v4.0.0" || p.SHA != created.CommitSHA {
		t.Fatalf("CreatePipeline on a tag = %+v, %v", p, err)
	}
	if pls := srv.Pipelines("infra/base"); !pls[len(pls)-1].Tag {
		t.Fatalf("pipeline on a tag is not a tag pipeline: %+v", pls[len(pls)-1])
	}
	if err := c.DeleteTag(ctx, id, "v4.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTag(ctx, id, "v4.0.0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetTag of a deleted tag: %v", err)
	}
	if err := c.DeleteTag(ctx, id, "v4.0.0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeleteTag of a deleted tag: %v", err)
	}
}

// Branches through the client: list with search, get with the token's
// rights, create (its conflict), delete (the default branch refused).
func TestBranches(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "lang/ruby", Files: map[string]string{"Containerfile": "FROM base:trixie\n"}}))
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()
	for _, name := range []string{"bookworm", "release/3.3", "release/3.4"} {
		if b, err := c.CreateBranch(ctx, id, name, "main"); err != nil || b.Name != name || b.CommitSHA != srv.Branches("lang/ruby")["main"] || !b.CanPush {
			t.Fatalf("CreateBranch(%s) = %+v, %v", name, b, err)
		}
	}
	if _, err := c.CreateBranch(ctx, id, "bookworm", "main"); !errors.Is(err, ErrConflict) {
		t.Fatalf("CreateBranch of an existing branch: %v", err)
	}
	var names []string
	for _, b := range must(c.ListBranches(ctx, id, "^release/")) {
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"release/3.3", "release/3.4"}) {
		t.Fatalf("ListBranches(^release/) = %v", names)
	}
	if all := must(c.ListBranches(ctx, id, "")); len(all) != 4 {
		t.Fatalf("ListBranches = %+v", all)
	}
	main, err := c.GetBranch(ctx, id, "main")
	if err != nil || !main.Default || !main.Protected || main.CanPush || main.DevelopersCanPush {
		t.Fatalf("GetBranch(main) as a Developer = %+v, %v", main, err)
	}
	if _, err := c.GetBranch(ctx, id, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetBranch(nope): %v", err)
	}
	if err := c.DeleteBranch(ctx, id, "main"); err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), "default branch") {
		t.Fatalf("DeleteBranch(main): %v", err)
	}
	if err := c.DeleteBranch(ctx, id, "release/3.3"); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Branches("lang/ruby")["release/3.3"]; ok {
		t.Fatal("release/3.3 is still there")
	}
}

// Commits through the client: a commit on a new branch from the default
// branch, with the file's last commit as the guard; then the refusals a
// pin update meets: the protected default branch (ErrForbidden), the
// branch existing without force, a file changed since it was read
// (ErrConflict); force replaces the branch.
func TestCreateCommit(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "apps/shop", Files: map[string]string{
		"Containerfile": "FROM ruby@sha256:aaa\n", "README.md": "shop\n",
	}}))
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()
	mustDo(srv.SetFile("apps/shop", "README.md", "shop!\n"))
	f, err := c.ReadFile(ctx, id, "Containerfile", "main")
	if err != nil || string(f.Content) != "FROM ruby@sha256:aaa\n" || f.CommitSHA != srv.Branches("apps/shop")["main"] || f.LastCommitSHA == f.CommitSHA {
		t.Fatalf("ReadFile = %+v, %v", f, err)
	}
	if _, err := c.ReadFile(ctx, id, "nope", "main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadFile(nope): %v", err)
	}
	pin := func(digest string) CommitRequest {
		return CommitRequest{Branch: "depsd/pins", StartBranch: "main", Message: "Move the ruby pin",
			Actions: []CommitAction{{Action: ActionUpdate, Path: "Containerfile", Content: "FROM ruby@sha256:" + digest + "\n", LastCommitID: f.LastCommitSHA}}}
	}
	cm, err := c.CreateCommit(ctx, id, pin("bbb"))
	if err != nil || cm.Title != "Move the ruby pin" || !slices.Equal(cm.ParentSHAs, []string{f.CommitSHA}) || cm.SHA != srv.Branches("apps/shop")["depsd/pins"] {
		t.Fatalf("CreateCommit = %+v, %v", cm, err)
	}
	if got := srv.Files("apps/shop", "depsd/pins")["Containerfile"]; got != "FROM ruby@sha256:bbb\n" {
		t.Fatalf("Containerfile on depsd/pins: %q", got)
	}
	if _, err := c.CreateCommit(ctx, id, pin("ccc")); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second commit without force: %v", err)
	}
	direct := pin("ccc")
	direct.Branch, direct.StartBranch = "main", ""
	if _, err := c.CreateCommit(ctx, id, direct); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "not allowed to push into this branch") {
		t.Fatalf("a Developer's commit to main: %v", err)
	}
	mustDo(srv.SetFile("apps/shop", "Containerfile", "FROM ruby@sha256:zzz\n"))
	forced := pin("ccc")
	forced.Force = true
	if _, err := c.CreateCommit(ctx, id, forced); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "has changed since you started editing") {
		t.Fatalf("a commit over a changed file: %v", err)
	}
	f = must(c.ReadFile(ctx, id, "Containerfile", "main"))
	forced.Actions[0].LastCommitID = f.LastCommitSHA
	cm, err = c.CreateCommit(ctx, id, forced)
	if err != nil || !slices.Equal(cm.ParentSHAs, []string{srv.Branches("apps/shop")["main"]}) {
		t.Fatalf("forced commit = %+v, %v", cm, err)
	}
	missing := CommitRequest{Branch: "depsd/pins", Message: "m", Actions: []CommitAction{{Action: ActionUpdate, Path: "nope", Content: "x"}}}
	if _, err := c.CreateCommit(ctx, id, missing); err == nil || errors.Is(err, ErrConflict) || !IsPermanent(err) || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("update of a missing file: %v", err)
	}
	srv.ResetRequests()
	srv.Fail(gitlabtest.Fault{Endpoint: "POST /projects/:id/repository/commits", Status: 502, Times: 3})
	if _, err := c.CreateCommit(ctx, id, forced); !IsRetryable(err) || srv.Requests("POST /projects/:id/repository/commits") != 1 {
		t.Fatalf("a 5xx on a commit: %v after %d requests, want one, retryable", err, srv.Requests("POST /projects/:id/repository/commits"))
	}
	srv.ClearFaults()
}

func mustDo[T any](v T, err error) T { return must(v, err) }
