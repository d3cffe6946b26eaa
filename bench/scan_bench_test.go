// Package bench holds whole-system benchmarks whose figures docs/benchmarks.md
// quotes. Run them with: go test -run '^$' -bench . -benchtime 1x ./bench/
package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
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

// The refs benchmarks' followed branch: every tenth app (those whose
// index ends in 3) has a maintenance branch, bookworm, with a
// Containerfile of its own, and refsRules follow it on them (issue 36:
// one extra followed branch on 10 % of the projects).
const refsBranch = "bookworm"

var refsRules = deps.RefRules{{Projects: []string{"apps/*/app-*3"}, Branches: []string{refsBranch}}}

// seedRefs gives every project of srv that rules match a refsBranch
// branch whose dependency file is its default branch's with a line more
// (a Containerfile FROM debian:bookworm for a project with none), and
// returns how many it gave one.
func seedRefs(tb testing.TB, srv *gitlabtest.Server, rules deps.RefRules) int {
	tb.Helper()
	n := 0
	for _, p := range srv.Projects() {
		if _, ok := rules.For(p); !ok {
			continue
		}
		if err := srv.CreateBranch(p, refsBranch); err != nil {
			tb.Fatal(err)
		}
		files := srv.Files(p, refsBranch)
		name, content := "Containerfile", "FROM debian:bookworm\n"
		for _, f := range []string{"Dockerfile", "Containerfile"} {
			if c, ok := files[f]; ok {
				name, content = f, c+"LABEL branch="+refsBranch+"\n"
			}
		}
		if _, err := srv.SetFileOn(p, refsBranch, name, content); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return n
}

// scanRun is one first scan and one unchanged rescan of a seeded fake.
type scanRun struct {
	first, again         scan.Result
	firstWall, againWall time.Duration
	followed             int // projects with a followed branch (seedRefs)
}

// scanSetup says what runScans seeds and how it scans.
type scanSetup struct {
	n         int
	restOnly  bool
	latency   time.Duration
	perMinute int
	// refs are the followed refs (scan.Options.Refs); seedRefs gives the
	// projects branchesOn matches a followed branch.
	refs, branchesOn deps.RefRules
}

// runScans seeds n projects, sets the latency, and scans twice at the
// client's defaults.
func runScans(tb testing.TB, n int, restOnly bool, latency time.Duration, perMinute int) scanRun {
	return runScansWith(tb, scanSetup{n: n, restOnly: restOnly, latency: latency, perMinute: perMinute})
}

func runScansWith(tb testing.TB, s scanSetup) scanRun {
	now := time.Now()
	clock := func() time.Time { return now }
	srv := gitlabtest.New(gitlabtest.Options{Token: "bench", Now: clock})
	defer srv.Close()
	seedInstance(tb, srv, s.n)
	var r scanRun
	if s.branchesOn != nil {
		r.followed = seedRefs(tb, srv, s.branchesOn)
		// The pushes are older than GitLab's hour of last_activity_at,
		// so that the rescan can tell nothing moved.
		now = now.Add(2 * time.Hour)
	}
	srv.SetLatency(s.latency)
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "bench", Now: clock, RequestsPerMinute: s.perMinute})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"))
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	opts := scan.Options{Scope: gitlab.Scope{Groups: []string{"images", "apps"}}, Now: clock, RESTOnly: s.restOnly, Refs: s.refs}
	ctx := context.Background()
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
	if r.first.Projects != s.n || r.again.Edges != r.first.Edges || r.again.FilesFetched != 0 {
		tb.Fatalf("first %+v, rescan %+v", r.first, r.again)
	}
	if s.branchesOn != nil {
		g, err := st.Graph(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if nodes := len(g.Projects()); nodes != s.n+r.followed {
			tb.Fatalf("%d nodes, want %d projects and %d followed branches", nodes, s.n, r.followed)
		}
	}
	return r
}

func benchScan(b *testing.B, n int, restOnly bool, goalSeconds, goalPerProject float64) {
	benchScanWith(b, scanSetup{n: n, restOnly: restOnly}, goalSeconds, goalPerProject)
}

// BenchmarkScan10000Refs is BenchmarkScan10000 with one extra followed
// branch on 10 % of the projects (issue 36; refsRules): 10,995 nodes. It
// reports besides the requests for refs (refs-requests: the requests a
// scan makes for refs apart from the default branches' batches) and per
// followed branch. DEPSD_BENCH_SCALE=0.1 runs it at a tenth of the size.
func BenchmarkScan10000Refs(b *testing.B) {
	benchScanWith(b, scanSetup{n: scaled(b, 10000), refs: refsRules, branchesOn: refsRules}, 60, 0.15)
}

func benchScanWith(b *testing.B, s scanSetup, goalSeconds, goalPerProject float64) {
	for b.Loop() {
		b.StopTimer()
		s.latency = 20 * time.Millisecond
		r := runScansWith(b, s)
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
		if s.branchesOn != nil {
			b.ReportMetric(float64(r.followed), "followed-branches")
			b.ReportMetric(float64(first.RefRequests), "refs-requests")
			b.ReportMetric(float64(first.RefRequests)/float64(max(r.followed, 1)), "refs-requests/followed-branch")
			b.ReportMetric(float64(again.RefRequests), "rescan-refs-requests")
		}
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

// TestScanRefsRequestCounts holds BenchmarkScan10000Refs's instance to its
// request counts at a small scale (counts do not depend on latency or
// rate): one extra followed branch on 10 % of 1,000 projects costs no
// request beyond the default branches' (the branch names and the
// branch's files ride in the batches, 5 such projects in each), and its
// unchanged rescan the listing alone. Through REST each followed branch
// costs a branch listing and a tree (and its blobs). A rule following the
// branch on every app, 10 % having it, costs two requests more per batch
// of 50 (its 47 or 48 apps' branch names: 9 beside the default branches,
// then 29 and the rest in requests of their own). docs/scale.md quotes
// these figures.
func TestScanRefsRequestCounts(t *testing.T) {
	const n = 1000
	base := runScans(t, n, false, 0, -1)
	refs := runScansWith(t, scanSetup{n: n, perMinute: -1, refs: refsRules, branchesOn: refsRules})
	rest := runScansWith(t, scanSetup{n: n, restOnly: true, perMinute: -1, refs: refsRules, branchesOn: refsRules})
	every := deps.RefRules{{Projects: []string{"apps/*/*"}, Branches: []string{refsBranch}}}
	all := runScansWith(t, scanSetup{n: n, perMinute: -1, refs: every, branchesOn: refsRules})
	const followed = 95 // apps 0-949 whose index ends in 3
	pages := int64(1 + (n-50+99)/100)
	t.Logf("first scan: %d requests without refs; %d with one followed branch on %d projects (%d for refs), %d through REST (%d for refs), %d with the rule on every app (%d for refs)",
		base.first.Requests, refs.first.Requests, refs.followed, refs.first.RefRequests, rest.first.Requests, rest.first.RefRequests,
		all.first.Requests, all.first.RefRequests)
	if refs.followed != followed || all.followed != followed {
		t.Fatalf("%d and %d followed branches, want %d", refs.followed, all.followed, followed)
	}
	if refs.first.Requests != base.first.Requests || refs.first.RefRequests != 0 || refs.first.Batches != n/50 {
		t.Errorf("refs on 10 %%: %d requests (%d for refs, %d batches); want the %d of the scan without refs, none for refs",
			refs.first.Requests, refs.first.RefRequests, refs.first.Batches, base.first.Requests)
	}
	if refs.again.Requests != pages || all.again.Requests != pages || rest.again.Requests != pages {
		t.Errorf("unchanged rescans: %d, %d, %d requests; want the %d pages of the listing", refs.again.Requests, all.again.Requests, rest.again.Requests, pages)
	}
	if rest.first.RefRequests != 2*followed {
		t.Errorf("REST: %d requests for refs, want %d (a branch listing and a tree each)", rest.first.RefRequests, 2*followed)
	}
	if all.first.RefRequests != 2*n/50 || all.first.Requests != base.first.Requests+int64(all.first.RefRequests) {
		t.Errorf("rule on every app: %d requests, %d for refs; want %d for refs (two more per batch)", all.first.Requests, all.first.RefRequests, 2*n/50)
	}
	if refs.first.Edges != rest.first.Edges || refs.first.External != rest.first.External || refs.first.Warnings != rest.first.Warnings ||
		all.first.Edges != refs.first.Edges {
		t.Errorf("GraphQL scan %+v, REST scan %+v, rule on every app %+v: want the same graph", refs.first.Meta, rest.first.Meta, all.first.Meta)
	}
}
