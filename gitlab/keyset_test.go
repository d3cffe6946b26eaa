package gitlab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// TestInstanceScopeListsPastTheOffsetLimit: GitLab refuses offset
// pagination of GET /projects past its offset pagination limit (50,000;
// lowered here so the test stays small, see
// TestInstanceScopeListsSixtyThousand for the real one); the instance scope
// reads it with keyset pages and lists every project once.
func TestInstanceScopeListsPastTheOffsetLimit(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	srv.SetOffsetPaginationLimit(250)
	addProjects(t, srv, "a", 330)
	addProjects(t, srv, "b/sub", 290)
	if _, err := srv.AddProject(gitlabtest.Project{Path: "b/old", Archived: true}); err != nil {
		t.Fatal(err)
	}

	// What an offset listing meets, as GitLab answers it.
	req, _ := http.NewRequest("GET", srv.APIURL()+"/projects?page=3&per_page=100", nil)
	req.Header.Set("PRIVATE-TOKEN", srv.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg map[string]string
	_ = json.Unmarshal(body, &msg)
	want := "Offset pagination has a maximum allowed offset of 250 for requests that return objects of type Project. " +
		"Remaining records can be retrieved using keyset pagination."
	if resp.StatusCode != http.StatusMethodNotAllowed || msg["error"] != want {
		t.Errorf("offset past the limit: %d %s", resp.StatusCode, body)
	}

	c, _ := newClient(t, srv, nil)
	before := srv.Requests("GET /projects")
	ps, err := c.ListProjects(context.Background(), Scope{Instance: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		seen[p.Path] = true
	}
	if len(ps) != 620 || len(seen) != 620 || seen["b/old"] {
		t.Errorf("listed %d projects (%d distinct); want the 620 not archived", len(ps), len(seen))
	}
	if n := srv.Requests("GET /projects") - before; n != 7 {
		t.Errorf("%d keyset pages, want 7 (100 a page)", n)
	}
}

// TestInstanceScopeListsSixtyThousand: the real limit, 60,000 projects on
// the instance, all listed. About 600 keyset requests to the in-memory
// fake: 2 s, but half a minute under the race detector, where it is skipped
// (TestInstanceScopeListsPastTheOffsetLimit covers the same code there);
// skipped with -short too.
func TestInstanceScopeListsSixtyThousand(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("60,000 projects")
	}
	srv := newFake(t, gitlabtest.Options{})
	for i := range 60000 {
		if _, err := srv.AddProject(gitlabtest.Project{Path: fmt.Sprintf("g%d/p%d", i%40, i), EmptyRepo: i%1000 == 0}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newClient(t, srv, nil)
	ps, err := c.ListProjects(context.Background(), Scope{Instance: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 60000-60 {
		t.Errorf("listed %d projects, want 59,940 (60 empty repositories left out)", len(ps))
	}
}

// TestGroupListsPastTheCountLimit: GitLab's offset pagination limit
// applies to the listings it paginates "with strategies" (GET /projects,
// /groups, /users), not to GET /groups/:id/projects (lib/api/groups.rb
// paginates it with plain offset pagination), so the fake does not refuse
// a group's pages either, and a group of any size lists with offset pages.
// Past 10,000 projects GitLab stops counting (no X-Total): the client then
// follows X-Next-Page one page after another, which this test reaches with
// the fake's count limit lowered to 1,000.
func TestGroupListsPastTheCountLimit(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	srv.SetCountLimit(1000)
	for i := range 1200 {
		if _, err := srv.AddProject(gitlabtest.Project{Path: fmt.Sprintf("big/s%d/p%d", i%40, i)}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newClient(t, srv, nil)
	ps, err := c.ListProjects(context.Background(), Scope{Groups: []string{"big"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1200 || srv.Requests("GET /groups/:id/projects") != 12 {
		t.Errorf("listed %d projects in %d pages, want 1,200 in 12", len(ps), srv.Requests("GET /groups/:id/projects"))
	}
}
