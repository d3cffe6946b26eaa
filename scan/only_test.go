package scan_test

import (
	"context"
	"slices"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"

	"gitlab.com/depsd/depsd/scan"
)

// listings counts the requests that list a group's projects.
func listings(srv *gitlabtest.Server) int64 {
	return srv.Requests("GET /groups/:id/projects")
}

// TestScanOfOnlyReadsThePushedProjectsAlone: a scan of Options.Only (a
// push's rescan) reads the projects it names, keeps every other as
// stored without a request, and does not list the scope.
func TestScanOfOnlyReadsThePushedProjectsAlone(t *testing.T) {
	srv, gl, st := scannedInstance(t)
	ctx := context.Background()
	reg := "registry.example.com/"
	// b is pushed to; a changes too, but its push is not this scan's.
	if _, err := srv.SetFile("infra/b", "Containerfile", "FROM "+reg+"infra/ruby\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetFile("infra/a", "Containerfile", "FROM debian\n"); err != nil {
		t.Fatal(err)
	}
	before := listings(srv)
	o := opts()
	o.Only = []string{"infra/b"}
	res, err := scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if n := listings(srv) - before; n != 0 {
		t.Errorf("the scan of one pushed project listed the scope (%d requests)", n)
	}
	if res.Targeted != 1 || res.Projects != 9 {
		t.Errorf("Targeted = %d, Projects = %d; want 1 read of 9 in scope", res.Targeted, res.Projects)
	}
	if res.Requests != 2 {
		t.Errorf("the scan made %d requests, want 2: the project, its files (GraphQL)", res.Requests)
	}
	down := func(project string) []string {
		g, err := st.Graph(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g.Downstream(project)
	}
	if got := down("infra/ruby"); !slices.Contains(got, "infra/b") {
		t.Errorf("downstream of infra/ruby = %v: the pushed project's new FROM is not in the graph", got)
	}
	if got := down("infra/base"); !slices.Contains(got, "infra/a") {
		t.Errorf("downstream of infra/base = %v: infra/a, not pushed, should keep its stored FROM", got)
	}
	// The next scan of the scope finds what the push did not say.
	if _, err := scan.Run(ctx, gl, st, opts()); err != nil {
		t.Fatal(err)
	}
	if got := down("infra/base"); slices.Contains(got, "infra/a") {
		t.Errorf("downstream of infra/base = %v after a full scan, want infra/a gone", got)
	}
}

// TestScanOfOnlyListsTheScopeWhenItMust: what only a listing can tell (a
// project not stored under the pushed path, renamed, no longer buildable)
// makes a scan of Options.Only list the scope, as without Only.
func TestScanOfOnlyListsTheScopeWhenItMust(t *testing.T) {
	for _, tt := range []struct {
		name          string
		only          string
		change        func(t *testing.T, srv *gitlabtest.Server)
		gone, present string
	}{
		{name: "not stored", only: "infra/new"},
		{name: "renamed", only: "infra/b", change: func(t *testing.T, srv *gitlabtest.Server) {
			if err := srv.MoveProject("infra/b", "infra/bee"); err != nil {
				t.Fatal(err)
			}
		}, gone: "infra/b", present: "infra/bee"},
		{name: "archived", only: "infra/b", change: func(t *testing.T, srv *gitlabtest.Server) {
			if err := srv.ArchiveProject("infra/b", true); err != nil {
				t.Fatal(err)
			}
		}, gone: "infra/b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, gl, st := scannedInstance(t)
			ctx := context.Background()
			if tt.change != nil {
				tt.change(t, srv)
			}
			before := listings(srv)
			o := opts()
			o.Only = []string{tt.only}
			res, err := scan.Run(ctx, gl, st, o)
			if err != nil {
				t.Fatal(err)
			}
			if listings(srv) == before || res.Targeted != 0 {
				t.Errorf("the scan did not list the scope (Targeted %d)", res.Targeted)
			}
			projects, err := st.Projects(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, p := range projects {
				paths = append(paths, p.Path)
			}
			if tt.gone != "" && slices.Contains(paths, tt.gone) {
				t.Errorf("stored %v: %s should be gone", paths, tt.gone)
			}
			if tt.present != "" && !slices.Contains(paths, tt.present) {
				t.Errorf("stored %v: %s should be there", paths, tt.present)
			}
		})
	}
}

// withoutProjectReader is a GitLab that cannot read one project.
type withoutProjectReader struct{ scan.GitLab }

func TestScanOfOnlyListsTheScopeWithoutAProjectReader(t *testing.T) {
	srv, gl, st := scannedInstance(t)
	ctx := context.Background()
	before := listings(srv)
	o := opts()
	o.Only = []string{"infra/b"}
	if _, err := scan.Run(ctx, withoutProjectReader{gl}, st, o); err != nil {
		t.Fatal(err)
	}
	if listings(srv) == before {
		t.Error("the scan did not list the scope")
	}
}
