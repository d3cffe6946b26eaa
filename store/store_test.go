package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

func sampleProjects() []scan.Project {
	return []scan.Project{
		{
			ID: 10, Path: "group/base", DefaultBranch: "main", RegistryPrefix: "registry.example.com/group/base",
			WebURL: "https://gitlab.example.com/group/base", HeadCommit: "aaa", LastActivity: t0.Add(-time.Hour),
			HeadCheckedAt: t0.Add(-time.Minute), SearchedFiles: []string{"Containerfile", "Dockerfile"},
			Files: []scan.File{
				{Name: "Containerfile", Content: []byte("FROM debian:bookworm\r\n\x00\xff")},
				{Name: ".gitlab-deps", Content: []byte{}},
			},
			File: "Containerfile", ScannedAt: t0,
			Dependencies: []deps.Dependency{{
				Kind: deps.KindFrom, Line: 1, Ref: "debian:bookworm", Image: "docker.io/library/debian:bookworm",
				Repository: "docker.io/library/debian", Tag: "bookworm",
			}},
			Built: []string{"docker.io/library/debian:bookworm"},
		},
		{
			ID: 20, Path: "group/app", DefaultBranch: "master", RegistryPrefix: "registry.example.com/group/app",
			WebURL: "https://gitlab.example.com/group/app", HeadCommit: "bbb", File: "Dockerfile", ScannedAt: t0,
			Dependencies: []deps.Dependency{
				{Kind: deps.KindFrom, Line: 3, Ref: "${BASE}", Image: "registry.example.com/group/base:latest",
					Repository: "registry.example.com/group/base", Tag: "latest", Project: "group/base"},
				{Kind: deps.KindCopyFrom, Line: 7, Ref: "alpine@sha256:abc", Image: "docker.io/library/alpine@sha256:abc",
					Repository: "docker.io/library/alpine", Digest: "sha256:abc", Pinned: true},
				{Kind: deps.KindGitLabDeps, Line: 2, Ref: "group/tools", Project: "group/tools"},
			},
			Warnings: []deps.Warning{
				{File: "Dockerfile", Line: 2, Message: "ARG FOO has no default"},
				{File: ".gitlab-deps", Line: 4, Message: "not a project path"},
			},
		},
		{ID: 30, Path: "group/tools", DefaultBranch: "main"}, // no file, no times
	}
}

func TestOpenCreatesWALFileAndIsIdempotent(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "with ? and # and space.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("expected %s to exist: %v", f, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 3 { // the db, -wal and -shm, nothing named after a mangled path
		t.Errorf("files in the state dir: %v", entries)
	}
	// A second handle on the same file, while the first is open, migrates nothing.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	v, err := s2.SchemaVersion(ctx)
	if err != nil || v != len(migrations()) {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, len(migrations()))
	}
	var applied int
	if err := s2.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil || applied != len(migrations()) {
		t.Errorf("schema_migrations has %d rows (%v), want %d", applied, err, len(migrations()))
	}
	if got, err := s2.Projects(ctx); err != nil || len(got) != 3 {
		t.Errorf("data lost on reopen: %d projects, %v", len(got), err)
	}
	s2.Close()
	s.Close()
	// And once more after both were closed.
	s3, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("third Open: %v", err)
	}
	s3.Close()
}

func TestOpenErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("this is not a database\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"not sqlite", notDB, "not an SQLite database"},
		{"missing directory", filepath.Join(dir, "missing", "depsd.db"), "no such file or directory"},
		{"a directory", dir, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.path)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) succeeded", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q should name %s and say %q", err, tt.path, tt.want)
			}
		})
	}
	if got, _ := os.ReadFile(notDB); !strings.HasPrefix(string(got), "this is not") {
		t.Errorf("Open modified a file that is not a database")
	}
}

func TestNewerSchemaIsRefused(t *testing.T) { forEachBackend(t, testNewerSchemaIsRefused) }

func testNewerSchemaIsRefused(t *testing.T, b backend) {
	ctx := t.Context()
	s, path := b.openTemp(t)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, path)
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

func TestApplyScanRoundTrip(t *testing.T) { forEachBackend(t, testApplyScanRoundTrip) }

func testApplyScanRoundTrip(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	want := sampleProjects()
	meta := scan.Meta{StartedAt: t0, FinishedAt: t0.Add(3 * time.Second), Projects: 3, Edges: 1, External: 2, Warnings: 2, Requests: 42}
	if err := s.ApplyScan(ctx, want, meta); err != nil {
		t.Fatalf("ApplyScan: %v", err)
	}
	got, err := s.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Sorted by path: app, base, tools.
	wantSorted := []scan.Project{want[1], want[0], want[2]}
	if !reflect.DeepEqual(got, wantSorted) {
		t.Errorf("Projects() =\n%+v\nwant\n%+v", got, wantSorted)
	}
	one, err := s.Project(ctx, "group/app")
	if err != nil || !reflect.DeepEqual(one, want[1]) {
		t.Errorf("Project(group/app) = %+v, %v", one, err)
	}
	if _, err := s.Project(ctx, "group/nope"); !errors.Is(err, scan.ErrNotFound) {
		t.Errorf("Project(group/nope) error = %v, want ErrNotFound", err)
	}
	last, ok, err := s.LastScan(ctx)
	if err != nil || !ok || !reflect.DeepEqual(last, meta) {
		t.Errorf("LastScan() = %+v, %v, %v; want %+v", last, ok, err, meta)
	}
}

func TestLastScanEmptyAndLatest(t *testing.T) { forEachBackend(t, testLastScanEmptyAndLatest) }

func testLastScanEmptyAndLatest(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	if _, ok, err := s.LastScan(ctx); ok || err != nil {
		t.Fatalf("LastScan on a new store = %v, %v", ok, err)
	}
	for i, start := range []time.Time{t0.Add(time.Second), t0.Add(time.Second + 500*time.Millisecond), t0} {
		if err := s.ApplyScan(ctx, nil, scan.Meta{StartedAt: start, Projects: i}); err != nil {
			t.Fatal(err)
		}
	}
	last, _, _ := s.LastScan(ctx)
	if !last.StartedAt.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Errorf("LastScan started at %v, want the latest start", last.StartedAt)
	}
	if err := s.ApplyScan(ctx, nil, scan.Meta{}); err == nil {
		t.Errorf("ApplyScan without a start time succeeded")
	}
}

func TestApplyScanRenameRemoveAndReplace(t *testing.T) {
	forEachBackend(t, testApplyScanRenameRemoveAndReplace)
}

func testApplyScanRenameRemoveAndReplace(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// Next scan: base was transferred to platform/base, tools was archived,
	// app's Dockerfile changed, and a new project (new id) took tools' path.
	next := sampleProjects()
	next[0].Path = "platform/base"
	next[0].Files = []scan.File{{Name: "Containerfile", Content: []byte("FROM debian:trixie\n")}}
	next[1].Dependencies = next[1].Dependencies[:1]
	next[1].Dependencies[0].Project = "platform/base"
	next[1].Warnings = nil
	next = next[:2]
	next = append(next, scan.Project{ID: 40, Path: "group/tools", DefaultBranch: "main"})
	if err := s.ApplyScan(ctx, next, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, p := range got {
		summary = append(summary, fmt.Sprintf("%s#%d/deps=%d/warnings=%d", p.Path, p.ID, len(p.Dependencies), len(p.Warnings)))
	}
	want := []string{"group/app#20/deps=1/warnings=0", "group/tools#40/deps=0/warnings=0", "platform/base#10/deps=1/warnings=0"}
	if !reflect.DeepEqual(summary, want) {
		t.Errorf("after rescan: %q, want %q", summary, want)
	}
	base, err := s.Project(ctx, "platform/base")
	if err != nil || len(base.Files) != 1 || string(base.Files[0].Content) != "FROM debian:trixie\n" {
		t.Errorf("files of the renamed project after rescan: %+v, %v", base.Files, err)
	}
	// Nothing of the removed project is left behind.
	var orphans int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM dependencies WHERE project_id = 30`).Scan(&orphans); err != nil || orphans != 0 {
		t.Errorf("dependencies of the removed project: %d, %v", orphans, err)
	}
}

// TestApplyScanOverReadsAgainWhatChangedSinceTheScanRead: the stored
// projects read before the write (ApplyScan's own read, or a scan's
// handed back through ApplyScanOver) are read again under the lock if
// another scan committed since.
func TestApplyScanOverReadsAgainWhatChangedSinceTheScanRead(t *testing.T) {
	forEachBackend(t, testApplyScanOverReadsAgainWhatChangedSinceTheScanRead)
}

func testApplyScanOverReadsAgainWhatChangedSinceTheScanRead(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	stored, generation, err := s.ProjectsAt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(sampleProjects()) {
		t.Fatalf("ProjectsAt read %d projects, want %d", len(stored), len(sampleProjects()))
	}
	other := append(sampleProjects(), scan.Project{ID: 50, Path: "group/new", DefaultBranch: "main"})
	if err := s.ApplyScan(ctx, other, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyScanOver(ctx, sampleProjects(), scan.Meta{StartedAt: t0.Add(2 * time.Minute)}, stored, generation); err != nil {
		t.Fatal(err)
	}
	got, err := s.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sampleProjects()) {
		t.Errorf("%d projects after the scan, want exactly its own %d (group/new, added since its read, deleted)", len(got), len(sampleProjects()))
	}
}

func TestApplyScanSwappedPaths(t *testing.T) { forEachBackend(t, testApplyScanSwappedPaths) }

func testApplyScanSwappedPaths(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	a := []scan.Project{{ID: 1, Path: "g/x"}, {ID: 2, Path: "g/y"}, {ID: 3, Path: "g/z"}}
	if err := s.ApplyScan(ctx, a, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// x and y swap paths; z moves to a new path.
	swapped := []scan.Project{{ID: 1, Path: "g/y"}, {ID: 2, Path: "g/x"}, {ID: 3, Path: "g/w"}}
	if err := s.ApplyScan(ctx, swapped, scan.Meta{StartedAt: t0.Add(time.Second)}); err != nil {
		t.Fatalf("ApplyScan with swapped paths: %v", err)
	}
	for _, p := range swapped {
		got, err := s.Project(ctx, p.Path)
		if err != nil || got.ID != p.ID {
			t.Errorf("Project(%s) = id %d, %v; want id %d", p.Path, got.ID, err, p.ID)
		}
	}
}

func TestApplyScanRejectsBadInputAndKeepsOldState(t *testing.T) {
	forEachBackend(t, testApplyScanRejectsBadInputAndKeepsOldState)
}

func testApplyScanRejectsBadInputAndKeepsOldState(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		projects []scan.Project
	}{
		{"duplicate id", []scan.Project{{ID: 1, Path: "a"}, {ID: 1, Path: "b"}}},
		{"duplicate path", []scan.Project{{ID: 1, Path: "a"}, {ID: 2, Path: "a"}}},
		{"no id", []scan.Project{{Path: "a"}}},
		{"no path", []scan.Project{{ID: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.ApplyScan(ctx, tt.projects, scan.Meta{StartedAt: t0.Add(time.Hour)}); err == nil {
				t.Fatalf("ApplyScan accepted %s", tt.name)
			}
			if got, _ := s.Projects(ctx); len(got) != 3 {
				t.Errorf("a rejected scan changed the store: %d projects", len(got))
			}
		})
	}
	// A scan cancelled half-way leaves the previous state too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.ApplyScan(cctx, nil, scan.Meta{StartedAt: t0.Add(2 * time.Hour)}); err == nil {
		t.Errorf("ApplyScan with a cancelled context succeeded")
	}
	if got, _ := s.Projects(ctx); len(got) != 3 {
		t.Errorf("a cancelled scan changed the store: %d projects", len(got))
	}
}

func TestGraph(t *testing.T) { forEachBackend(t, testGraph) }

func testGraph(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	projects := sampleProjects()
	// A self-reference, and a reference to a project outside the store:
	// neither is an edge.
	projects[2].Dependencies = []deps.Dependency{
		{Kind: deps.KindGitLabDeps, Line: 1, Ref: "group/tools", Project: "group/tools"},
		{Kind: deps.KindGitLabDeps, Line: 2, Ref: "other/outside", Project: "other/outside"},
	}
	// app pins tools by digest (besides naming it in .gitlab-deps): a
	// pinned edge. Its reference to base is not pinned.
	projects[1].Dependencies = append(projects[1].Dependencies, deps.Dependency{Kind: deps.KindCopyFrom, Line: 8,
		Ref: "registry.example.com/group/tools:1@sha256:def", Image: "registry.example.com/group/tools:1@sha256:def",
		Repository: "registry.example.com/group/tools", Tag: "1", Digest: "sha256:def", Pinned: true, Project: "group/tools"})
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Graph(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*deps.Graph{g, scan.GraphOf(projects)} {
		if got, want := g.Projects(), []string{"group/app", "group/base", "group/tools"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Projects() = %q, want %q", got, want)
		}
		if got, want := g.Upstream("group/app"), []string{"group/base", "group/tools"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Upstream(group/app) = %q, want %q", got, want)
		}
		if got := g.Cycles(); got != nil {
			t.Errorf("Cycles() = %q, want none", got)
		}
		if g.EdgeCount() != 2 {
			t.Errorf("EdgeCount() = %d, want 2", g.EdgeCount())
		}
		if !g.Pinned("group/tools", "group/app") || g.Pinned("group/base", "group/app") {
			t.Errorf("pinned edges: tools→app %v (want true), base→app %v (want false)", g.Pinned("group/tools", "group/app"), g.Pinned("group/base", "group/app"))
		}
		if got := g.PinnedUpstream("group/app"); !reflect.DeepEqual(got, []string{"group/tools"}) {
			t.Errorf("PinnedUpstream(group/app) = %q, want group/tools", got)
		}
	}
	// The daemon's scope: the stored projects' ids, read with the graph.
	ids, err := s.ProjectIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{}
	for _, p := range projects {
		want[p.ID] = true
	}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("ProjectIDs() = %v, want %v", ids, want)
	}
	// The instance's registry hosts, each once (the registries depsd
	// reads): a project on another registry adds its host.
	projects[2].RegistryPrefix = "mirror.example.com:5000/group/tools"
	if err := s.ApplyScan(ctx, projects, scan.Meta{StartedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	hosts, err := s.RegistryHosts(ctx)
	slices.Sort(hosts)
	if err != nil || !reflect.DeepEqual(hosts, []string{"mirror.example.com:5000", "registry.example.com"}) {
		t.Errorf("RegistryHosts() = %q, %v", hosts, err)
	}
}
