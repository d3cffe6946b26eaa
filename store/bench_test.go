package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// BenchmarkApplyScan writes a scan of 2,000 projects with a 400-byte
// Containerfile, 3 dependencies and a warning each over the previous one: "unchanged" is the periodic rescan of
// a quiet instance, "changed" a scan in which every project's head commit,
// dependencies and warnings changed (the worst case, like a first scan).
func BenchmarkApplyScan(b *testing.B) {
	const n = 2000
	scans := [2][]scan.Project{benchScan(n, "a"), benchScan(n, "b")}
	for _, bench := range []struct {
		name string
		flip int // 0: the same scan every time; 1: alternate between two
	}{{"unchanged", 0}, {"changed", 1}} {
		b.Run(bench.name, func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "depsd.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			start := time.Now()
			if err := s.ApplyScan(b.Context(), scans[0], scan.Meta{StartedAt: start}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i ^= bench.flip
				start = start.Add(time.Second)
				if err := s.ApplyScan(b.Context(), scans[i], scan.Meta{StartedAt: start}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(n, "projects")
		})
	}
}

func benchScan(n int, variant string) []scan.Project {
	now := time.Now()
	projects := make([]scan.Project, n)
	for i := range projects {
		p := scan.Project{
			ID: int64(i + 1), Path: fmt.Sprintf("team%d/app%d", i%50, i), DefaultBranch: "main",
			RegistryPrefix: fmt.Sprintf("registry.example.com/team%d/app%d", i%50, i),
			WebURL:         fmt.Sprintf("https://gitlab.example.com/team%d/app%d", i%50, i),
			HeadCommit:     "0123456789abcdef0123456789abcdef0123456" + variant, File: "Containerfile",
			LastActivity: now, ScannedAt: now,
			Warnings:      []deps.Warning{{File: "Containerfile", Line: 2, Message: "ARG VERSION has no default " + variant}},
			SearchedFiles: []string{"Containerfile", "Dockerfile"},
			Files:         []scan.File{{Name: "Containerfile", Content: []byte(strings.Repeat("RUN make install # "+variant+"\n", 16))}},
		}
		for k := range 3 {
			up := projects[max(0, i-1-k)].Path
			p.Dependencies = append(p.Dependencies, deps.Dependency{
				Kind: deps.KindFrom, Line: k + 1, Ref: "registry.example.com/" + up + ":latest",
				Image: "registry.example.com/" + up + ":latest", Repository: "registry.example.com/" + up,
				Tag: variant, Project: up,
			})
		}
		projects[i] = p
	}
	return projects
}

func BenchmarkProjects(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "depsd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.ApplyScan(b.Context(), scanOf(2000, "x"), scan.Meta{StartedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Projects(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
