package gitlab

import (
	"context"
	"errors"
	"slices"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

func TestListProjects(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	for _, p := range []gitlabtest.Project{
		{Path: "g/a", Files: map[string]string{"Containerfile": "FROM x"}},
		{Path: "g/sub/B", DefaultBranch: "master"},
		{Path: "g/sub/deep/c"},
		{Path: "g/old", Archived: true},
		{Path: "g/empty", EmptyRepo: true},
		{Path: "other/shared", SharedWith: []string{"g"}},
		{Path: "other/single"},
	} {
		must(srv.AddProject(p))
	}
	ctx := context.Background()
	tests := []struct {
		name  string
		scope Scope
		want  []string
		err   error
	}{
		{"group with subgroups, skips archived, empty and shared", Scope{Groups: []string{"g"}}, []string{"g/a", "g/sub/B", "g/sub/deep/c"}, nil},
		{"subgroup only", Scope{Groups: []string{"g/sub"}}, []string{"g/sub/B", "g/sub/deep/c"}, nil},
		{"single projects and duplicates", Scope{Groups: []string{"g/sub"}, Projects: []string{"other/single", "g/sub/B"}}, []string{"g/sub/B", "g/sub/deep/c", "other/single"}, nil},
		{"single archived project skipped", Scope{Projects: []string{"g/old", "g/a"}}, []string{"g/a"}, nil},
		{"exclude subtree", Scope{Groups: []string{"g"}, Exclude: []string{"g/sub/**"}}, []string{"g/a"}, nil},
		{"exclude direct children only", Scope{Groups: []string{"g"}, Exclude: []string{"g/*"}}, []string{"g/sub/B", "g/sub/deep/c"}, nil},
		{"exclude with glob", Scope{Groups: []string{"g"}, Exclude: []string{"*/sub/deep/*"}}, []string{"g/a", "g/sub/B"}, nil},
		{"missing group", Scope{Groups: []string{"nope"}}, nil, ErrNotFound},
		{"missing project", Scope{Projects: []string{"g/nope"}}, nil, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient(t, srv, nil)
			got, err := c.ListProjects(ctx, tt.scope)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, p := range got {
				paths = append(paths, p.Path)
			}
			if !slices.Equal(paths, tt.want) {
				t.Fatalf("paths = %v, want %v", paths, tt.want)
			}
		})
	}

	t.Run("fields", func(t *testing.T) {
		c, _ := newClient(t, srv, nil)
		if err := srv.SetVisibility("g/sub/B", "internal"); err != nil {
			t.Fatal(err)
		}
		got, err := c.ListProjects(ctx, Scope{Projects: []string{"g/sub/B"}})
		if err != nil {
			t.Fatal(err)
		}
		info, _ := srv.Project("g/sub/B")
		want := Project{ID: info.ID, Path: "g/sub/B", DefaultBranch: "master",
			RegistryPrefix: "registry.example.com/g/sub/b", WebURL: srv.URL + "/g/sub/B", Visibility: "internal",
			LastActivityAt: info.LastActivityAt}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("bad exclude pattern", func(t *testing.T) {
		c, _ := newClient(t, srv, nil)
		if _, err := c.ListProjects(ctx, Scope{Groups: []string{"g"}, Exclude: []string{"g/[a"}}); err == nil {
			t.Fatal("want an error for a malformed pattern")
		}
	})
}

// TestBuildableProject: one project read by id is what the listing gives
// for it, and says whether the listing would leave it out.
func TestBuildableProject(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	for _, p := range []gitlabtest.Project{
		{Path: "g/a", DefaultBranch: "master"},
		{Path: "g/old", Archived: true},
		{Path: "g/empty", EmptyRepo: true},
	} {
		must(srv.AddProject(p))
	}
	if err := srv.SetVisibility("g/a", "internal"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, _ := newClient(t, srv, nil)
	// The group's listing, another endpoint than the one project's.
	listed, err := c.ListProjects(ctx, Scope{Groups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := srv.Project("g/a")
	got, buildable, err := c.BuildableProject(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !buildable || len(listed) != 1 || got != listed[0] {
		t.Errorf("BuildableProject = %+v, %v; want the listing's %+v, true", got, buildable, listed)
	}
	for _, path := range []string{"g/old", "g/empty"} {
		info, _ := srv.Project(path)
		got, buildable, err := c.BuildableProject(ctx, info.ID)
		if err != nil || buildable || got.Path != path {
			t.Errorf("%s: BuildableProject = %+v, %v, %v; want it read and not buildable", path, got, buildable, err)
		}
	}
	if _, _, err := c.BuildableProject(ctx, 999999); !errors.Is(err, ErrNotFound) {
		t.Errorf("a project that does not exist: err = %v, want ErrNotFound", err)
	}
}

func TestListProjectsPagination(t *testing.T) {
	tests := []struct {
		name      string
		projects  int
		perPage   int
		wantPages int64
	}{
		{"one page", 40, 100, 1},
		{"three pages of 100", 250, 100, 3},
		{"exact multiple", 30, 10, 3},
		{"many small pages", 53, 5, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, gitlabtest.Options{})
			addProjects(t, srv, "big/sub", tt.projects)
			c, _ := newClient(t, srv, func(c *Config) { c.PerPage = tt.perPage })
			got, err := c.ListProjects(context.Background(), Scope{Groups: []string{"big"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.projects {
				t.Fatalf("got %d projects, want %d", len(got), tt.projects)
			}
			if !slices.IsSortedFunc(got, func(a, b Project) int { return compareStrings(a.Path, b.Path) }) {
				t.Fatal("projects not sorted by path")
			}
			if n := srv.Requests("GET /groups/:id/projects"); n != tt.wantPages {
				t.Fatalf("list requests = %d, want %d (one per page)", n, tt.wantPages)
			}
			if c.Requests() != srv.TotalRequests() {
				t.Fatalf("client counted %d requests, server saw %d", c.Requests(), srv.TotalRequests())
			}
		})
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestExcluder(t *testing.T) {
	tests := []struct {
		patterns []string
		path     string
		want     bool
	}{
		{[]string{"g/a"}, "g/a", true},
		{[]string{"g/a"}, "g/ab", false},
		{[]string{"g/*"}, "g/a", true},
		{[]string{"g/*"}, "g/sub/a", false},
		{[]string{"g/**"}, "g/sub/a", true},
		{[]string{"g/**"}, "g/a", true},
		{[]string{"g/**"}, "gx/a", false},
		{[]string{"g/sub/**"}, "g/sub", false},
		{[]string{"*/legacy/**"}, "g/legacy/x/y", true},
		{[]string{"/g/a/"}, "g/a", true},
		{nil, "g/a", false},
	}
	for _, tt := range tests {
		ex, err := newExcluder(tt.patterns)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := ex.excluded(tt.path); got != tt.want {
			t.Errorf("%v excludes %s = %v, want %v", tt.patterns, tt.path, got, tt.want)
		}
	}
	for _, bad := range []string{"g/[", "g/**/x"} {
		if _, err := newExcluder([]string{bad}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

func BenchmarkListProjects(b *testing.B) {
	srv := newFake(b, gitlabtest.Options{})
	addProjects(b, srv, "bench/a", 500)
	addProjects(b, srv, "bench/b", 500)
	c, _ := newClient(b, srv, nil)
	b.ResetTimer()
	for b.Loop() {
		ps, err := c.ListProjects(context.Background(), Scope{Groups: []string{"bench"}})
		if err != nil || len(ps) != 1000 {
			b.Fatal(len(ps), err)
		}
	}
	b.ReportMetric(float64(c.Requests())/float64(b.N), "requests/op")
}
