package scan_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// instance is a fake GitLab with a small image chain: base (FROM debian) →
// ruby → app, a diamond base → {a, b} → c, a .gitlab-deps user, a project
// FROM its own image, an archived and an empty project.
func instance(t *testing.T) *gitlabtest.Server {
	t.Helper()
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-scan-test"})
	t.Cleanup(srv.Close)
	add := func(path string, files map[string]string, mod func(*gitlabtest.Project)) {
		p := gitlabtest.Project{Path: path, Files: files}
		if mod != nil {
			mod(&p)
		}
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
	}
	reg := "registry.example.com/"
	add("infra/base", map[string]string{"Containerfile": "FROM debian:bookworm\n"}, nil)
	add("infra/ruby", map[string]string{"Containerfile": "ARG BASE=" + reg + "infra/base\nFROM ${BASE}:latest\n"}, nil)
	add("apps/app", map[string]string{"Dockerfile": "FROM " + reg + "infra/ruby:3.3 AS build\nFROM build\n"}, nil)
	add("infra/a", map[string]string{"Containerfile": "FROM " + reg + "infra/base/sub-image:1\n"}, nil)
	add("infra/b", map[string]string{"Containerfile": "FROM " + reg + "infra/base\n"}, nil)
	add("infra/c", map[string]string{"Containerfile": "FROM " + reg + "infra/a\nCOPY --from=" + reg + "infra/b:1 /x /x\n"}, nil)
	add("apps/docs", map[string]string{".gitlab-deps": "apps/app\nhttps://gitlab.example.com/Infra/Base.git\nother/unknown\n"}, nil)
	add("apps/self", map[string]string{"Containerfile": "FROM " + reg + "apps/self/builder:1\nFROM alpine:3.20\n"}, nil)
	add("apps/broken", map[string]string{"Containerfile": "FROM alpine\nRUN <<EOF\nnever closed\n"}, nil)
	add("infra/old", map[string]string{"Containerfile": "FROM " + reg + "infra/base\n"}, func(p *gitlabtest.Project) { p.Archived = true })
	add("infra/empty", nil, func(p *gitlabtest.Project) { p.EmptyRepo = true })
	return srv
}

func setup(t *testing.T, srv *gitlabtest.Server) (*gitlab.Client, *store.Store) {
	t.Helper()
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1,
		Sleep: func(ctx context.Context, d time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return gl, st
}

// scannedInstance is instance after a first scan into a new store.
func scannedInstance(t *testing.T) (*gitlabtest.Server, *gitlab.Client, *store.Store) {
	t.Helper()
	srv := instance(t)
	gl, st := setup(t, srv)
	if _, err := scan.Run(context.Background(), gl, st, opts()); err != nil {
		t.Fatal(err)
	}
	return srv, gl, st
}

func opts() scan.Options {
	return scan.Options{Scope: gitlab.Scope{Groups: []string{"infra", "apps"}}, InstanceHost: "gitlab.example.com"}
}

func TestScanBuildsTheGraph(t *testing.T) {
	srv := instance(t)
	gl, st := setup(t, srv)
	ctx := context.Background()
	res, err := scan.Run(ctx, gl, st, opts())
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.Graph(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantDown := map[string]string{
		"infra/base": "apps/docs,infra/a,infra/b,infra/ruby",
		"infra/ruby": "apps/app",
		"infra/a":    "infra/c",
		"infra/b":    "infra/c",
		"apps/app":   "apps/docs",
		"apps/self":  "",
		"infra/c":    "",
	}
	for p, want := range wantDown {
		if got := strings.Join(g.Downstream(p), ","); got != want {
			t.Errorf("Downstream(%s) = %q, want %q", p, got, want)
		}
	}
	if g.Has("infra/old") || g.Has("infra/empty") {
		t.Error("archived or empty project in the graph")
	}
	if res.Projects != 9 || res.Edges != 8 || res.External != 2 || res.Cycles != 0 {
		t.Errorf("summary %+v", res.Meta)
	}
	docs, err := st.Project(ctx, "apps/docs")
	if err != nil {
		t.Fatal(err)
	}
	if !hasWarning(docs, "other/unknown is not in depsd's scope") {
		t.Errorf("docs warnings: %+v", docs.Warnings)
	}
	if docs.Dependencies[1].Project != "infra/base" {
		t.Errorf(".gitlab-deps URL not mapped to the canonical path: %+v", docs.Dependencies[1])
	}
	self, _ := st.Project(ctx, "apps/self")
	if !hasWarning(self, "own image") {
		t.Errorf("self warnings: %+v", self.Warnings)
	}
	broken, _ := st.Project(ctx, "apps/broken")
	if !hasWarning(broken, "cannot parse: unterminated heredoc") {
		t.Errorf("broken warnings: %+v", broken.Warnings)
	}
	app, _ := st.Project(ctx, "apps/app")
	if app.File != "Dockerfile" {
		t.Errorf("app file %q, want the Dockerfile fallback", app.File)
	}
}

// clocked is a fake GitLab, client and store sharing a clock the test moves
// (GitLab's hourly last_activity_at window matters to incremental scans).
type clocked struct {
	now  time.Time
	srv  *gitlabtest.Server
	gl   *gitlab.Client
	st   *store.Store
	opts scan.Options
}

// newClocked seeds projects in group g at a fixed time.
func newClocked(t *testing.T, projects ...gitlabtest.Project) *clocked {
	t.Helper()
	c := &clocked{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return c.now }
	c.srv = gitlabtest.New(gitlabtest.Options{Token: "t", Now: clock})
	t.Cleanup(c.srv.Close)
	for _, p := range projects {
		if _, err := c.srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	c.gl, err = gitlab.New(gitlab.Config{BaseURL: c.srv.URL, Token: "t", RequestsPerMinute: -1, Now: clock,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	c.st, err = store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.st.Close() })
	c.opts = scan.Options{Scope: gitlab.Scope{Groups: []string{"g"}}, Now: clock}
	return c
}

// baseAndApp are two projects of group g; app does not use base yet.
func baseAndApp() []gitlabtest.Project {
	return []gitlabtest.Project{
		{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}},
		{Path: "g/app", Files: map[string]string{"Containerfile": "FROM alpine\n"}},
	}
}

func hasWarning(p scan.Project, substr string) bool {
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, substr) {
			return true
		}
	}
	return false
}

func TestRescanIsIncremental(t *testing.T) {
	for _, mode := range []struct {
		name          string
		restOnly      bool
		firstRequests int64
	}{
		{"rest", true, 1 + 2 + 2}, // a page, a tree and a blob each
		{"graphql", false, 1 + 1}, // a page, one batch
	} {
		t.Run(mode.name, func(t *testing.T) { testRescanIsIncremental(t, mode.restOnly, mode.firstRequests) })
	}
}

func testRescanIsIncremental(t *testing.T, restOnly bool, firstRequests int64) {
	c := newClocked(t,
		gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}},
		gitlabtest.Project{Path: "g/app", Files: map[string]string{"Containerfile": "FROM registry.example.com/g/base\n"}})
	c.opts.RESTOnly = restOnly
	srv, gl, st, o := c.srv, c.gl, c.st, c.opts
	ctx := context.Background()

	first, err := scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if first.FilesFetched != 2 || first.BlobsRead != 2 || first.Requests != firstRequests {
		t.Errorf("first scan: %+v", first)
	}
	c.now = c.now.Add(time.Minute)
	again, err := scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Requests != 1 || again.FilesFetched != 0 || again.Unchanged != 2 {
		t.Errorf("unchanged rescan: %d requests, %+v; want 1 request (one page of projects)", again.Requests, again)
	}
	if again.Edges != 1 {
		t.Errorf("rescan lost the edge: %+v", again.Meta)
	}

	// A push that cuts the dependency: only that project is refetched.
	if _, err := srv.SetFile("g/app", "Containerfile", "FROM alpine\n"); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Minute)
	pushed, err := scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.FilesFetched != 1 || pushed.Unchanged != 1 || pushed.Edges != 0 {
		t.Errorf("after a push: %+v", pushed)
	}

	// Renames keep the project; removals drop it.
	if err := srv.MoveProject("g/app", "g/renamed"); err != nil {
		t.Fatal(err)
	}
	if err := srv.DeleteProject("g/base"); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Minute)
	if _, err := scan.Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}
	ps, err := st.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Path != "g/renamed" {
		t.Errorf("projects after rename and delete: %+v", ps)
	}
}

func TestScanFailsClearlyOnBadToken(t *testing.T) {
	srv := instance(t)
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "glpat-wrong-token", RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, st := setup(t, srv)
	_, err = scan.Run(context.Background(), gl, st, opts())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want a 401", err)
	}
	if strings.Contains(err.Error(), "glpat-wrong-token") {
		t.Errorf("token leaked: %v", err)
	}
}

func TestScanKeepsFilesWhenReadFails(t *testing.T) {
	srv, gl, st := scannedInstance(t)
	ctx := context.Background()
	before, _ := st.Project(ctx, "infra/ruby")
	// A push, then every tree listing fails: the project keeps its old
	// files, and no version, so the next scan reads it again.
	if _, err := srv.SetFile("infra/ruby", "README.md", "hi"); err != nil {
		t.Fatal(err)
	}
	srv.Fail(gitlabtest.Fault{Endpoint: gitlabtest.GraphQLEndpoint, Status: 500, Times: 100})
	srv.Fail(gitlabtest.Fault{Endpoint: "GET /projects/:id/repository/tree", Status: 500, Times: 100})
	if _, err := scan.Run(ctx, gl, st, opts()); err != nil {
		t.Fatal(err)
	}
	after, _ := st.Project(ctx, "infra/ruby")
	if after.HeadCommit != "" || len(after.Dependencies) != 1 || !hasWarning(after, "not read") {
		t.Errorf("after a failed read: head %s (was %s), deps %+v, warnings %+v", after.HeadCommit, before.HeadCommit, after.Dependencies, after.Warnings)
	}
	srv.ClearFaults()
	res, err := scan.Run(ctx, gl, st, opts())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := st.Project(ctx, "infra/ruby")
	if res.FilesFetched == 0 || again.HeadCommit == "" || hasWarning(again, "not read") || len(again.Dependencies) != 1 {
		t.Errorf("the failed project was not read again: %+v; ruby %+v", res, again)
	}
}

// TestScanRecordsTheBuiltStagesBases: each project keeps what its
// Containerfile's built stage is FROM, through the stages it is FROM,
// which is what its image is verified against; a builder stage's or a
// COPY --from image is not among them.
func TestScanRecordsTheBuiltStagesBases(t *testing.T) {
	_, _, st := scannedInstance(t)
	ctx := context.Background()
	reg := "registry.example.com/"
	for _, tt := range []struct {
		project string
		want    []string
	}{
		{"apps/app", []string{reg + "infra/ruby:3.3"}},           // FROM a stage FROM ruby
		{"infra/c", []string{reg + "infra/a:latest"}},            // not the COPY --from image
		{"apps/self", []string{"docker.io/library/alpine:3.20"}}, // the last stage's
		{"apps/docs", nil},   // .gitlab-deps only
		{"apps/broken", nil}, // does not parse
		{"infra/ruby", []string{reg + "infra/base:latest"}}, // through an ARG
	} {
		p, err := st.Project(ctx, tt.project)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Built, tt.want) {
			t.Errorf("%s: built stage bases %q, want %q", tt.project, p.Built, tt.want)
		}
	}
}

// A scan records each project's visibility, also for a project whose
// files did not change: what the chains' commit statuses may name
// follows it.
func TestScanRecordsVisibility(t *testing.T) {
	c := newClocked(t, gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}})
	ctx := context.Background()
	visibility := func() string {
		t.Helper()
		if _, err := scan.Run(ctx, c.gl, c.st, c.opts); err != nil {
			t.Fatal(err)
		}
		p, err := c.st.Project(ctx, "g/base")
		if err != nil {
			t.Fatal(err)
		}
		return p.Visibility
	}
	if v := visibility(); v != "private" {
		t.Errorf("visibility %q, want private", v)
	}
	if err := c.srv.SetVisibility("g/base", "public"); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Minute)
	if v := visibility(); v != "public" {
		t.Errorf("visibility after it changed %q, want public", v)
	}
}
