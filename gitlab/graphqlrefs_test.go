package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// scoreOf asks the fake GitLab for the complexity of query (with vars):
// the query with queryComplexity { score } added, less its own 2.
func scoreOf(t *testing.T, c *Client, query string, vars map[string]any) int {
	t.Helper()
	q := strings.Replace(query, ") {\n", ") {\n  queryComplexity { score }\n", 1)
	var ans struct {
		Data struct {
			QueryComplexity *struct{ Score int } `json:"queryComplexity"`
		} `json:"data"`
		Errors []graphQLError `json:"errors"`
	}
	if err := c.graphQL(context.Background(), q, vars, &ans); err != nil {
		t.Fatal(err)
	}
	if ans.Data.QueryComplexity == nil {
		t.Fatalf("no score for\n%s\n%+v", q, ans.Errors)
	}
	return ans.Data.QueryComplexity.Score - 2
}

// TestBatchQueryComplexity: the plan's estimates (mainCost, refsCost,
// filesAtCost) are what GitLab's rules (the fake's graphql_complexity.go)
// count for the very queries ReadBatch and ReadFilesAt send.
func TestBatchQueryComplexity(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	srv.SetGraphQLAdmin(true) // room to count what an ordinary user may not send
	c, _ := newClient(t, srv, nil)
	names := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprint("f", i)
		}
		return out
	}
	for _, tt := range []struct{ main, k, branches, names int }{
		{3, 1, 0, 3}, {3, 9, 1, 3}, {4, 5, 1, 3}, {0, 29, 1, 3}, {0, 16, 2, 3}, {0, 6, 3, 3}, {0, 10, 2, 5}, {0, 1, 0, 3},
	} {
		vars := map[string]any{"refPaths": []any{"g/a"}, "pattern": "*", "refNames": names(tt.names)}
		if tt.branches == 0 {
			delete(vars, "refNames")
		}
		want := refsCost(tt.k, tt.branches, tt.names)
		if tt.main > 0 {
			vars["paths"], vars["names"] = []any{"g/a"}, names(tt.main)
			want += mainCost(tt.main)
		}
		for i := range tt.branches {
			vars[fmt.Sprint("b", i)] = "main"
		}
		if got := scoreOf(t, c, refsQueryText(tt.branches, tt.k, tt.main > 0), vars); got != want {
			t.Errorf("%+v: GitLab counts %d, the plan %d", tt, got, want)
		}
	}
	reads := []FilesAt{{"g/a", "main"}, {"g/a", "v1"}, {"g/b", "main"}, {"g/c", "x"}, {"g/c", "y"}, {"g/c", "z"}}
	vars := map[string]any{"names": names(3)}
	p := -1
	for j, r := range reads {
		if j == 0 || reads[j-1].Path != r.Path {
			p++
			vars[fmt.Sprint("p", p)] = r.Path
		}
		vars[fmt.Sprint("r", j)] = r.Ref
	}
	if got, want := scoreOf(t, c, filesAtQueryText(reads), vars), filesAtCost(3, 6, 3); got != want {
		t.Errorf("files at refs: GitLab counts %d, the plan %d", got, want)
	}
}

// seedBranches is a fake GitLab with n projects g/p<i>, each with a
// Containerfile on main and, for every i%every == 0, a branch bookworm
// with its own.
func seedBranches(t *testing.T, n, every int) *gitlabtest.Server {
	t.Helper()
	srv := newFake(t, gitlabtest.Options{})
	for i := range n {
		p := fmt.Sprintf("g/p%d", i)
		if _, err := srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": "FROM debian:trixie\n"}}); err != nil {
			t.Fatal(err)
		}
		if i%every != 0 {
			continue
		}
		if err := srv.CreateBranch(p, "bookworm"); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.SetFileOn(p, "bookworm", "Containerfile", fmt.Sprintf("FROM debian:bookworm-%d\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

var (
	defaultNames = []string{"Containerfile", "Dockerfile", ".gitlab-deps"}
	bookworm     = []string{"bookworm"}
)

// TestReadBatchReadsBranches: the branch names and a followed branch's
// files ride in the default branches' request while GitLab's complexity
// allows (9 projects with one branch beside 50 default branches), the
// rest in requests of branches alone (29 a request); an absent branch is
// told by the names, not by its (empty) files.
func TestReadBatchReadsBranches(t *testing.T) {
	srv := seedBranches(t, 50, 2)
	c, _ := newClient(t, srv, nil)
	q := BatchQuery{Names: defaultNames, RefNames: defaultNames}
	for i := range 50 {
		p := fmt.Sprintf("g/p%d", i)
		q.Paths = append(q.Paths, p)
		q.Refs = append(q.Refs, RefsQuery{Path: p, Patterns: bookworm, Branches: bookworm})
	}
	ans, err := c.ReadBatch(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	// 9 with the default branches, then 29, then 12.
	if ans.Requests != 3 || ans.RefRequests != 2 || srv.Requests(gitlabtest.GraphQLEndpoint) != 3 {
		t.Errorf("%d requests (%d for refs alone), fake %d; want 3 (2)", ans.Requests, ans.RefRequests, srv.Requests(gitlabtest.GraphQLEndpoint))
	}
	if len(ans.Projects) != 50 || len(ans.Refs) != 50 {
		t.Fatalf("%d projects, %d refs; want 50 each", len(ans.Projects), len(ans.Refs))
	}
	for i := range 50 {
		p := fmt.Sprintf("g/p%d", i)
		r := ans.Refs[p]
		if r.Err != nil || !r.Complete {
			t.Fatalf("%s: %+v", p, r)
		}
		if i%2 != 0 {
			if len(r.Branches) != 0 || len(r.Files["bookworm"]) != 0 {
				t.Errorf("%s has no bookworm: names %q, files %v", p, r.Branches, r.Files)
			}
			continue
		}
		cf := r.Files["bookworm"]["Containerfile"]
		if len(r.Branches) != 1 || r.Branches[0] != "bookworm" || string(cf.Content) != fmt.Sprintf("FROM debian:bookworm-%d\n", i) || !cf.Complete {
			t.Errorf("%s: names %q, bookworm's Containerfile %+v", p, r.Branches, cf)
		}
		if got := string(ans.Projects[p].Blobs["Containerfile"].Content); got != "FROM debian:trixie\n" {
			t.Errorf("%s: default branch's Containerfile %q", p, got)
		}
	}
}

// TestReadBatchPatterns: wildcards list the matching names (their common
// start asked of GitLab, each project's own patterns matched by the
// caller); more than a page of names is not Complete; branches whose
// files do not fit beside one project's names are left out of Files, not
// answered empty.
func TestReadBatchPatterns(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	for _, p := range []string{"g/a", "g/b"} {
		if _, err := srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": "FROM x\n"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"release/1", "release/2", "rel", "feature"} {
		if err := srv.CreateBranch("g/a", b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range BranchNamesPage + 5 {
		if err := srv.CreateBranch("g/b", fmt.Sprintf("release/%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newClient(t, srv, nil)
	ans, err := c.ReadBatch(context.Background(), BatchQuery{RefNames: defaultNames, Refs: []RefsQuery{
		{Path: "g/a", Patterns: []string{"release/*", "rel"}, Branches: []string{"rel"}},
		{Path: "g/b", Patterns: []string{"release/*"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := ans.Refs["g/a"], ans.Refs["g/b"]
	if a.Err != nil || !a.Complete || strings.Join(a.Branches, ",") != "rel,release/1,release/2" {
		t.Errorf("g/a: %+v; want rel, release/1, release/2 (asked rel*)", a)
	}
	if _, ok := a.Files["rel"]; !ok {
		t.Errorf("g/a: rel's files not read: %+v", a.Files)
	}
	if b.Err != nil || b.Complete || len(b.Branches) != BranchNamesPage {
		t.Errorf("g/b: complete %v, %d names; want a full page, not complete", b.Complete, len(b.Branches))
	}
	if ans.Requests != 1 {
		t.Errorf("%d requests, want 1", ans.Requests)
	}

	many := []string{"b1", "b2", "b3", "b4", "b5"}
	ans, err = c.ReadBatch(context.Background(), BatchQuery{RefNames: defaultNames, Refs: []RefsQuery{{Path: "g/a", Patterns: many, Branches: many}}})
	if err != nil {
		t.Fatal(err)
	}
	// 3 blobs fields fit beside branchNames with 3 names (refsCost).
	if a := ans.Refs["g/a"]; a.Err != nil || len(a.Files) != 3 || a.Files["b4"] != nil || a.Files["b1"] == nil {
		t.Errorf("g/a with 5 branches: %+v; want the files of b1-b3 only", a)
	}
}

// TestReadBatchRefsFallBack: a field error on branchNames (a timeout)
// gives each project's refs Err and leaves the default branches read; a
// GitLab that counts more than the plan refuses once, and the difference
// is learnt.
func TestReadBatchRefsFallBack(t *testing.T) {
	srv := seedBranches(t, 4, 2)
	c, _ := newClient(t, srv, nil)
	q := BatchQuery{Names: defaultNames, RefNames: defaultNames}
	for i := range 4 {
		p := fmt.Sprintf("g/p%d", i)
		q.Paths = append(q.Paths, p)
		q.Refs = append(q.Refs, RefsQuery{Path: p, Patterns: bookworm, Branches: bookworm})
	}
	srv.SetGraphQLTimeouts("Repository.branchNames")
	ans, err := c.ReadBatch(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		p := fmt.Sprintf("g/p%d", i)
		if ans.Refs[p].Err == nil || ans.Projects[p].Err != nil || len(ans.Projects[p].Blobs) != 1 {
			t.Errorf("%s: refs %+v, default branch %+v; want refs failed, default branch read", p, ans.Refs[p], ans.Projects[p])
		}
	}
	srv.SetGraphQLTimeouts()

	// A plan that believes the limit is 300 (20 projects' refs beside the
	// default branches, 271): GitLab (250) refuses it; the limit is
	// learnt and the read planned again (9 refs beside, 11 alone).
	srv = seedBranches(t, 20, 2)
	c, _ = newClient(t, srv, nil)
	q = BatchQuery{Names: defaultNames, RefNames: defaultNames}
	for i := range 20 {
		p := fmt.Sprintf("g/p%d", i)
		q.Paths = append(q.Paths, p)
		q.Refs = append(q.Refs, RefsQuery{Path: p, Patterns: bookworm, Branches: bookworm})
	}
	c.complexityLimit.Store(300)
	for _, want := range []int{3, 2} {
		ans, err = c.ReadBatch(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if r := ans.Refs["g/p18"]; r.Err != nil || r.Files["bookworm"]["Containerfile"].Content == nil {
			t.Errorf("g/p18: %+v", r)
		}
		if ans.Requests != want || c.complexityBudget() != maxComplexity {
			t.Errorf("%d requests, budget %d; want %d and the limit learnt", ans.Requests, c.complexityBudget(), want)
		}
	}
}

// TestReadFilesAt: files at any ref (a tag, a branch), 11 refs a request
// with the default names; a project GitLab does not return, and a ref
// that is not a valid name, are errors of their own reads.
func TestReadFilesAt(t *testing.T) {
	srv := seedBranches(t, 30, 1)
	if err := srv.CreateTag("g/p0", "v1.0.0", "bookworm"); err != nil {
		t.Fatal(err)
	}
	c, _ := newClient(t, srv, nil)
	reads := []FilesAt{{"g/p0", "v1.0.0"}, {"g/none", "main"}, {"g/p1", "release/*"}}
	for i := range 30 {
		reads = append(reads, FilesAt{fmt.Sprintf("g/p%d", i), "bookworm"})
	}
	ans, err := c.ReadFilesAt(context.Background(), reads, defaultNames)
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(reads) + 10) / 11; ans.Requests != want || len(ans.Files) != len(reads) {
		t.Errorf("%d requests for %d reads (%d answered); want %d", ans.Requests, len(reads), len(ans.Files), want)
	}
	if got := string(ans.Files[FilesAt{"g/p0", "v1.0.0"}].Blobs["Containerfile"].Content); got != "FROM debian:bookworm-0\n" {
		t.Errorf("at the tag: %q", got)
	}
	if got := string(ans.Files[FilesAt{"g/p7", "bookworm"}].Blobs["Containerfile"].Content); got != "FROM debian:bookworm-7\n" {
		t.Errorf("g/p7 at bookworm: %q", got)
	}
	for _, r := range []FilesAt{{"g/none", "main"}, {"g/p1", "release/*"}} {
		if err := ans.Files[r].Err; err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
	if err := ans.Files[FilesAt{"g/p1", "bookworm"}].Err; err != nil {
		t.Errorf("g/p1 at bookworm beside its invalid ref: %v", err)
	}
}

// TestReadBatchWithoutBranchNames: a GitLab whose GraphQL has blobs but no
// branchNames reads the default branches through GraphQL still, and
// answers every project's refs with ErrGraphQLUnsupported (read through
// REST), asking no more after the first refusal.
func TestReadBatchWithoutBranchNames(t *testing.T) {
	srv := seedBranches(t, 4, 2)
	srv.SetNoBranchNames(true)
	c, _ := newClient(t, srv, nil)
	q := BatchQuery{Names: defaultNames, RefNames: defaultNames}
	for i := range 4 {
		p := fmt.Sprintf("g/p%d", i)
		q.Paths = append(q.Paths, p)
		q.Refs = append(q.Refs, RefsQuery{Path: p, Patterns: bookworm, Branches: bookworm})
	}
	for _, want := range []int{2, 1} {
		ans, err := c.ReadBatch(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if ans.Requests != want || len(ans.Projects["g/p0"].Blobs) != 1 || !errors.Is(ans.Refs["g/p0"].Err, ErrGraphQLUnsupported) {
			t.Errorf("%d requests, g/p0 %+v, its refs %+v; want %d, the default branch read, refs unsupported", ans.Requests, ans.Projects["g/p0"], ans.Refs["g/p0"], want)
		}
	}
}
