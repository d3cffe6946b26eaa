package store

import (
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
)

// TestProjectsAtKeepsWhatAReadWouldReturn: after each scan's write the
// stored projects ProjectsAt gives from memory are, field by field and in
// order, what reading them returns: a project renamed (its place in the
// order moves), one removed, one added, a file changed, a scan that
// names no pipeline identification where one is stored (the store keeps
// the stored one), warnings gone, a file alone changed; and the
// projects are kept from memory
// after each of those writes.
func TestProjectsAtKeepsWhatAReadWouldReturn(t *testing.T) {
	forEachBackend(t, testProjectsAtKeepsWhatAReadWouldReturn)
}

func testProjectsAtKeepsWhatAReadWouldReturn(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	check := func(step string) {
		t.Helper()
		gen := s.projectsGenerationNow(t)
		if _, kept := s.projects.at(gen); !kept {
			t.Fatalf("%s: the projects are not kept", step)
		}
		got, _, err := s.ProjectsAt(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Projects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: kept\n%+v\nread\n%+v", step, got, want)
		}
	}
	scans := 0
	apply := func(step string, ps []scan.Project) {
		t.Helper()
		scans++
		if err := s.ApplyScan(ctx, ps, scan.Meta{StartedAt: t0.Add(time.Duration(scans) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		check(step)
	}
	apply("first scan", sampleProjects())

	next := sampleProjects()
	next[0].Path = "zz/base" // last by path now
	next[0].Files = []scan.File{{Name: "Containerfile", Content: []byte("FROM debian:trixie\n")}}
	next[1].Warnings = nil
	next = append(next[:2], scan.Project{ID: 40, Path: "group/new", DefaultBranch: "main"})
	apply("renamed, changed, removed, added", next)

	// The engine learns app's identification (another writer: the
	// generation moves, ProjectsAt reads); a scan that names none keeps it.
	if err := s.UpdateChains(ctx, func(tx chain.Tx) error { return tx.SetPipelineIdent(ctx, 20, chain.IdentInputs) }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ProjectsAt(ctx); err != nil {
		t.Fatal(err)
	}
	next[1].HeadCommit = "ccc" // the row is written
	next[1].PipelineIdent = ""
	apply("a scan naming no identification", next)
	next[2].Files = []scan.File{{Name: "Containerfile", Content: []byte("FROM alpine\n")}}
	apply("a file alone changed", next)
	got, err := s.Project(ctx, "group/app")
	if err != nil || got.PipelineIdent != string(chain.IdentInputs) {
		t.Errorf("group/app's identification after the scan: %q, %v; want it kept", got.PipelineIdent, err)
	}
	apply("unchanged", next)
}

// projectsGenerationNow reads the projects' generation.
func (s *Store) projectsGenerationNow(t *testing.T) int64 {
	t.Helper()
	var gen int64
	err := s.read(t.Context(), func(tx *sql.Tx) error {
		var err error
		gen, err = projectsGeneration(t.Context(), tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// TestProjectsAtReadsOnceTheGenerationMoves: the kept projects stand for
// a read only while the projects' generation stays; once another writer
// moves it, ProjectsAt reads what is stored.
func TestProjectsAtReadsOnceTheGenerationMoves(t *testing.T) {
	forEachBackend(t, testProjectsAtReadsOnceTheGenerationMoves)
}

func testProjectsAtReadsOnceTheGenerationMoves(t *testing.T, b backend) {
	ctx := t.Context()
	s, dsn := b.openTemp(t)
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	headOf := func() string {
		t.Helper()
		ps, _, err := s.ProjectsAt(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.ID == 10 {
				return p.HeadCommit
			}
		}
		t.Fatal("group/base not found")
		return ""
	}
	// A change behind the generation's back is not seen: the projects
	// come from memory.
	if _, err := other.db.ExecContext(ctx, `UPDATE projects SET head_commit = 'zzz' WHERE id = 10`); err != nil {
		t.Fatal(err)
	}
	if got := headOf(); got != "aaa" {
		t.Fatalf("head of group/base = %q, want the kept aaa (the projects were read again)", got)
	}
	if _, err := other.db.ExecContext(ctx, `UPDATE generations SET n = n + 1 WHERE name = 'projects'`); err != nil {
		t.Fatal(err)
	}
	if got := headOf(); got != "zzz" {
		t.Errorf("head of group/base = %q after the generation moved, want zzz", got)
	}
}

// TestProjectsCacheLetsGoOfManyWritesAndOfIdleProjects: a scan that
// writes more than maxReadBack projects leaves nothing kept (reading them
// back would hold the write lock), one that writes a few keeps them, and
// kept projects unused for the cache's time are let go.
func TestProjectsCacheLetsGoOfManyWritesAndOfIdleProjects(t *testing.T) {
	ctx := t.Context()
	s, _ := backends[0].openTemp(t)
	var many []scan.Project
	for i := range maxReadBack + 1 {
		many = append(many, scan.Project{ID: int64(100 + i), Path: fmt.Sprintf("g/p%03d", i), DefaultBranch: "main"})
	}
	if err := s.ApplyScan(ctx, many, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	gen := s.projectsGenerationNow(t)
	if _, kept := s.projects.at(gen); kept {
		t.Errorf("%d projects written, and kept", len(many))
	}
	// A rescan that writes one project keeps them.
	s.projects.ttl = 20 * time.Millisecond
	many[0].HeadCommit = "bbb"
	if err := s.ApplyScan(ctx, many, scan.Meta{StartedAt: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	gen = s.projectsGenerationNow(t)
	if _, kept := s.projects.at(gen); !kept {
		t.Fatal("the projects a scan wrote one of are not kept")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, kept := s.projects.at(gen); !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the projects are still kept 10 s after their last use")
		}
		time.Sleep(50 * time.Millisecond) // longer than the time kept
	}
}

// TestProjectsCacheKeepsNothingOfAScanThatFailed: a scan whose write
// fails after it read back what it wrote (here its scan record, which
// has no start time) leaves nothing kept: what it wrote was rolled back,
// and another writer may yet move the generation to the one it would
// have left.
func TestProjectsCacheKeepsNothingOfAScanThatFailed(t *testing.T) {
	ctx := t.Context()
	s, _ := backends[0].openTemp(t)
	if err := s.ApplyScan(ctx, sampleProjects(), scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	failed := sampleProjects()
	failed[0].HeadCommit = "zzz"
	if err := s.ApplyScan(ctx, failed, scan.Meta{}); err == nil {
		t.Fatal("a scan without a start time was stored")
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE generations SET n = n + 1 WHERE name = 'projects'`); err != nil {
		t.Fatal(err)
	}
	ps, _, err := s.ProjectsAt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.ID == 10 && p.HeadCommit != "aaa" {
			t.Errorf("head of group/base = %q, want aaa: the failed scan's write is taken for stored", p.HeadCommit)
		}
	}
}
