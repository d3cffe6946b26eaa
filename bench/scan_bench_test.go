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
func seedInstance(b testing.TB, srv *gitlabtest.Server, n int) {
	b.Helper()
	seedInstanceOn(b, srv, n, gitlabtest.DefaultRegistryHost, "debian:bookworm-%d")
}

// The instance's bases and runtimes (seedInstanceOn).
const seedBases, seedRuntimes = 5, 45

// seedInstanceOn is seedInstance with the projects' images on registry
// host reg (the fake's RegistryHost), and base i FROM
// fmt.Sprintf(external, i).
func seedInstanceOn(b testing.TB, srv *gitlabtest.Server, n int, reg, external string) {
	b.Helper()
	const bases, runtimes = seedBases, seedRuntimes
	add := func(path string, files map[string]string) {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: files}); err != nil {
			b.Fatal(err)
		}
	}
	reg += "/"
	for i := range bases {
		add(fmt.Sprintf("images/base-%d", i), map[string]string{"Containerfile": "FROM " + fmt.Sprintf(external, i) + "\n"})
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
// (the latency floor, requests × 20 ms ÷ 8, is far below). Files are read
// through GraphQL, 50 projects a request (the default);
// BenchmarkScan2000REST reads them through REST as before.
func BenchmarkScan2000(b *testing.B) { benchScan(b, 2000, false, 90, 1.5) }

// BenchmarkScan2000REST is BenchmarkScan2000 with gitlab.graphql: false.
func BenchmarkScan2000REST(b *testing.B) { benchScan(b, 2000, true, 90, 1.5) }

// BenchmarkScan10000 is the first scan of 10,000 projects (issue 30, goal
// 1: ≤ 60 s and ≤ 0.15 requests a project; unchanged rescan ≤ 1 request
// per 100 projects).
func BenchmarkScan10000(b *testing.B) { benchScan(b, 10000, false, 60, 0.15) }

// scanRun is one first scan and one unchanged rescan of a seeded fake.
type scanRun struct {
	first, again         scan.Result
	firstWall, againWall time.Duration
}

// runScans seeds n projects, sets the latency, and scans twice at the
// client's defaults.
func runScans(tb testing.TB, n int, restOnly bool, latency time.Duration, perMinute int) scanRun {
	now := time.Now()
	clock := func() time.Time { return now }
	srv := gitlabtest.New(gitlabtest.Options{Token: "bench", Now: clock})
	defer srv.Close()
	seedInstance(tb, srv, n)
	srv.SetLatency(latency)
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "bench", Now: clock, RequestsPerMinute: perMinute})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"))
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	opts := scan.Options{Scope: gitlab.Scope{Groups: []string{"images", "apps"}}, Now: clock, RESTOnly: restOnly}
	ctx := context.Background()
	var r scanRun
	start := time.Now()
	r.first, err = scan.Run(ctx, gl, st, opts)
	if err != nil {
		tb.Fatal(err)
	}
	r.firstWall = time.Since(start)
	now = now.Add(time.Minute)
	start = time.Now()
	r.again, err = scan.Run(ctx, gl, st, opts)
	if err != nil {
		tb.Fatal(err)
	}
	r.againWall = time.Since(start)
	if r.first.Projects != n || r.again.Edges != r.first.Edges || r.again.FilesFetched != 0 {
		tb.Fatalf("first %+v, rescan %+v", r.first, r.again)
	}
	return r
}

func benchScan(b *testing.B, n int, restOnly bool, goalSeconds, goalPerProject float64) {
	for b.Loop() {
		b.StopTimer()
		r := runScans(b, n, restOnly, 20*time.Millisecond, 0)
		first, again := r.first, r.again
		b.ReportMetric(r.firstWall.Seconds(), "scan-s")
		b.ReportMetric(float64(first.Requests), "scan-requests")
		b.ReportMetric(r.againWall.Seconds(), "rescan-s")
		b.ReportMetric(float64(again.Requests), "rescan-requests")
		b.ReportMetric(float64(first.Edges), "edges")
		b.ReportMetric(float64(first.Batches), "graphql-batches")
		b.ReportMetric(float64(first.Requests)/float64(first.Projects), "scan-requests/project")
		b.ReportMetric(float64(again.Requests)*100/float64(again.Projects), "rescan-requests/100-projects")
		b.ReportMetric(float64(first.Requests)*60/2000, "scan-floor-s")
		// The goals, printed beside the figures.
		b.ReportMetric(goalSeconds, "scan-goal-s")
		b.ReportMetric(goalPerProject, "scan-goal-requests/project")
		b.ReportMetric(1, "rescan-goal-requests/100-projects")
		b.ReportMetric(float64(first.BlobsRead), "blobs-read")
		b.StartTimer()
	}
}

// TestScanRequestCounts holds the benchmark's instance to the request
// goals at a small scale (no latency, no rate limit: counts do not depend
// on them): the GraphQL first scan at ≤ 0.15 requests a project, the
// unchanged rescan at its listing alone, and the REST scan's graph.
func TestScanRequestCounts(t *testing.T) {
	const n = 1000
	r := runScans(t, n, false, 0, -1)
	rest := runScans(t, n, true, 0, -1)
	// 10 pages of 100 over two groups + 20 batches of 50.
	if got := float64(r.first.Requests) / n; got > 0.15 || r.first.Batches != n/50 {
		t.Errorf("first scan: %d requests (%.3f a project), %d batches; goal ≤ 0.15", r.first.Requests, got, r.first.Batches)
	}
	// The rescan is the listing alone: a page of 100 per group (images
	// has 50 projects, apps the rest), 1.1 per 100 projects here, 1.01 at
	// 10,000.
	if pages := int64(1 + (n-50+99)/100); r.again.Requests != pages {
		t.Errorf("unchanged rescan: %d requests; want the %d pages of the listing", r.again.Requests, pages)
	}
	if r.first.Edges != rest.first.Edges || r.first.External != rest.first.External || r.first.Warnings != rest.first.Warnings {
		t.Errorf("GraphQL scan %+v differs from the REST scan %+v", r.first.Meta, rest.first.Meta)
	}
}
