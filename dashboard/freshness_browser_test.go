package dashboard_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	registryclient "gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
)

// TestFreshnessInBrowser: images built by the fake GitLab's pipelines and
// pushed to a real registry, read back by verify's Checker into depsd
// serve's store: the Freshness page lists them stalest first with their
// real digests, filters them, links each stale one to what will rebuild
// it; the project page shows its images and the chain page a member's
// verdict. It writes docs/screenshots/freshness.png.
func TestFreshnessInBrowser(t *testing.T) {
	b := newBrowser(t)
	host := registrytest.Start(t)
	reg := host + "/"
	ref := func(p string) string { return reg + p + ":latest" }
	const (
		base, ruby, lint                = "acme/images/base", "acme/images/ruby", "acme/tools/lint"
		shop, docs, ci, static, unbuilt = "acme/apps/shop", "acme/apps/docs", "acme/tools/ci", "acme/apps/static", "acme/apps/unbuilt"
	)
	from := func(p string) map[string]string {
		return map[string]string{"Containerfile": "FROM " + ref(p) + "\nRUN make install\n"}
	}
	projects := []gitlabtest.Project{
		{Path: base, Files: map[string]string{"Containerfile": "FROM debian:bookworm-slim\nRUN apt-get update\n"}},
		{Path: ruby, Files: from(base)}, {Path: lint, Files: from(base)},
		{Path: shop, Files: from(ruby)}, {Path: docs, Files: from(ruby)}, {Path: static, Files: from(ruby)},
		{Path: ci, Files: from(lint)}, {Path: unbuilt, Files: from(lint)},
	}
	amd64 := []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	images := map[string]gitlabtest.Images{
		base: {Platforms: amd64},
		ruby: {From: ref(base), Annotate: true}, lint: {From: ref(base)},
		shop: {From: ref(ruby)}, docs: {From: ref(ruby), Annotate: true},
		ci:     {From: ref(lint), Annotate: true},
		static: {Platforms: amd64}, // FROM scratch in fact: a squashed image, unknown
	}
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-ui", RegistryHost: host})
	t.Cleanup(srv.Close)
	for _, p := range projects {
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
		if im, ok := images[p.Path]; ok {
			if err := srv.SetImages(p.Path, im); err != nil {
				t.Fatal(err)
			}
		}
	}
	// build runs a pipeline of project to success (it pushes the image)
	// and returns the pushed digest.
	build := func(project string) string {
		t.Helper()
		id, err := srv.RunPipeline(project, "", "push")
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []string{"running", "success"} {
			if err := srv.SetPipelineStatus(id, st); err != nil {
				t.Fatal(err)
			}
		}
		pushed := srv.PublishedImages()
		if last := pushed[len(pushed)-1]; last.Project == project && last.PipelineID == id {
			return last.Digest
		}
		t.Fatalf("%s pushed nothing: %v", project, srv.PublishFailures())
		return ""
	}
	// Before depsd looks: everything built on base v1, then base and ruby
	// rebuilt. shop and docs stay on ruby v1, lint on base v1.
	base1 := build(base)
	ruby1, lint1 := build(ruby), build(lint)
	for _, p := range []string{shop, docs, ci, static} {
		build(p)
	}
	base2 := build(base)
	ruby2 := build(ruby)

	s := serveOn(t, srv, projects, map[string]string{}, scheduler.Config{ // every hook in place
		Schedules: []scheduler.ScheduleSpec{{Project: lint, Cron: "0 3 * * *", Timezone: "UTC"}},
	})
	st, err := store.Open(t.Context(), s.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// What depsd saw of the upstreams, and when: base moved 30 h ago, ruby
	// 6 h ago.
	now := time.Now()
	for _, seen := range []struct {
		image, digest string
		ago           time.Duration
	}{
		{ref(base), base1, 72 * time.Hour}, {ref(ruby), ruby1, 70 * time.Hour}, {ref(lint), lint1, 70 * time.Hour},
		{ref(base), base2, 30 * time.Hour}, {ref(ruby), ruby2, 6 * time.Hour},
	} {
		if err := st.RecordUpstreamDigest(t.Context(), seen.image, seen.digest, now.Add(-seen.ago)); err != nil {
			t.Fatal(err)
		}
	}
	at := now.Add(-time.Hour)
	checker := &verify.Checker{Verifier: verify.New(registryclient.New(registryclient.Options{Insecure: []string{host}}), verify.Options{}), Store: st, Now: func() time.Time { return at }}
	platforms := []deps.Platform{{OS: "linux", Architecture: "amd64"}}
	check := func(project, upstream string) {
		t.Helper()
		if _, err := checker.Check(t.Context(), project, []verify.Image{{Image: ref(project), Upstreams: []string{ref(upstream)}}}, platforms); err != nil {
			t.Fatal(err)
		}
	}
	for project, upstream := range map[string]string{ruby: base, lint: base, shop: ruby, docs: ruby, static: ruby, ci: lint} {
		check(project, upstream)
	}

	// A chain rebuilds shop (its pipeline waits), and one rebuilt ci,
	// verified after.
	shopChain := s.rebuild(t, shop)
	ciChain := s.rebuild(t, ci)
	s.drive(t, ci, "running", "success")
	s.waitChain(t, ciChain, chain.Finished)
	at = time.Now()
	check(ci, lint)

	rows := `Array.from(document.querySelectorAll("#freshness tbody tr")).map(r => r.dataset.project + " " + r.dataset.state)`
	t.Run("stalest first, each stale image with what rebuilds it", func(t *testing.T) {
		b.open(t, s.url+"/freshness")
		got := eval[[]string](t, b, rows)
		want := []string{lint + " stale", docs + " stale", shop + " stale", static + " unknown", ruby + " fresh", ci + " fresh"}
		if !slices.Equal(got, want) {
			t.Errorf("rows %v, want %v", got, want)
		}
		fixes := eval[map[string]string](t, b, `Object.fromEntries(Array.from(document.querySelectorAll("#freshness tbody tr")).map(r => [r.dataset.project, (r.querySelector("td.fix a") || {}).href || r.querySelector("td.fix").textContent]))`)
		for project, want := range map[string]string{
			shop: fmt.Sprintf("%s/chains/%d", s.url, shopChain),
			lint: s.url + "/projects/" + lint + "#sched-h",
			docs: "nothing will rebuild it: run depsd rebuild " + docs,
		} {
			if fixes[project] != want {
				t.Errorf("%s fixed by %q, want %q", project, fixes[project], want)
			}
		}
		text := eval[string](t, b, `document.querySelector("#freshness").textContent`)
		text = strings.Join(strings.Fields(text), " ")
		for _, want := range []string{shortDigest(base1) + " → " + shortDigest(base2), shortDigest(ruby1) + " → " + shortDigest(ruby2), "30h00m", "by layers", "by annotation", "no-base"} {
			if !strings.Contains(text, want) {
				t.Errorf("the table lacks %q", want)
			}
		}
		if text := eval[string](t, b, `document.querySelector('#freshness tr[data-project="`+lint+`"] .state').textContent`); !strings.Contains(text, "≠") {
			t.Errorf("stale is told by colour only: %q", text)
		}
		b.screenshot(t, "freshness", true)
	})

	t.Run("filters by state and project", func(t *testing.T) {
		b.open(t, s.url+"/freshness")
		ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#f-state"), "stale"), chromedp.SendKeys(chromedp.CSS("#f-project"), "acme/apps/"),
			chromedp.Submit(chromedp.CSS("#f-project"))); err != nil {
			t.Fatal(err)
		}
		// The form navigates: poll until the filtered page is loaded (an
		// evaluation during the navigation fails, and is tried again).
		for deadline := time.Now().Add(pageTimeout); ; time.Sleep(50 * time.Millisecond) {
			loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.search.includes("state=stale") && document.readyState === "complete"`))
			if err == nil && loaded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the filtered page did not load: %v", err)
			}
		}
		if got, want := eval[[]string](t, b, rows), []string{docs + " stale", shop + " stale"}; !slices.Equal(got, want) {
			t.Errorf("stale in acme/apps/: %v, want %v", got, want)
		}
	})

	t.Run("a stale row leads to the chain that rebuilds it", func(t *testing.T) {
		b.open(t, s.url+"/freshness")
		ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#freshness tr[data-project="`+shop+`"] td.fix a`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-member="`+shop+`"]`))); err != nil {
			t.Fatal(err)
		}
		if h := eval[string](t, b, `document.querySelector("main h1").textContent`); h != fmt.Sprintf("Chain %d", shopChain) {
			t.Errorf("the fix link opened %q", h)
		}
	})

	t.Run("project and chain pages show the verdicts", func(t *testing.T) {
		b.open(t, s.url+"/projects/"+docs)
		if got := eval[string](t, b, `document.querySelector("#images tbody tr").dataset.state`); got != "stale" {
			t.Errorf("docs's image shown %q on its page, want stale", got)
		}
		b.open(t, fmt.Sprintf("%s/chains/%d", s.url, ciChain))
		if got := eval[string](t, b, `document.querySelector('tr[data-member="`+ci+`"] .member-images').textContent`); !strings.Contains(got, "✓ fresh") {
			t.Errorf("ci's verdict in its chain: %q, want fresh", got)
		}
	})

	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// shortDigest is a digest as the pages cut it.
func shortDigest(d string) string { return d[:len("sha256:")+12] }
