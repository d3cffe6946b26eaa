package scan_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// chainProjects are n projects of group g in image chains, with the file
// kinds a scan meets: Containerfile, Dockerfile, both (the Containerfile
// wins), .gitlab-deps, none, a binary Containerfile.
func chainProjects(n int) []gitlabtest.Project {
	reg := "registry.example.com/"
	var out []gitlabtest.Project
	for i := range n {
		files := map[string]string{"README.md": "x"}
		switch {
		case i < 5:
			files["Containerfile"] = fmt.Sprintf("FROM debian:%d\n", i)
		case i%10 == 9:
			files[".gitlab-deps"] = fmt.Sprintf("g/p%d\n", i-1)
			files["Containerfile"] = fmt.Sprintf("FROM %sg/p%d\n", reg, i%5)
		case i%7 == 0:
			files["Dockerfile"] = fmt.Sprintf("FROM %sg/p%d AS b\nFROM %sg/p%d\n", reg, i%5, reg, (i+1)%5)
		case i%11 == 0:
			files["Containerfile"] = fmt.Sprintf("FROM %sg/p%d\n", reg, i%5)
			files["Dockerfile"] = "FROM ignored\n"
		case i%13 == 0:
			files["Containerfile"] = "FROM x\x00\xff binary"
		case i%17 == 0:
			delete(files, "README.md")
			files["docs/index.md"] = "none"
		default:
			files["Containerfile"] = fmt.Sprintf("FROM %sg/p%d:1\n", reg, i%5)
		}
		out = append(out, gitlabtest.Project{Path: fmt.Sprintf("g/p%d", i), Files: files})
	}
	return out
}

// restTwin scans the same instance through REST only into a store of its
// own: what the GraphQL scan must equal.
func restTwin(t *testing.T, c *clocked) []scan.Project {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "rest.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := c.opts
	o.RESTOnly = true
	o.Logger = nil
	if _, err := scan.Run(context.Background(), c.gl, st, o); err != nil {
		t.Fatal(err)
	}
	ps, err := st.Projects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// sameProjects compares what a user sees of two scans: each project's
// file, dependencies, warnings and the version its files were read at.
func sameProjects(t *testing.T, got, want []scan.Project) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d projects, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Path != w.Path || g.File != w.File || g.HeadCommit != w.HeadCommit ||
			!reflect.DeepEqual(g.Dependencies, w.Dependencies) || !reflect.DeepEqual(g.Warnings, w.Warnings) ||
			!reflect.DeepEqual(g.Files, w.Files) {
			t.Errorf("%s differs from the REST scan:\n got  file %q head %s deps %+v warnings %+v\n want file %q head %s deps %+v warnings %+v",
				g.Path, g.File, g.HeadCommit, g.Dependencies, g.Warnings, w.File, w.HeadCommit, w.Dependencies, w.Warnings)
		}
	}
}

// TestGraphQLScanCostsAndEqualsREST: 500 projects are read with one
// GraphQL request per 50 after the listing, binaries through REST by blob
// id; an unchanged rescan costs the listing alone; the graph is the REST
// scan's, down to the version digests.
func TestGraphQLScanCostsAndEqualsREST(t *testing.T) {
	const n = 500
	c := newClocked(t, chainProjects(n)...)
	ctx := context.Background()
	res, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	counts := c.srv.RequestCounts()
	pages := counts["GET /groups/:id/projects"]
	binaries := int64(0)
	for i := range n {
		if i >= 5 && i%10 != 9 && i%7 != 0 && i%11 != 0 && i%13 == 0 {
			binaries++
		}
	}
	if pages != n/100 || counts[gitlabtest.GraphQLEndpoint] != n/50 || res.Batches != n/50 ||
		counts["GET /projects/:id/repository/tree"] != 0 || counts["GET /projects/:id/repository/blobs/:sha/raw"] != 1 ||
		res.Requests != pages+n/50+1 {
		t.Errorf("first scan: %d requests %v; want %d pages + %d GraphQL batches + 1 blob (the one binary content)", res.Requests, counts, n/100, n/50)
	}
	if perProject := float64(res.Requests) / n; perProject > 0.15 {
		t.Errorf("first scan: %.3f requests a project, goal ≤ 0.15", perProject)
	}
	if binaries == 0 {
		t.Fatal("the seed has no binary Containerfile")
	}

	got, err := c.st.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameProjects(t, got, restTwin(t, c))

	before := c.srv.TotalRequests()
	again, err := scan.Run(ctx, c.gl, c.st, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if spent := c.srv.TotalRequests() - before; spent != n/100 || again.Unchanged != n {
		t.Errorf("unchanged rescan: %d requests, %d unchanged; want %d (the listing) and all", spent, again.Unchanged, n/100)
	}
}

// TestGraphQLScanFallsBack: what GraphQL cannot give is read through REST
// and the graph is the same: an old GitLab (detected on the first batch,
// said once in the log, REST for the rest of the scan), a timeout of the
// blobs field (errors next to the data: those projects through REST), of
// the whole projects field (each batch through REST, with a warning), a
// query GitLab finds too complex (many file names: asked in parts).
func TestGraphQLScanFallsBack(t *testing.T) {
	many := []string{"Containerfile", "Dockerfile"}
	for i := range 200 {
		many = append(many, fmt.Sprintf("Containerfile.%d", i))
	}
	tests := []struct {
		name           string
		setup          func(*gitlabtest.Server)
		containerfiles []string
		wantGraphQL    int64 // requests to /api/graphql
		wantTrees      int64
		wantLog        string
		wantLogs       int // times wantLog is said
	}{
		{"old GitLab", func(s *gitlabtest.Server) { s.SetOldGraphQL(true) }, nil, 1, 120,
			"GitLab cannot read repository files through GraphQL; reading them through REST for this scan", 1},
		{"blobs time out", func(s *gitlabtest.Server) { s.SetGraphQLTimeouts("Repository.blobs") }, nil, 3, 120, "", 0},
		{"projects time out", func(s *gitlabtest.Server) { s.SetGraphQLTimeouts("Query.projects") }, nil, 3, 120,
			"GraphQL read failed; reading these projects through REST", 3},
		// 203 names (no project needs .gitlab-ci.yml): 203 refused,
		// then 101 refused, then parts of 50: 5 for the first batch, 5
		// for each of the two others.
		{"too complex", nil, many, 2 + 5 + 5 + 5, 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClocked(t, chainProjects(120)...)
			var logs bytes.Buffer
			c.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			if tt.containerfiles != nil {
				c.opts.Containerfiles = tt.containerfiles
			}
			if tt.setup != nil {
				tt.setup(c.srv)
			}
			if _, err := scan.Run(context.Background(), c.gl, c.st, c.opts); err != nil {
				t.Fatal(err)
			}
			counts := c.srv.RequestCounts()
			if counts[gitlabtest.GraphQLEndpoint] != tt.wantGraphQL || counts["GET /projects/:id/repository/tree"] != tt.wantTrees {
				t.Errorf("requests %v; want %d GraphQL, %d trees", counts, tt.wantGraphQL, tt.wantTrees)
			}
			if tt.wantLog != "" && strings.Count(logs.String(), tt.wantLog) != tt.wantLogs {
				t.Errorf("log should say %d times %q:\n%s", tt.wantLogs, tt.wantLog, logs.String())
			}
			got, err := c.st.Projects(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sameProjects(t, got, restTwin(t, c))
		})
	}
}

// namesRecorder records the file names each GraphQL batch asks for.
type namesRecorder struct {
	*gitlab.Client
	asked [][]string
}

func (r *namesRecorder) ReadBatch(ctx context.Context, q gitlab.BatchQuery) (gitlab.BatchAnswer, error) {
	r.asked = append(r.asked, slices.Clone(q.Names))
	return r.Client.ReadBatch(ctx, q)
}

// A GraphQL batch asks for .gitlab-ci.yml only when a project in it needs
// its CI configuration (it refuses pipeline variables): GitLab sends each
// file whole, and a CI configuration is often a project's largest. The
// project that needs it still learns its ident from it.
func TestGraphQLBatchAsksForTheCIConfigurationOnlyWhereNeeded(t *testing.T) {
	t.Parallel()
	const snippet = "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n---\nbuild:\n  script: make\n"
	var projects []gitlabtest.Project
	for i := range 60 {
		p := gitlabtest.Project{Path: fmt.Sprintf("g/p%02d", i), Files: map[string]string{
			"Containerfile": "FROM debian\n", ".gitlab-ci.yml": "build:\n  script: make\n"},
			CI: gitlabtest.CISettings{TokenRole: gitlabtest.RoleMaintainer}}
		if i == 55 {
			p.Files[".gitlab-ci.yml"] = snippet
			p.CI = gitlabtest.RestrictedCISettings(gitlabtest.RoleMaintainer)
		}
		projects = append(projects, p)
	}
	c := newClocked(t, projects...)
	rec := &namesRecorder{Client: c.gl}
	if _, err := scan.Run(context.Background(), rec, c.st, c.opts); err != nil {
		t.Fatal(err)
	}
	if len(rec.asked) != 2 {
		t.Fatalf("%d GraphQL batches, want 2 (50 and 10 projects)", len(rec.asked))
	}
	for k, want := range []bool{false, true} {
		if got := slices.Contains(rec.asked[k], scan.CIConfigFile); got != want {
			t.Errorf("batch %d asked for %v: .gitlab-ci.yml %v, want %v", k+1, rec.asked[k], got, want)
		}
	}
	ps, err := c.st.Projects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		want := scan.IdentVariables
		if p.Path == "g/p55" {
			want = scan.IdentInputs
		}
		if p.PipelineIdent != want {
			t.Errorf("%s: ident %q, want %q", p.Path, p.PipelineIdent, want)
		}
	}
}

// movingBranch changes a project's default branch on the fake GitLab
// just before the first GraphQL batch read: after the scan listed it.
type movingBranch struct {
	*gitlab.Client
	move func()
}

func (m *movingBranch) ReadBatch(ctx context.Context, q gitlab.BatchQuery) (gitlab.BatchAnswer, error) {
	if m.move != nil {
		m.move()
		m.move = nil
	}
	return m.Client.ReadBatch(ctx, q)
}

// A project whose default branch changes between the listing and the
// GraphQL read (GitLab's rootRef is then another branch) is read through
// REST at the branch the listing gave, which is the branch the scan
// records and depsd builds: its dependencies are that branch's, not the
// new default's, until the next scan lists the new one.
func TestGraphQLScanReadsTheListedBranch(t *testing.T) {
	t.Parallel()
	c := newClocked(t, gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM registry.example.com/g/old\n"}},
		gitlabtest.Project{Path: "g/other", Files: map[string]string{"Containerfile": "FROM debian\n"}})
	// dev keeps the old Containerfile; main moves on.
	if err := c.srv.CreateBranch("g/app", "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.srv.SetFile("g/app", "Containerfile", "FROM registry.example.com/g/new\n"); err != nil {
		t.Fatal(err)
	}
	gl := &movingBranch{Client: c.gl, move: func() {
		if err := c.srv.SetDefaultBranch("g/app", "dev"); err != nil {
			t.Error(err)
		}
	}}
	if _, err := scan.Run(context.Background(), gl, c.st, c.opts); err != nil {
		t.Fatal(err)
	}
	if n := c.srv.Requests(gitlabtest.GraphQLEndpoint); n != 1 {
		t.Fatalf("%d GraphQL requests, want 1 (the test moves the branch before it)", n)
	}
	if n := c.srv.Requests("GET /projects/:id/repository/tree"); n != 1 {
		t.Errorf("%d tree listings, want 1 (g/app through REST)", n)
	}
	ps, err := c.st.Projects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Path != "g/app" {
			continue
		}
		var froms []string
		for _, d := range p.Dependencies {
			froms = append(froms, d.Ref)
		}
		if p.DefaultBranch != "main" || len(froms) != 1 || !strings.HasSuffix(froms[0], "g/new") {
			t.Errorf("g/app: branch %q, dependencies %v; want main's (g/new)", p.DefaultBranch, froms)
		}
	}
}
