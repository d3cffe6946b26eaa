package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify/verifytest"
)

// BenchmarkFreshness2000 reads the freshness of 2,000 projects' images (a
// third stale, each with what will fix it: a schedule of a base the graph
// walk finds, or nothing) from SQLite: the report the CLI prints
// (report, every row), and GET /api/v1/freshness with its JSON (api: its
// first page of 100, the 2,000 rows read and ordered all the same).
func BenchmarkFreshness2000(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "depsd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	projects := benchGraph(2000)
	now := time.Now()
	if err := st.ApplyScan(ctx, projects, scan.Meta{StartedAt: now}); err != nil {
		b.Fatal(err)
	}
	paths := make([]string, len(projects))
	for i, p := range projects {
		paths[i] = p.Path
	}
	if _, err := verifytest.Seed(ctx, st, "registry.example.com", paths, now); err != nil {
		b.Fatal(err)
	}
	engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
	if err != nil {
		b.Fatal(err)
	}
	src := FreshnessSources{Store: st, Chains: engine, Schedules: func(context.Context) ([]scheduler.Entry, error) {
		return []scheduler.Entry{{Kind: scheduler.KindRebuild, Target: "images/base-0", Next: now.Add(time.Hour)}}, nil
	}}
	b.Run("report", func(b *testing.B) {
		for b.Loop() {
			rep, err := Freshness(ctx, src, FreshnessQuery{MaxAge: DefaultMaxAge})
			if err != nil || len(rep.Images) != len(projects) {
				b.Fatalf("%d rows, %v", len(rep.Images), err)
			}
		}
	})
	a := &api{store: st, engine: engine, metrics: newMetrics(true), webhook: http.NotFoundHandler(), ready: func(context.Context) error { return nil },
		freshness: func(ctx context.Context, q FreshnessQuery) (FreshnessReport, error) { return Freshness(ctx, src, q) }}
	h, _ := a.routes(false)
	srv := httptest.NewServer(h)
	defer srv.Close()
	b.Run("api", func(b *testing.B) {
		var size int64
		for b.Loop() {
			resp, err := http.Get(srv.URL + "/api/v1/freshness")
			if err != nil {
				b.Fatal(err)
			}
			size, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatal(resp.Status)
			}
		}
		b.ReportMetric(float64(size)/1000, "kB/answer")
	})
}

// benchGraph is n projects in three levels, as in bench/: 5 bases, 45
// runtimes FROM them, apps FROM the runtimes.
func benchGraph(n int) []scan.Project {
	from := func(p string) []deps.Dependency {
		return []deps.Dependency{{Kind: deps.KindFrom, Image: "registry.example.com/" + p + ":latest", Project: p}}
	}
	var out []scan.Project
	id := int64(0)
	add := func(path string, d []deps.Dependency) {
		id++
		out = append(out, scan.Project{ID: id, Path: path, DefaultBranch: "main", Dependencies: d})
	}
	for i := range 5 {
		add(fmt.Sprintf("images/base-%d", i), []deps.Dependency{{Kind: deps.KindFrom, Image: fmt.Sprintf("docker.io/library/debian:%d", i)}})
	}
	for i := range 45 {
		add(fmt.Sprintf("images/runtime-%d", i), from(fmt.Sprintf("images/base-%d", i%5)))
	}
	for i := range n - 50 {
		add(fmt.Sprintf("apps/team-%d/app-%d", i%20, i), from(fmt.Sprintf("images/runtime-%d", i%45)))
	}
	return out
}
