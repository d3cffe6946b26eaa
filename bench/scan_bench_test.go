// Package bench holds whole-system benchmarks whose figures docs/benchmarks.md
// quotes. Run them with: go test -run '^$' -bench . -benchtime 1x ./bench/
package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// seedInstance fills a fake GitLab with n projects in three levels of
// image chains (a few bases, runtimes FROM them, apps FROM the runtimes,
// some apps with a second stage COPY --from another runtime) and every
// tenth app declaring an extra upstream in .gitlab-deps instead.
func seedInstance(b *testing.B, srv *gitlabtest.Server, n int) {
	b.Helper()
	const bases, runtimes = 5, 45
	add := func(path string, files map[string]string) {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: files}); err != nil {
			b.Fatal(err)
		}
	}
	reg := "registry.example.com/"
	for i := range bases {
		add(fmt.Sprintf("images/base-%d", i), map[string]string{"Containerfile": fmt.Sprintf("FROM debian:bookworm-%d\n", i)})
	}
	for i := range runtimes {
		add(fmt.Sprintf("images/runtime-%d", i), map[string]string{
			"Containerfile": fmt.Sprintf("ARG BASE=%simages/base-%d\nFROM ${BASE}:latest\n", reg, i%bases)})
	}
	for i := range n - bases - runtimes {
		files := map[string]string{}
		switch {
		case i%10 == 9:
			files[".gitlab-deps"] = fmt.Sprintf("apps/team-%d/app-%d\n", (i-1)%20, i-1)
		case i%7 == 0:
			files["Dockerfile"] = fmt.Sprintf("FROM %simages/runtime-%d AS build\nFROM %simages/runtime-%d\nCOPY --from=build /app /app\n",
				reg, i%runtimes, reg, (i+1)%runtimes)
		default:
			files["Containerfile"] = fmt.Sprintf("FROM %simages/runtime-%d:1\n", reg, i%runtimes)
		}
		add(fmt.Sprintf("apps/team-%d/app-%d", i%20, i), files)
	}
}

// BenchmarkScan2000 scans 2,000 projects from the fake GitLab with 20 ms of
// latency per request, with the client at its defaults (8 in flight,
// 2,000 requests a minute), then rescans the unchanged instance. It
// reports the requests of both, per project and per 100 projects, the
// wall time of the first, and its floor: its requests at 2,000 a minute
// (the latency floor, requests × 20 ms ÷ 8, is far below).
func BenchmarkScan2000(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		now := time.Now()
		clock := func() time.Time { return now }
		srv := gitlabtest.New(gitlabtest.Options{Token: "bench", Now: clock})
		seedInstance(b, srv, 2000)
		srv.SetLatency(20 * time.Millisecond)
		gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "bench", Now: clock})
		if err != nil {
			b.Fatal(err)
		}
		st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		opts := scan.Options{Scope: gitlab.Scope{Groups: []string{"images", "apps"}}, Now: clock}
		ctx := context.Background()
		b.StartTimer()

		start := time.Now()
		first, err := scan.Run(ctx, gl, st, opts)
		if err != nil {
			b.Fatal(err)
		}
		firstWall := time.Since(start)
		now = now.Add(time.Minute)
		start = time.Now()
		again, err := scan.Run(ctx, gl, st, opts)
		if err != nil {
			b.Fatal(err)
		}
		againWall := time.Since(start)

		b.StopTimer()
		if first.Projects != 2000 || again.Edges != first.Edges || again.FilesFetched != 0 {
			b.Fatalf("first %+v, rescan %+v", first, again)
		}
		b.ReportMetric(firstWall.Seconds(), "scan-s")
		b.ReportMetric(float64(first.Requests), "scan-requests")
		b.ReportMetric(againWall.Seconds(), "rescan-s")
		b.ReportMetric(float64(again.Requests), "rescan-requests")
		b.ReportMetric(float64(first.Edges), "edges")
		b.ReportMetric(float64(first.Requests)/float64(first.Projects), "scan-requests/project")
		b.ReportMetric(float64(again.Requests)*100/float64(again.Projects), "rescan-requests/100-projects")
		b.ReportMetric(float64(first.Requests)*60/2000, "scan-floor-s")
		// The goals of the speed issue, printed beside the figures.
		b.ReportMetric(90, "scan-goal-s")
		b.ReportMetric(1.5, "scan-goal-requests/project")
		b.ReportMetric(1, "rescan-goal-requests/100-projects")
		b.ReportMetric(float64(first.BlobsRead), "blobs-read")
		st.Close()
		srv.Close()
		b.StartTimer()
	}
}
