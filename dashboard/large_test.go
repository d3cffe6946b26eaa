package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify/verifytest"
)

// largeInstance is 2,000 projects in three levels of image chains, as in
// bench/: 5 bases FROM external images, 45 runtimes FROM them, apps FROM
// the runtimes (some with a second stage from another runtime), and every
// tenth app declaring another app upstream in .gitlab-deps.
func largeInstance(n int) []gitlabtest.Project {
	const bases, runtimes = 5, 45
	var out []gitlabtest.Project
	add := func(path string, files map[string]string) {
		out = append(out, gitlabtest.Project{Path: path, Files: files})
	}
	for i := range bases {
		add(fmt.Sprintf("acme/images/base-%d", i), map[string]string{"Containerfile": fmt.Sprintf("FROM debian:bookworm-%d\n", i)})
	}
	for i := range runtimes {
		add(fmt.Sprintf("acme/images/runtime-%d", i), map[string]string{"Containerfile": fmt.Sprintf("FROM %sacme/images/base-%d:latest\n", registry, i%bases)})
	}
	for i := range n - bases - runtimes {
		files := map[string]string{}
		switch {
		case i%10 == 9:
			files[".gitlab-deps"] = fmt.Sprintf("acme/apps/team-%d/app-%d\n", (i-1)%20, i-1)
		case i%7 == 0:
			files["Dockerfile"] = fmt.Sprintf("FROM %sacme/images/runtime-%d AS build\nFROM %sacme/images/runtime-%d\nCOPY --from=build /app /app\n",
				registry, i%runtimes, registry, (i+1)%runtimes)
		default:
			files["Containerfile"] = fmt.Sprintf("FROM %sacme/images/runtime-%d:1\n", registry, i%runtimes)
		}
		add(fmt.Sprintf("acme/apps/team-%d/app-%d", i%20, i), files)
	}
	return out
}

// renderGraph opens a graph page and returns how long it took until its
// picture was visible.
func renderGraph(tb testing.TB, b *browser, url string) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*pageTimeout)
	defer cancel()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("figure.graph svg")); err != nil {
		tb.Fatalf("render %s: %v", url, err)
	}
	return time.Since(start)
}

// The graph page of a 10,000-project instance (issue 30's size) renders
// an overview and focus views in the browser; the render times are
// logged (speed is shown, not asserted: BenchmarkGraphPage10000 prints
// them beside the goal).
func TestLargeGraphInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 10,000-project browser test")
	}
	const n = 10000
	b := newBrowser(t)
	s := serve(t, largeInstance(n), nil, nil, scheduler.Config{})

	took := renderGraph(t, b, s.url+"/graph")
	shown := eval[int](t, b, `document.querySelectorAll("figure.graph svg [data-project]").length`)
	if shown == 0 || shown > 40 {
		t.Errorf("overview of %d projects draws %d of them, want 1-40", n, shown)
	}
	// The search box's list comes when the field is first used.
	if got := eval[int](t, b, `document.querySelectorAll("#projects option").length`); got != 0 {
		t.Errorf("the page carries %d of the search's options, want them fetched when it is used", got)
	}
	if err := chromedp.Do(b.ctx, chromedp.Click("#focus")); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "the search's options", `document.querySelector("#projects[data-loaded]") !== null`)
	if got := eval[int](t, b, `document.querySelectorAll("#projects option").length`); got != n {
		t.Errorf("the search offers %d projects, want %d", got, n)
	}
	t.Logf("graph page of %d projects (overview of %d) rendered in %s", n, shown, took)
	b.screenshot(t, "graph-10000")

	// A runtime's focus view draws all it touches (about 370 projects);
	// a base's (about 2,100) is drawn one edge deep, unless asked for
	// whole.
	for _, tc := range []struct {
		focus, query string
		whole        bool
	}{
		{"acme/images/runtime-3", "", true},
		{"acme/images/base-0", "", false},
		{"acme/images/base-0", "&depth=0", true},
	} {
		took = renderGraph(t, b, s.url+"/graph?focus="+tc.focus+tc.query)
		drawn := eval[int](t, b, `document.querySelectorAll("figure.graph svg [data-project]").length`)
		down := eval[int](t, b, `document.querySelectorAll("#downstream-list li").length`)
		up := eval[int](t, b, `document.querySelectorAll("section[aria-labelledby=up-h] li").length`)
		drawAll := eval[bool](t, b, `document.getElementById("draw-all") !== null`)
		switch {
		case tc.whole && (drawn != down+up+1 || drawAll): // the project, its upstreams, its downstreams
			t.Errorf("focus on %s%s draws %d projects for %d upstreams and %d downstreams (offers to draw all: %v), want all", tc.focus, tc.query, drawn, up, down, drawAll)
		case !tc.whole && (drawn > 500 || drawn >= down+up+1 || !drawAll):
			t.Errorf("focus on %s draws %d projects for %d upstreams and %d downstreams (offers to draw all: %v), want at most 500 and a link to draw all", tc.focus, drawn, up, down, drawAll)
		}
		t.Logf("focus view of %s%s (%d projects drawn, %d listed) rendered in %s", tc.focus, tc.query, drawn, up+down+1, took)
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// BenchmarkGraphPage2000 measures the graph page of 2,000 projects in
// headless Chromium, from navigation to the picture shown.
func BenchmarkGraphPage2000(b *testing.B) {
	br := newBrowser(b)
	s := serve(b, largeInstance(2000), nil, nil, scheduler.Config{})
	renderGraph(b, br, s.url+"/graph") // warm the graph cache
	b.ResetTimer()
	for b.Loop() {
		renderGraph(b, br, s.url+"/graph")
	}
}

// seedFreshness stores one verification of each project's image in
// depsd serve's state, as verifytest.Seed does (a third stale, the larger
// the index the staler), and returns the stale projects, stalest first.
func seedFreshness(tb testing.TB, s *served, projects []gitlabtest.Project) []string {
	tb.Helper()
	st, err := store.Open(context.Background(), s.state)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	paths := make([]string, len(projects))
	for i, p := range projects {
		paths[i] = p.Path
	}
	stale, err := verifytest.Seed(context.Background(), st, gitlabtest.DefaultRegistryHost, paths, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return stale
}

// renderFreshness opens a Freshness page and returns how long it took
// until its table was visible.
func renderFreshness(tb testing.TB, b *browser, url string) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*pageTimeout)
	defer cancel()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#freshness"))); err != nil {
		tb.Fatalf("render %s: %v", url, err)
	}
	return time.Since(start)
}

// serveTime is how long the server takes to answer url, body read, and
// the body's size.
func serveTime(tb testing.TB, url string) (time.Duration, int64) {
	tb.Helper()
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	size, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return time.Since(start), size
}

// freshnessRows are the open Freshness page's rows: "project state".
const freshnessRows = `Array.from(document.querySelectorAll("#freshness tbody tr")).map(r => r.dataset.project + " " + r.dataset.state)`

// The Freshness page of 2,000 projects' images shows the first 100,
// stalest first, the counts per state of them all, and leads page by page
// to the last without losing a row; filtered on a state, the same. The
// render time is logged (speed is shown, not asserted:
// BenchmarkFreshnessPage10000 prints it beside the goal).
func TestLargeFreshnessInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 2,000-project browser test")
	}
	b := newBrowser(t)
	projects := largeInstance(2000)
	s := serve(t, projects, nil, nil, scheduler.Config{})
	stale := seedFreshness(t, s, projects)

	served, size := serveTime(t, s.url+"/freshness")
	t.Logf("freshness page of %d images served in %s (%d kB)", len(projects), served, size/1000)

	took := renderFreshness(t, b, s.url+"/freshness")
	rows := eval[[]string](t, b, freshnessRows)
	if len(rows) != 100 || rows[0] != stale[0]+" stale" {
		t.Errorf("first page: %d rows from %v, want 100 from %s stale (the stalest)", len(rows), rows[:min(1, len(rows))], stale[0])
	}
	counts := eval[string](t, b, `document.querySelector("#freshness-counts").textContent`)
	if want := fmt.Sprintf("≠ %d stale @ 0 pinned ? 667 unknown ✓ 666 fresh of 2000 images", len(stale)); strings.Join(strings.Fields(counts), " ") != want {
		t.Errorf("counts %q, want %q", counts, want)
	}
	t.Logf("freshness page of %d images (the first %d) rendered in %s", len(projects), len(rows), took)

	// Next page after next page: every image once, the stale ones first,
	// stalest first.
	seen := map[string]bool{}
	var order []string
	for page := 1; ; page++ {
		for _, r := range eval[[]string](t, b, freshnessRows) {
			if seen[r] {
				t.Fatalf("page %d shows %s again", page, r)
			}
			seen[r] = true
			order = append(order, r)
		}
		if !eval[bool](t, b, `document.getElementById("next-page") !== null`) {
			break
		}
		if page > 20 {
			t.Fatal("more than 20 pages of 100")
		}
		b.open(t, s.url+eval[string](t, b, `document.getElementById("next-page").getAttribute("href")`))
	}
	if len(order) != len(projects) {
		t.Errorf("the pages show %d images, want %d", len(order), len(projects))
	}
	for i, p := range stale {
		if i < len(order) && order[i] != p+" stale" {
			t.Errorf("row %d over the pages: %s, want %s stale", i+1, order[i], p)
			break
		}
	}

	renderFreshness(t, b, s.url+"/freshness?state=stale&limit=500")
	if rows := eval[[]string](t, b, freshnessRows); len(rows) != 500 || rows[499] != stale[499]+" stale" {
		t.Errorf("state=stale&limit=500: %d rows, want the 500 stalest", len(rows))
	}
	if caption := eval[string](t, b, `document.querySelector("#freshness caption").textContent`); !strings.HasPrefix(caption, fmt.Sprintf("images 1–500 of %d", len(stale))) {
		t.Errorf("caption %q", caption)
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// BenchmarkFreshnessPage10000 is issue 30's goal 5 for the Freshness
// page: 10,000 projects' images verified in depsd serve's state (a third
// stale, a third unknown, a third fresh, as verifytest.Seed stores them),
// the page in headless Chromium from navigation to its table shown
// (render-s, the worst load, beside goal-s: < 2 s; served-s is the
// server's part, one plain GET of the page after): the first page (100
// rows, the counts of all 10,000), the stale ones, a group's (500
// images), and the largest page (limit=1000). The server reads and orders
// all 10,000 rows for every page; first-render-s is the first load after
// the seeding.
func BenchmarkFreshnessPage10000(b *testing.B) {
	br := newBrowser(b)
	projects := largeInstance(10000)
	s := serve(b, projects, nil, nil, scheduler.Config{})
	seedFreshness(b, s, projects)
	first := renderFreshness(b, br, s.url+"/freshness")
	for _, page := range []struct{ name, path string }{
		{"first", "/freshness"},
		{"state=stale", "/freshness?state=stale"},
		{"project=team-3", "/freshness?project=acme/apps/team-3/"},
		{"limit=1000", "/freshness?limit=1000"},
	} {
		b.Run(page.name, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				worst = max(worst, renderFreshness(b, br, s.url+page.path))
			}
			rows := eval[int](b, br, `document.querySelectorAll("#freshness tbody tr").length`)
			served, size := serveTime(b, s.url+page.path)
			b.ReportMetric(served.Seconds(), "served-s")
			b.ReportMetric(float64(size)/1000, "kB")
			b.ReportMetric(worst.Seconds(), "render-s")
			b.ReportMetric(2, "goal-s")
			b.ReportMetric(first.Seconds(), "first-render-s")
			b.ReportMetric(float64(rows), "rows")
			b.Logf("freshness page %s of 10,000 images (%d rows shown, %d kB): %.2f s at worst over %d loads, goal < 2 s; the first load %.2f s; the server alone %.2f s",
				page.path, rows, size/1000, worst.Seconds(), b.N, first.Seconds(), served.Seconds())
		})
	}
}

// BenchmarkGraphPage10000 is issue 30's goal 5: the graph page of 10,000
// projects in headless Chromium, from navigation to the picture shown
// (render-s, beside goal-s: < 2 s), for the overview, the focus on a
// runtime image (about 370 projects drawn), on a base image (its 2,100
// projects drawn one edge deep: 11), and on the base with all 2,100 drawn
// (depth=0, asked for; not a goal). first-render-s is the first page after depsd's start-up scan,
// which reads the projects from the state file into the dashboard's
// cache; the loop measures the pages after it.
func BenchmarkGraphPage10000(b *testing.B) {
	br := newBrowser(b)
	s := serve(b, largeInstance(10000), nil, nil, scheduler.Config{})
	first := renderGraph(b, br, s.url+"/graph")
	for _, page := range []struct{ name, path string }{
		{"overview", "/graph"},
		{"focus=runtime", "/graph?focus=acme/images/runtime-3"},
		{"focus=base", "/graph?focus=acme/images/base-0"},
		{"focus=base,depth=0", "/graph?focus=acme/images/base-0&depth=0"},
	} {
		b.Run(page.name, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				worst = max(worst, renderGraph(b, br, s.url+page.path))
			}
			drawn := eval[int](b, br, `document.querySelectorAll("figure.graph svg [data-project]").length`)
			b.ReportMetric(worst.Seconds(), "render-s")
			b.ReportMetric(2, "goal-s")
			b.ReportMetric(first.Seconds(), "first-render-s")
			b.ReportMetric(float64(drawn), "drawn")
			b.Logf("graph page %s of 10,000 projects (%d drawn): %.2f s at worst over %d loads, goal < 2 s; the first page after the scan %.2f s",
				page.path, drawn, worst.Seconds(), b.N, first.Seconds())
		})
	}
}
