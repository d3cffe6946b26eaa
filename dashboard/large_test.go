package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
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

// The 2,000-project instance's graph page renders an overview and focus
// views; the render time is logged (speed is shown, not asserted).
func TestLargeGraphInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 2,000-project browser test")
	}
	b := newBrowser(t)
	s := serve(t, largeInstance(2000), nil, nil, scheduler.Config{})

	took := renderGraph(t, b, s.url+"/graph")
	shown := eval[int](t, b, `document.querySelectorAll("figure.graph svg [data-project]").length`)
	if shown == 0 || shown > 40 {
		t.Errorf("overview of 2,000 projects draws %d of them, want 1-40", shown)
	}
	if n := eval[int](t, b, `document.querySelectorAll("#projects option").length`); n != 2000 {
		t.Errorf("the search offers %d projects, want 2000", n)
	}
	t.Logf("graph page of 2,000 projects (overview of %d) rendered in %s", shown, took)
	b.screenshot(t, "graph-2000")

	took = renderGraph(t, b, s.url+"/graph?focus=acme/images/runtime-3")
	focus := eval[int](t, b, `document.querySelectorAll("figure.graph svg [data-project]").length`)
	down := eval[int](t, b, `document.querySelectorAll("#downstream-list li").length`)
	if focus != down+2 { // the runtime, its base, its downstreams
		t.Errorf("focus on runtime-3 draws %d projects for %d downstreams", focus, down)
	}
	t.Logf("focus view of acme/images/runtime-3 (%d projects) rendered in %s", focus, took)
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

// The Freshness page of 2,000 projects' images renders whole, stalest
// first; the render time is logged (speed is shown, not asserted).
func TestLargeFreshnessInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 2,000-project browser test")
	}
	b := newBrowser(t)
	projects := largeInstance(2000)
	s := serve(t, projects, nil, nil, scheduler.Config{})
	st, err := store.Open(t.Context(), s.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	paths := make([]string, len(projects))
	for i, p := range projects {
		paths[i] = p.Path
	}
	stale, err := verifytest.Seed(t.Context(), st, gitlabtest.DefaultRegistryHost, paths, now)
	if err != nil {
		t.Fatal(err)
	}

	served := time.Now()
	resp, err := http.Get(s.url + "/freshness")
	if err != nil {
		t.Fatal(err)
	}
	size, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.Logf("freshness page of %d images served in %s (%d kB)", len(projects), time.Since(served), size/1000)

	ctx, cancel := context.WithTimeout(b.ctx, 2*pageTimeout)
	defer cancel()
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/freshness"), chromedp.WaitVisible(chromedp.CSS("#freshness"))); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if n := eval[int](t, b, `document.querySelectorAll("#freshness tbody tr").length`); n != len(projects) {
		t.Errorf("%d rows, want %d (one image per project)", n, len(projects))
	}
	first := eval[string](t, b, `document.querySelector("#freshness tbody tr").dataset.project + " " + document.querySelector("#freshness tbody tr").dataset.state`)
	if first != stale[0]+" stale" {
		t.Errorf("first row %q, want %s stale (the stalest)", first, stale[0])
	}
	t.Logf("freshness page of %d images rendered in %s", len(projects), took)
	b.open(t, s.url+"/freshness?state=stale")
	if n := eval[int](t, b, `document.querySelectorAll("#freshness tbody tr").length`); n != len(stale) {
		t.Errorf("state=stale: %d rows, want %d", n, len(stale))
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
